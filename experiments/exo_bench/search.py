"""The loss rule every case is judged by: its ceiling is the highest answered rate among runs
that lost at most 1% of what they sent. Found by bracketing: double the offered rate from a
start until a run loses more than 1% (or the generator cannot offer the rate), then bisect
between the highest passing and the lowest failing rate until they are within `precision` or
the run budget is spent. A failing rate is run a second time and fails only if that run fails
too (the same for every case), so one stall does not cap a server. Every run is kept (rate, offered, answered, loss, latency), so a reader
can see the bracket. Pure logic: `run_at(rate)` does the measuring."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

LOSS_LIMIT = 0.01
# A run whose generator put out less than this share of the asked rate measured the generator,
# not the server: the search does not go above it and the ceiling says so.
OFFERED_SHARE_MIN = 0.95


@dataclass
class Run:
    rate: float            # asked of the generator, requests/s
    offered_rps: float     # what it sent
    answered_rps: float    # what came back (per second of the send phase)
    loss: float            # (sent - answered) / sent
    p50_us: Optional[float] = None
    p99_us: Optional[float] = None
    p999_us: Optional[float] = None
    errors: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def generator_limited(self) -> bool:
        return self.offered_rps < OFFERED_SHARE_MIN * self.rate

    def passes(self, loss_limit: float = LOSS_LIMIT) -> bool:
        return self.loss <= loss_limit and self.errors == 0 and not self.generator_limited

    def as_dict(self) -> dict:
        d = asdict(self)
        d["generator_limited"] = self.generator_limited
        return d


@dataclass
class Ceiling:
    rps: Optional[float]          # highest answered rate of a passing run; None if none passed
    runs: list[Run]
    bracket: dict                 # {"pass": rate, "fail": rate or None}
    limited_by: Optional[str]     # "load generator" / "search budget" / "max rate" / None

    def as_dict(self) -> dict:
        return {"rps": self.rps, "loss_limit": LOSS_LIMIT, "bracket": self.bracket,
                "limited_by": self.limited_by, "runs": [r.as_dict() for r in self.runs]}


def find_ceiling(run_at: Callable[[float], Run], start: float, max_rate: float,
                 min_rate: float = 100.0, precision: float = 0.05, max_runs: int = 10,
                 loss_limit: float = LOSS_LIMIT, confirm_failures: bool = True,
                 progress: Callable[[Run], None] = lambda r: None) -> Ceiling:
    runs: list[Run] = []
    lo: Optional[float] = None   # highest passing rate
    hi: Optional[float] = None   # lowest failing rate
    gen_limited = False

    def measure(rate: float) -> bool:
        nonlocal lo, hi, gen_limited
        r = run_at(rate)
        runs.append(r)
        progress(r)
        ok = r.passes(loss_limit)
        if not ok and not r.generator_limited and confirm_failures and len(runs) < max_runs:
            # One stall (a page-cache or scheduler hiccup) must not cap a server for good: a
            # failing rate fails only if a second run at it fails too. Both runs are kept.
            r = run_at(rate)
            runs.append(r)
            progress(r)
            ok = r.passes(loss_limit)
        if ok:
            lo = rate if lo is None else max(lo, rate)
        else:
            hi = rate if hi is None else min(hi, rate)
            gen_limited = gen_limited or (r.generator_limited and r.loss <= loss_limit)
        return ok

    rate = min(start, max_rate)
    if measure(rate):
        while len(runs) < max_runs and rate < max_rate:
            rate = min(rate * 2, max_rate)
            if not measure(rate):
                break
    else:
        while len(runs) < max_runs and rate > min_rate:
            rate = max(rate / 2, min_rate)
            if measure(rate):
                break
    while lo is not None and hi is not None and hi / lo > 1 + precision and len(runs) < max_runs:
        measure(math.sqrt(lo * hi))

    passing = [r for r in runs if r.passes(loss_limit)]
    best = max((r.answered_rps for r in passing), default=None)
    limited_by = None
    if gen_limited:
        limited_by = "load generator"
    elif hi is None and lo is not None and lo >= max_rate:
        limited_by = "max rate"
    elif hi is None:
        limited_by = "search budget"  # no run failed: the ceiling is higher than measured
    elif lo is not None and hi is not None and hi / lo > 1 + precision:
        limited_by = "search budget"
    return Ceiling(best, runs, {"pass": lo, "fail": hi}, limited_by)
