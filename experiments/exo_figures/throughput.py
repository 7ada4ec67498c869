"""How a configuration's throughput is found (docs/figures.md, "Throughput rule").

The thesis "control[s] our client send rate to maintain a constant packet loss of approximately
5%". Ours: the throughput of a configuration is the answered request rate of the run with the
highest offered rate whose loss is <= max_loss (5%). Finding that rate by blind bisection costs
many runs, so the search uses what one run tells about the cluster: the share of the offered
load that reached each capacity-limited target (every db node, the cache node). With shares s_j
and limits c_j the loss at offered rate r is predicted as

    loss(r) = sum_j max(0, r * s_j - c_j) / r            (increasing in r)

so a probe run at a safe rate gives the rate to try; each further run corrects for loss the
model does not see (the switch, sockets) by the measured excess. Pure: `measure` is injected.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional


@dataclass
class Measurement:
    offered_rps: float
    answered_rps: float
    loss: float
    shares: Mapping[str, float]        # target -> share of the offered load that reached it
    capacities: Mapping[str, float]    # target -> its limit (req/s)
    detail: dict = field(default_factory=dict)


def predicted_loss(rate: float, shares: Mapping[str, float], caps: Mapping[str, float]) -> float:
    if rate <= 0:
        return 0.0
    over = sum(max(0.0, rate * s - caps[t]) for t, s in shares.items() if t in caps)
    return over / rate


def rate_for_loss(shares: Mapping[str, float], caps: Mapping[str, float], target: float,
                  hi: Optional[float] = None) -> float:
    """The highest offered rate whose predicted loss is <= target (bisection)."""
    hi = hi or 10 * sum(caps.values()) / max(1e-9, max(shares.values(), default=1e-9))
    if predicted_loss(hi, shares, caps) <= target:
        return hi
    lo = 0.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if predicted_loss(mid, shares, caps) <= target:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass
class Search:
    throughput_rps: float
    best: Measurement
    runs: list[Measurement]
    met_loss_rule: bool


def find_throughput(measure: Callable[[float], Measurement], probe_rate: float, max_loss: float = 0.05,
                    runs: int = 3, aim: float = 0.8) -> Search:
    """Probe at `probe_rate`, then up to `runs` runs aimed at `aim` x max_loss predicted loss."""
    done = [measure(probe_rate)]
    extra = 0.0  # loss the model does not explain, from the last run
    for _ in range(runs):
        last = done[-1]
        extra = max(0.0, last.loss - predicted_loss(last.offered_rps, last.shares, last.capacities))
        target = max(0.002, aim * max_loss - extra)
        rate = rate_for_loss(last.shares, last.capacities, target)
        ok = [m for m in done if m.loss <= max_loss]
        if ok and abs(rate - max(m.offered_rps for m in ok)) / rate < 0.02:
            break  # the best run already sits where the model points
        done.append(measure(rate))
    ok = [m for m in done if m.loss <= max_loss]
    if ok:
        best = max(ok, key=lambda m: m.answered_rps)
        return Search(best.answered_rps, best, done, True)
    best = min(done, key=lambda m: m.loss)
    return Search(best.answered_rps, best, done, False)
