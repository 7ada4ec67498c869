"""The static cluster (thesis 4.2: caches pre-populated, rules pre-installed): Zipf traffic,
keys placed on db nodes, a cache holding what selection picks, and the four systems' throughput
under both loss rules."""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import selector as sel
from .baselines import WITH_IDEAL, systems
from .common import Scale, fill_defaults
from .placement import Placement, key_names, node_shares
from .throughput import LOSS_RULES, Loads, Point, ideal, max_rate
from .zipf import Zipf

_names_memo: dict[int, np.ndarray] = {}


def _names(count: int) -> np.ndarray:
    best = max((k for k in _names_memo if k >= count), default=None)
    if best is None:
        _names_memo.clear()
        _names_memo[count] = key_names(np.arange(count))
        best = count
    return _names_memo[best][:count]


class StaticModel:
    """One (scale, alpha, placement). Ranks 1..top are explicit; key id = rank - 1."""

    def __init__(self, scale: Scale, alpha: float, placement: Optional[Placement] = None,
                 top: int = 1_000_000, lookaside_miss_cost: float = 1.0, readthrough_miss_cost: float = 2.0,
                 min_rate: Optional[float] = None):
        self.scale = scale
        self.cluster = scale.cluster()
        self.placement = placement or Placement(scale.nodes)
        self.zipf = Zipf(scale.n_keys, alpha, top)
        self.owner = self.placement.owners_of_ids(np.arange(self.zipf.top))
        self.base = node_shares(self.owner, self.zipf.p, self.zipf.tail_mass, self.placement)
        self.costs = (lookaside_miss_cost, readthrough_miss_cost)
        self.min_rate = fill_defaults()["cache_fill"]["min_rate"] if min_rate is None else min_rate

    # ------------------------------------------------------------------ cache contents

    def selected(self, k: int, use_selector: bool = True) -> int:
        """How many of the hottest ranks a k-entry cache holds. With use_selector the cache
        node's select_keys decides, on exact rates at the ideal offered rate (so min_rate
        applies); it admits a prefix of the ranks (they are sorted), which is checked."""
        k = min(k, self.zipf.top)
        if k <= 0:
            return 0
        if not use_selector:
            return k
        m = min(self.zipf.top, k + max(16, k // 4))  # a few more candidates than slots
        lam = ideal(self.cluster, self.zipf.top_share(k))
        s = sel.get().select(_names(m), self.zipf.p[:m] * lam, capacity=k, min_rate=self.min_rate)
        if not np.array_equal(s.admit, np.arange(len(s.admit))):
            raise AssertionError("select_keys did not admit the hottest ranks in order")
        return len(s.admit)

    def cached_node_share(self, held: int) -> np.ndarray:
        return np.bincount(self.owner[:held], weights=self.zipf.p[:held], minlength=self.placement.nodes)

    def loads(self, k: int, use_selector: bool = True) -> tuple[int, dict[str, Loads]]:
        held = self.selected(k, use_selector)
        return held, systems(self.base, self.cached_node_share(held), float(self.zipf.cum[held]), *self.costs)

    # ------------------------------------------------------------------ throughput

    def evaluate(self, k: int, use_selector: bool = True, which=WITH_IDEAL) -> dict:
        """{system: {rule: Point}} (systems incl. 'ideal'), plus 'held' and 'hit'."""
        held, loads = self.loads(k, use_selector)
        out: dict = {name: {rule: max_rate(loads[name], self.cluster, ml) for rule, ml in LOSS_RULES.items()}
                     for name in which}
        out["held"] = held
        out["hit"] = float(self.zipf.cum[held])
        return out

    def db_util_min(self, k: int) -> float:
        """Smallest db node utilisation at Exoskeleton's 0%-loss throughput with the k hottest
        keys cached (the scale study's criterion; no selector: a prefix, see selected())."""
        _, loads = self.loads(k, use_selector=False)
        pt: Point = max_rate(loads["exoskeleton"], self.cluster, 0.0)
        return float((pt.db_answered / self.cluster.db_cap).min())

    def describe(self) -> dict:
        return {"alpha": self.zipf.alpha, "n_keys": self.zipf.n, "explicit_ranks": self.zipf.top,
                "tail_mass": self.zipf.tail_mass,
                "tail_rel_std": self.zipf.tail_rel_std(float(self.placement.fraction.mean())),
                "top1_share": float(self.zipf.p[0]), "placement": self.placement.describe()}
