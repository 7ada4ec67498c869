"""The demo/test key space: key names by popularity rank, and a Zipf sampler over ranks."""
from __future__ import annotations

import numpy as np


def key_name(rank: int) -> bytes:
    """Rank 0 is the hottest key under Zipf."""
    return b"key:%d" % rank


class ZipfRanks:
    """Samples ranks 0..n-1 with P(r) proportional to 1/(r+1)^alpha (alpha 0 = uniform).

    Builds an n-entry CDF, fine for the demo's 10^5..10^6 keys; the native load generator of
    the evaluation samples without a table."""

    def __init__(self, n: int, alpha: float, seed: int = 0):
        weights = 1.0 / np.power(np.arange(1, n + 1, dtype=np.float64), alpha)
        self.cdf = np.cumsum(weights)
        self.cdf /= self.cdf[-1]
        self.rng = np.random.default_rng(seed)

    def sample(self, size: int) -> np.ndarray:
        return np.searchsorted(self.cdf, self.rng.random(size), side="right")

    def share_of_top(self, k: int) -> float:
        """Probability that a request goes to one of the k hottest keys."""
        return float(self.cdf[min(k, len(self.cdf)) - 1]) if k > 0 else 0.0


class HotSetSwap:
    """Maps popularity ranks to keys, with the hot set swappable (thesis 4.4, issue 3's test):
    each swap() exchanges the keys of the `count` hottest ranks with those of the `count` coldest,
    so the keys that were hottest become the coldest and cold keys become the hottest. An even
    number of swaps restores the original mapping."""

    def __init__(self, n: int, count: int):
        if not 0 <= count <= n // 2:
            raise ValueError(f"swap count {count} must be between 0 and n/2 ({n // 2})")
        self.n, self.count, self.swaps = n, count, 0

    def swap(self) -> None:
        self.swaps += 1

    def rank_of_key(self, rank: int) -> int:
        """The key index that currently has popularity `rank`."""
        if self.swaps % 2 and (rank < self.count or rank >= self.n - self.count):
            return self.n - 1 - rank
        return rank

    def key(self, rank: int) -> bytes:
        return key_name(self.rank_of_key(rank))

    def hottest(self, k: int) -> list[bytes]:
        return [self.key(r) for r in range(k)]
