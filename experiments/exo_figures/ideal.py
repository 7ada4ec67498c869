"""The ideal cluster throughput of Figure 4.2: every db node at its limit plus what the cache
takes, i.e. the offered rate r at which either the db nodes together or the cache node is full:

    r = min(db_capacity / (1 - h), cache_capacity / h),   h = share of the cached hottest keys

h from the same Zipf math as the simulator (exo_sim.zipf.power_sum), uniform: h = k / n.
"""
from __future__ import annotations

from exo_sim.zipf import power_sum


def top_share(k: int, n: int, alpha: float) -> float:
    if k <= 0:
        return 0.0
    if alpha == 0:
        return min(1.0, k / n)
    return power_sum(1, min(k, n), alpha) / power_sum(1, n, alpha)


def ideal_rps(db_capacity: float, cache_capacity: float, h: float) -> float:
    by_db = db_capacity / (1 - h) if h < 1 else float("inf")
    by_cache = cache_capacity / h if h > 0 else float("inf")
    return min(by_db, by_cache)
