"""How a configuration's throughput is found (docs/figures.md, "The loss rule").

The thesis "control[s] our client send rate to maintain a constant packet loss of approximately
5%". Ours, one rule for every case and every L (5%, the thesis's, and 0.1%, the strict one):

    the throughput at loss L is the answered rate at the offered rate where the loss is exactly L,
    taken from measured runs only: linear interpolation between `lo`, the run with the highest
    offered rate whose loss is <= L, and `hi`, the next run above it in offered rate (its loss
    is > L by the choice of lo) that answered at least 99% of what lo did (answered_less), if
    they are at most `max_width` apart; or lo's own answered rate if its loss is already in
    [0.9 L, L].

Interpolation is on (offered rate, loss); the point's answered rate is r_L (1 - L), which is what
a run offered r_L and losing exactly L answers. If loss never falls as the rate rises, the true
r_L lies between lo and hi, so [lo, hi] (x (1 - L)) is reported as the point's bounds.

The search only chooses which rates to run; the rule above decides. It uses what one run tells
about the cluster: the share of the offered load that reached each capacity-limited target
(every db node, the cache node). With shares s_j and limits c_j the loss at offered rate r is

    loss(r) = sum_j max(0, r * s_j - c_j) / r            (increasing in r)

fitted to the runs (estimate_rate: the loss the model does not see, and the knee's place). The
next run goes where the fitted model puts 0.95 L; once two runs bracket L but are too far apart,
it goes just inside the bracket from the run the model points at (so a right model closes it
in one run), else to the secant (while hi lost at most 5 L), else halfway. Pure: `measure` is
injected.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

SINGLE_RUN_FLOOR = 0.9   # a run whose loss is in [0.9 L, L] stands for the point by itself
ANSWERED_TOL = 0.01      # a run above lo answering over 1% less than lo caught a stall (answered_less)
# lo and hi at most 5% apart in offered rate. Across the knee (where the first target fills) loss
# is not linear in the rate, and the strict rule's L lies just past it: the width bounds the error.
MAX_WIDTH = 0.05
AIM = 0.95               # next run aimed at 0.95 L: the middle of the single-run window
K_RANGE = (0.5, 2.0)     # how far the fit may move the knee (shares x k)
CALIBRATE_MIN = 0.002    # a run is past the knee when it lost this much more than the lowest-rate run
SECANT_MAX = 5.0         # the secant is tried only while hi lost at most 5 L
STEP = 0.02              # least step beyond the runs so far when the model points inside them


@dataclass
class Measurement:
    offered_rps: float
    answered_rps: float
    loss: float
    shares: Mapping[str, float]        # target -> share of the offered load that reached it
    capacities: Mapping[str, float]    # target -> its limit (req/s)
    detail: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        d = {"offered_rps": round(self.offered_rps, 1), "answered_rps": round(self.answered_rps, 1),
             "loss": round(self.loss, 6)}
        if self.shares and self.capacities:
            # a model, not a measurement: what the targets' overload alone would lose at this rate
            d["model_loss"] = round(predicted_loss(self.offered_rps, self.shares, self.capacities), 6)
        if "loadavg_1m" in self.detail:   # host load before and after the run (runner.measure)
            d["loadavg_1m"] = self.detail["loadavg_1m"]
        return d


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


def rule_text(max_loss: float, max_width: float = MAX_WIDTH) -> str:
    return (f"throughput at loss exactly {max_loss:g}: linear interpolation on (offered, loss) between the run "
            f"with the highest offered rate whose loss is <= {max_loss:g} and the next run above it that "
            f"answered at least {1 - ANSWERED_TOL:.0%} of what it did (at most {max_width:.0%} apart in offered "
            f"rate), answered = offered x (1 - {max_loss:g}); or that "
            f"run's own answered rate if its loss is in [{SINGLE_RUN_FLOOR * max_loss:g}, {max_loss:g}]")


@dataclass
class LossPoint:
    """The throughput at loss L, or why the runs do not give it."""
    max_loss: float
    met_loss_rule: bool
    why: Optional[str]
    method: Optional[str]                    # "bracket" | "single_run" | None
    throughput_rps: Optional[float]          # None when the rule is not met
    offered_rps: Optional[float]             # the (interpolated) offered rate at the point
    loss: Optional[float]                    # L for a bracket, the run's own loss for a single run
    lo: Optional[Measurement]                # the highest-offered run with loss <= L
    hi: Optional[Measurement]                # the next run above it (loss > L)
    max_width: float = MAX_WIDTH
    below_lo_over_l: int = 0                 # runs under lo's rate that lost more than L (noise)
    above_lo_answered_less: int = 0          # runs over lo's rate that answered less (stalls, not used)

    @property
    def bounds_rps(self) -> Optional[list[float]]:
        """Answered-rate range holding the true point, if loss never falls as the rate rises."""
        if self.lo is None:
            return None
        lo_b = self.lo.answered_rps if self.method == "single_run" else self.lo.offered_rps * (1 - self.max_loss)
        hi_b = None if self.hi is None else self.hi.offered_rps * (1 - self.max_loss)
        return [round(lo_b, 1), None if hi_b is None else round(hi_b, 1)]

    def as_json(self) -> dict:
        rnd = (lambda v, n=1: None if v is None else round(v, n))
        return {"loss_rule": self.max_loss, "rule": rule_text(self.max_loss, self.max_width),
                "met_loss_rule": self.met_loss_rule, "why": self.why, "method": self.method,
                "throughput_rps": rnd(self.throughput_rps), "offered_rps": rnd(self.offered_rps),
                "loss": rnd(self.loss, 6),
                "from_runs": [m.as_json() for m in (self.lo, self.hi) if m is not None],
                "bounds_rps": self.bounds_rps,
                "bracket_width": (None if self.lo is None or self.hi is None
                                  else round(self.hi.offered_rps / self.lo.offered_rps - 1, 4)),
                "runs_below_with_loss_over_rule": self.below_lo_over_l,
                "runs_above_answering_less": self.above_lo_answered_less}


def answered_less(m: Measurement, lo: Measurement) -> bool:
    """m, offered more than lo, answered less than lo did: offering more never makes a cluster
    answer less (past its knee the answered rate stays at its capacity), so m caught a stall
    (the switch, the host) and says nothing about the loss at its rate."""
    return m.offered_rps > lo.offered_rps and m.answered_rps < (1 - ANSWERED_TOL) * lo.answered_rps


def bracket(runs: Sequence[Measurement], max_loss: float) -> tuple[Optional[Measurement], Optional[Measurement]]:
    """(lo, hi): the highest-offered run with loss <= L and the next run above it in offered rate
    that answered at least what lo did (answered_less)."""
    ok = [m for m in runs if m.loss <= max_loss]
    lo = max(ok, key=lambda m: m.offered_rps) if ok else None
    above = [m for m in runs if m.loss > max_loss and (lo is None or (m.offered_rps > lo.offered_rps
                                                                     and not answered_less(m, lo)))]
    hi = min(above, key=lambda m: m.offered_rps) if above else None
    return lo, hi


def point_at_loss(runs: Sequence[Measurement], max_loss: float, max_width: float = MAX_WIDTH) -> LossPoint:
    """The rule (module doc) applied to the runs so far."""
    L = max_loss
    lo, hi = bracket(runs, L)
    if lo is None:
        best = min(runs, key=lambda m: m.loss) if runs else None
        why = ("no runs" if best is None else
               f"every run lost more than {L:g}: the least, {best.loss:.4%}, at {best.offered_rps:.0f} req/s offered")
        if best is not None and predicted_loss(best.offered_rps, best.shares, best.capacities) == 0 and best.shares:
            why += " where no target was over its limit (loss the model does not see: switch, sockets)"
        return LossPoint(L, False, why, None, None, None, None, None, hi, max_width)
    noisy = sum(1 for m in runs if m.offered_rps < lo.offered_rps and m.loss > L)
    stalled = sum(1 for m in runs if answered_less(m, lo))
    if lo.loss >= SINGLE_RUN_FLOOR * L:
        return LossPoint(L, True, None, "single_run", lo.answered_rps, lo.offered_rps, lo.loss, lo, hi,
                         max_width, noisy, stalled)
    if hi is None:
        why = (f"no run above {L:g} loss: the highest offered, {lo.offered_rps:.0f} req/s, lost {lo.loss:.4%} "
               f"(below {SINGLE_RUN_FLOOR * L:g})")
        if stalled:
            why += f"; {stalled} run(s) above it answered less than it did (a stall) and are not used"
        return LossPoint(L, False, why, None, None, None, None, lo, None, max_width, noisy, stalled)
    width = hi.offered_rps / lo.offered_rps - 1
    if width > max_width + 1e-9:
        why = (f"the runs around {L:g} loss are {width:.1%} apart in offered rate "
               f"({lo.offered_rps:.0f} req/s at {lo.loss:.4%}, {hi.offered_rps:.0f} at {hi.loss:.4%}), "
               f"more than {max_width:.0%}")
        return LossPoint(L, False, why, None, None, None, None, lo, hi, max_width, noisy, stalled)
    w = (L - lo.loss) / (hi.loss - lo.loss)
    r = lo.offered_rps + w * (hi.offered_rps - lo.offered_rps)
    return LossPoint(L, True, None, "bracket", r * (1 - L), r, L, lo, hi, max_width, noisy, stalled)


def _scaled(shares: Mapping[str, float], k: float) -> dict[str, float]:
    return {t: k * v for t, v in shares.items()}


def clean_runs(runs: Sequence[Measurement]) -> list[Measurement]:
    """The runs without those that caught a stall: a run that lost much more than a run at a
    higher rate, or answered less than a run at a lower rate (answered_less)."""
    return [m for m in runs if not any(o.offered_rps > m.offered_rps and m.loss - o.loss > CALIBRATE_MIN
                                       for o in runs) and not any(answered_less(m, o) for o in runs)]


def _fit(runs: Sequence[Measurement]) -> Optional[tuple[float, float, Measurement]]:
    """(base, k, ref): the model fitted to the runs (estimate_rate), or None if nothing to fit."""
    clean = clean_runs(runs) or list(runs)
    low = min(clean, key=lambda m: m.offered_rps)
    base = max(0.0, low.loss - predicted_loss(low.offered_rps, low.shares, low.capacities))
    past = [m for m in clean if m.loss - base >= CALIBRATE_MIN and m.shares]
    ref = min(past, key=lambda m: m.loss) if past else max(runs, key=lambda m: m.offered_rps)
    if not ref.shares:
        return None
    k = 1.0
    if past:
        want = ref.loss - base
        k_lo, k_hi = K_RANGE       # predicted loss rises with k; a calibration, not a new model
        if predicted_loss(ref.offered_rps, _scaled(ref.shares, k_hi), ref.capacities) < want:
            k = k_hi
        elif predicted_loss(ref.offered_rps, _scaled(ref.shares, k_lo), ref.capacities) >= want:
            k = k_lo
        else:
            for _ in range(60):
                mid = (k_lo + k_hi) / 2
                if predicted_loss(ref.offered_rps, _scaled(ref.shares, mid), ref.capacities) < want:
                    k_lo = mid
                else:
                    k_hi = mid
            k = k_hi
    return base, k, ref


def estimate_rate(runs: Sequence[Measurement], target: float, check_loss: Optional[float] = None) -> Optional[float]:
    """Offered rate at which the model, fitted to the runs, predicts `target` loss; None if the
    runs leave nothing for it to place, or (with check_loss = L) if the fitted model puts any run
    on the wrong side of L: then it does not describe this cluster here and the runs decide.
    Fitted twice: the loss it does not see at all (switch, sockets) is the lowest-rate run's loss
    beyond the prediction, added at every rate; and the knee is placed by scaling every share by
    one factor k so that the least lossy run past the knee (not counting runs that lost more than
    one at a higher rate) loses what it measured (a node's token bucket lets it serve a little
    over its limit; the switch and the cache node's host lose frames the shares do not show)."""
    fit = _fit(runs)
    if fit is None:
        return None
    base, k, ref = fit
    if check_loss is not None:
        for m in clean_runs(runs):
            if (predicted_loss(m.offered_rps, _scaled(m.shares, k), m.capacities) + base <= check_loss) != \
                    (m.loss <= check_loss):
                return None
    if target - base <= 0:
        return None
    return rate_for_loss(_scaled(ref.shares, k), ref.capacities, target - base)


def _trailing_same_side(runs: Sequence[Measurement], L: float) -> int:
    """How many of the latest runs fell on the same side of L as the last one."""
    k = 0
    for m in reversed(runs):
        if (m.loss <= L) != (runs[-1].loss <= L):
            break
        k += 1
    return k


def _wrong_runs(runs: Sequence[Measurement], L: float, est: Optional[float], raw: Optional[float], up: bool) -> int:
    """How many runs have shown the model wrong, for the size of the next step: the runs at or
    beyond where it points; while it puts some run on the wrong side of L (est None), at least
    the latest runs that all fell on the same side."""
    beyond = sum(1 for m in runs if raw is None or (m.offered_rps >= raw if up else m.offered_rps <= raw))
    return beyond if est is not None else max(beyond, _trailing_same_side(runs, L) - 1)


def next_rate(runs: Sequence[Measurement], max_loss: float, min_rate: float) -> Optional[float]:
    """The offered rate to try next for loss L, or None when going on is pointless."""
    L = max_loss
    target = AIM * L
    lo, hi = bracket(runs, L)
    if lo is not None and hi is not None:
        same = _trailing_same_side(runs, L)
        span = hi.offered_rps - lo.offered_rps
        if same >= 3:
            # three runs on the same side: neither the model nor the secant finds it, bisect
            return lo.offered_rps + 0.5 * span
        est = estimate_rate(runs, target, check_loss=L)
        if est is not None:
            # the model points at (or past) a run already made: step just inside the bracket from it,
            # which gives a bracket STEP wide if the model is right
            est = min(max(est, (1 + STEP) * lo.offered_rps), (1 - STEP) * hi.offered_rps)
            if lo.offered_rps < est < hi.offered_rps:
                return est
        if hi.loss > SECANT_MAX * L:
            # the model missed and hi is far past L: the knee lies between, where a straight line
            # from lo to hi runs far under the curve, so halve instead
            return lo.offered_rps + 0.5 * span
        # the model missed (or has nothing to say): secant on (offered, loss) between the two runs
        est = lo.offered_rps + (target - lo.loss) / (hi.loss - lo.loss) * span
        return min(max(est, lo.offered_rps + 0.1 * span), hi.offered_rps - 0.1 * span)
    # No bracket yet: follow the fitted model. Where it points back at or behind runs already made
    # (it is wrong in a way no run has shown yet), step out by 2%, then 6%, 18%, ... for every run
    # that has shown it wrong.
    est = estimate_rate(runs, target, check_loss=L)
    raw = estimate_rate(runs, target)   # where the model points even if it has been wrong
    if lo is not None:  # every run so far is at or under L: go up (trusting the model up to 5x)
        if est is not None and est > lo.offered_rps:
            return min(max(est, (1 + STEP) * lo.offered_rps), 5.0 * lo.offered_rps)
        wrong = _wrong_runs(runs, L, est, raw, up=True)
        return (1 + min(0.5, STEP * 3 ** max(0, wrong - 1))) * lo.offered_rps
    ordered = sorted(runs, key=lambda m: m.offered_rps)  # every run lost more than L: go down
    low = ordered[0]
    unexplained = [m for m in ordered[:2] if predicted_loss(m.offered_rps, m.shares, m.capacities) == 0]
    if low.offered_rps <= min_rate or len(unexplained) >= 2:
        return None  # the loss is not the targets' overload: a lower rate will not remove it
    if est is not None and est < low.offered_rps:
        return max(min(est, (1 - STEP) * low.offered_rps), min_rate)
    wrong = _wrong_runs(runs, L, est, raw, up=False)
    return max((1 - min(0.5, STEP * 3 ** max(0, wrong - 1))) * low.offered_rps, min_rate)


@dataclass
class LossSearch:
    runs: list[Measurement]
    points: dict[float, LossPoint]
    warmup: Optional[Measurement] = None    # a run before the search, not used by the rule


def search_losses(measure: Callable[[float], Measurement], probe_rate: float,
                  losses: Sequence[float] = (0.001, 0.05), max_runs: int = 8,
                  max_runs_per_loss: Optional[int] = None, max_width: float = MAX_WIDTH,
                  min_rate: Optional[float] = None) -> LossSearch:
    """Runs until every loss in `losses` has its point (or is given up on), at most `max_runs`
    runs in all, at most `max_runs_per_loss` for one rule while another still needs runs. Losses
    are served lowest first: the strict rule's runs lie under the 5% rule's rate and become its
    lower runs, so one series of runs serves both."""
    per_loss = max_runs_per_loss or max_runs
    min_rate = min_rate if min_rate is not None else 0.1 * probe_rate
    runs = [measure(probe_rate)]
    given_up: set[float] = set()
    spent = {L: 0 for L in losses}
    while len(runs) < max_runs:
        pending = [L for L in sorted(losses)
                   if L not in given_up and not point_at_loss(runs, L, max_width).met_loss_rule]
        if not pending:
            break
        # a rule that has had its max_runs_per_loss waits while another still needs runs; when
        # only such rules are left they share what remains of max_runs
        for L in [x for x in pending if spent[x] < per_loss] + [x for x in pending if spent[x] >= per_loss]:
            rate = next_rate(runs, L, min_rate)
            if rate is not None:
                break
            given_up.add(L)
        else:
            continue
        spent[L] += 1
        runs.append(measure(rate))
    return LossSearch(runs, {L: point_at_loss(runs, L, max_width) for L in losses})


@dataclass
class Search:
    throughput_rps: float
    best: Measurement
    runs: list[Measurement]
    met_loss_rule: bool
    point: Optional[LossPoint] = None


def find_throughput(measure: Callable[[float], Measurement], probe_rate: float, max_loss: float = 0.05,
                    runs: int = 5) -> Search:
    """One loss rule: the probe plus at most `runs` runs (search_losses with one L). `best` is the
    run the point stands on (lo), or the run with the least loss when the rule is not met."""
    s = search_losses(measure, probe_rate, (max_loss,), max_runs=runs + 1)
    p = s.points[max_loss]
    if p.met_loss_rule:
        return Search(p.throughput_rps, p.lo, s.runs, True, p)
    best = p.lo or min(s.runs, key=lambda m: m.loss)
    return Search(best.answered_rps, best, s.runs, False, p)
