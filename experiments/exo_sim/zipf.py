"""Zipf(alpha) traffic over n keys without materialising n (n = 1e8 or 1e9).

P(rank r) = r^-alpha / H(n, alpha), H the generalized harmonic number. The `top` hottest ranks
(default 10^6) get explicit probabilities (a numpy array); everything beyond is one number, the
*tail mass*, which placement.py spreads over the db nodes by their expected share of the hash
space. H(n) = exact sum of the top ranks + the Euler-Maclaurin sum of ranks top+1..n: the same
math as emulator/loadgen/zipf.cc (integral, end-point terms, three Bernoulli corrections; its
relative error is far below 1e-12 once the lower end is >= 1000).

Why the tail can be an expected value: a node's tail load is a sum over ~(n - top)/N keys, each
landing on the node with probability f (its share of the hash space). Its variance is
f(1-f) * sum_{r>top} p_r^2, so the relative spread is sqrt((1-f)/f * S2) / T, with T the tail
mass and S2 = sum of p_r^2 over the tail (tail_rel_std() computes it; about 1e-4 at thesis
scale). The explicit ranks carry all the imbalance that matters.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from exo_testbed.zipf_math import power_sum

@lru_cache(maxsize=64)
def _top_weights(top: int, alpha: float) -> np.ndarray:
    w = np.arange(1, top + 1, dtype=np.float64) ** -alpha
    w.setflags(write=False)
    return w


@dataclass
class Zipf:
    """Zipf(alpha) over n keys with the `top` hottest ranks explicit.

    p[r-1]      P(rank r) for r = 1..top
    tail_mass   P(rank > top)
    cum[k]      share of the k hottest ranks (cum[0] = 0), k <= top
    """
    n: int
    alpha: float
    top: int = 1_000_000
    p: np.ndarray = field(init=False, repr=False)
    cum: np.ndarray = field(init=False, repr=False)
    harmonic: float = field(init=False)
    tail_mass: float = field(init=False)

    def __post_init__(self) -> None:
        if self.n < 1 or self.alpha < 0:
            raise ValueError(f"Zipf needs n >= 1 and alpha >= 0 (got n={self.n}, alpha={self.alpha})")
        self.top = min(self.top, self.n)
        w = _top_weights(self.top, self.alpha)
        head = float(np.sum(w[::-1]))
        tail = power_sum(self.top + 1, self.n, self.alpha)
        self.harmonic = head + tail
        self.p = w / self.harmonic
        self.tail_mass = tail / self.harmonic
        self.cum = np.concatenate(([0.0], np.cumsum(self.p)))

    def top_share(self, k: int) -> float:
        """Share of requests to the k hottest keys: H(k)/H(n) (the hit ratio of a perfect top-k cache)."""
        if k <= 0:
            return 0.0
        if k <= self.top:
            return float(self.cum[k])
        return float(self.cum[-1]) + power_sum(self.top + 1, min(k, self.n), self.alpha) / self.harmonic

    def pmf(self, ranks: np.ndarray) -> np.ndarray:
        """P(rank) for any ranks 1..n (numpy array), explicit or not."""
        ranks = np.asarray(ranks, dtype=np.float64)
        return np.where((ranks >= 1) & (ranks <= self.n), ranks ** -self.alpha / self.harmonic, 0.0)

    def tail_rel_std(self, node_fraction: float) -> float:
        """Relative standard deviation of one node's tail load when the tail keys are hashed at
        random onto a share `node_fraction` of the hash space (see the module docstring)."""
        if self.tail_mass <= 0 or not 0 < node_fraction < 1:
            return 0.0
        s2 = power_sum(self.top + 1, self.n, 2 * self.alpha) / self.harmonic ** 2
        return math.sqrt((1 - node_fraction) / node_fraction * s2) / self.tail_mass


def swap_ranks(ids: np.ndarray, n: int, hot: int, swaps: int) -> np.ndarray:
    """Popularity rank (1..n) of each key id after `swaps` hot-set swaps: the inverse of the
    emulator's HotSetSwap::key_for_rank (emulator/loadgen/hot_set_swap.h, thesis Figure 4.4).
    Swap s moves cold block C_s = ids [n - s*hot, n - (s-1)*hot) to the hot ranks reversed,
    the original hot keys C_0 = ids [0, hot) to the coldest block P_1 reversed, and each earlier
    hot set C_{j-1} (2 <= j <= s) to P_j in order; every other key keeps rank id + 1."""
    ids = np.asarray(ids, dtype=np.int64)
    r = ids.copy()  # 0-based position
    if swaps <= 0 or hot <= 0:
        return r + 1
    if swaps > n // hot - 1:
        raise ValueError(f"{swaps} swaps need more cold blocks than n / hot - 1 = {n // hot - 1}")

    def cold_start(j):
        return n - j * hot

    # which block C_j an id belongs to: j = 0 for [0, hot), j >= 1 for [cold_start(j), +hot)
    j = np.where(ids < hot, 0, (n - 1 - ids) // hot + 1)
    c0 = ids < hot
    r[c0] = cold_start(1) + hot - 1 - ids[c0]
    cs = (j == swaps) & ~c0
    r[cs] = hot - 1 - (ids[cs] - cold_start(swaps))
    mid = (j >= 1) & (j < swaps) & ~c0
    r[mid] = cold_start(j[mid] + 1) + (ids[mid] - cold_start(j[mid]))
    return r + 1
