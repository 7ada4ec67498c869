"""The ideal cluster throughput (Figures 4.2 and 4.3): every db node at its limit plus what the
cache takes, i.e. the offered rate r at which either the db nodes together or the cache node is
full:

    r = min(db_capacity / (1 - h), cache_capacity / h),   h = share of the cached hottest keys

h from zipf_math.top_share. Both back ends use this one function: the Mininet figures for their
`ideal` series, the simulator for its `ideal` system (exo_sim.throughput.ideal).
"""
from __future__ import annotations

from .zipf_math import top_share  # noqa: F401  (re-exported: the ideal's h)


def ideal_rps(db_capacity: float, cache_capacity: float, h: float) -> float:
    by_db = db_capacity / (1 - h) if h < 1 else float("inf")
    by_cache = cache_capacity / h if h > 0 else float("inf")
    return min(by_db, by_cache)
