"""Zipf arithmetic of the thesis test bed, shared by both back ends (the Mininet figures and the
simulator): sums of r^-alpha over any range of ranks, and the share of the traffic that the k
hottest of n keys carry.

power_sum is the same math as emulator/loadgen/zipf.cc, the generator the Mininet figures run:
exact below EM_PREFIX and for short ranges, Euler-Maclaurin (integral, end-point terms, three
Bernoulli corrections) for the rest; its relative error is far below 1e-12 once the lower end is
>= 1000 (tests/unit/test_sim_zipf.py).
"""
from __future__ import annotations

import math

import numpy as np

EM_PREFIX = 1000  # ranks below this are always summed term by term


def _integral_power(m: float, b: float, alpha: float) -> float:
    """Integral of x^-alpha over [m, b], continuous through alpha = 1 (zipf.cc's form)."""
    l = math.log(b / m)
    t = (1.0 - alpha) * l
    e = math.expm1(t) / t if abs(t) > 1e-8 else 1.0 + t * 0.5 * (1.0 + t / 3.0 * (1.0 + 0.25 * t))
    return m ** (1.0 - alpha) * l * e


def _exact(lo: int, hi: int, alpha: float) -> float:
    """sum_{i=lo..hi} i^-alpha, term by term (smallest first)."""
    if hi < lo:
        return 0.0
    return float(np.sum(np.arange(hi, lo - 1, -1, dtype=np.float64) ** -alpha))


def power_sum(lo: int, hi: int, alpha: float) -> float:
    """sum_{i=lo..hi} i^-alpha for any hi (up to 1e12 and beyond): exact below EM_PREFIX and for
    short ranges, Euler-Maclaurin for the rest."""
    if hi < lo:
        return 0.0
    if hi - lo < 100_000 or hi < EM_PREFIX:
        return _exact(lo, hi, alpha)
    head = 0.0
    if lo < EM_PREFIX:
        head, lo = _exact(lo, EM_PREFIX - 1, alpha), EM_PREFIX
    a, m, b = alpha, float(lo), float(hi)

    def d(x: float, k: int) -> float:  # (2k-1)-th derivative of x^-a, k = 1..3
        c = -a
        for j in range(1, 2 * k - 1):
            c *= a + j
        return c * x ** (-a - (2 * k - 1))

    tail = (_integral_power(m, b, a) + 0.5 * (m ** -a + b ** -a) + (d(b, 1) - d(m, 1)) / 12.0
            - (d(b, 2) - d(m, 2)) / 720.0 + (d(b, 3) - d(m, 3)) / 30240.0)
    return head + tail


def top_share(k: int, n: int, alpha: float) -> float:
    """The share of requests for the k hottest of n keys under Zipf(alpha); alpha 0 is uniform."""
    if k <= 0:
        return 0.0
    if alpha == 0:
        return min(1.0, k / n)
    return power_sum(1, min(k, n), alpha) / power_sum(1, n, alpha)
