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
