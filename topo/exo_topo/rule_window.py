"""A run's Ruleset 2 figures from timestamped records, one definition for the controller's journal
and the switch's own record (exo_topo.switch_audit). Pure functions.

Definitions (docs/cache-fill.md, "A run's figures"), over the run window [t0, t1]:
- rule_updates_per_s_max: the most Ruleset 2 flow-mods in any half-open 1 s interval [s, s+1)
  (s anywhere, only flow-mods with t0 <= t <= t1 counted). Half-open like the limiter's own
  window (rule_updater: a send leaves the window exactly 1 s later).
- ruleset2_max: the largest Ruleset 2 size during [t0, t1], counting the size it had at t0.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

EPS = 1e-6


def in_window(times: Iterable[float], t0: float, t1: float) -> list[float]:
    return sorted(t for t in times if t0 <= t <= t1)


def busiest_window(times: Iterable[float], t0: float, t1: float, width: float = 1.0) -> int:
    """Most of `times` inside [t0, t1] that fall in one half-open interval of `width`. Two times
    `width` apart to within EPS count as apart: ovs-ofctl's are whole milliseconds, and as floats
    of epoch seconds 1.000 s differences come out a hair short or long."""
    ts = in_window(times, t0, t1)
    best, j = 0, 0
    for i, t in enumerate(ts):
        while ts[j] + width <= t + EPS:
            j += 1
        best = max(best, i - j + 1)
    return best


def level_at(levels: Sequence[tuple[float, int]], t: float, initial: int = 0) -> int:
    """The value of a step function (each (t_i, n_i): n_i from t_i on; sorted by t) at `t`."""
    n = initial
    for ti, ni in levels:
        if ti > t:
            break
        n = ni
    return n


def peak_level(levels: Sequence[tuple[float, int]], t0: float, t1: float, initial: int = 0) -> int:
    """Largest value of the step function over [t0, t1], its value at t0 included."""
    best = level_at(levels, t0, initial)
    for t, n in levels:
        if t0 < t <= t1:
            best = max(best, n)
    return best


def figures(mod_times: Iterable[float], levels: Sequence[tuple[float, int]], t0: float, t1: float,
            initial: int = 0) -> dict:
    """{flow_mods, rule_updates_per_s_max, ruleset2_max, ruleset2_at_start, ruleset2_at_end}."""
    ts = in_window(mod_times, t0, t1)
    return {"flow_mods": len(ts),
            "rule_updates_per_s_max": busiest_window(ts, t0, t1),
            "ruleset2_max": peak_level(levels, t0, t1, initial),
            "ruleset2_at_start": level_at(levels, t0, initial),
            "ruleset2_at_end": level_at(levels, t1, initial)}


def match_xids(controller: Iterable[tuple[float, int]], switch: Iterable[tuple[float, int]],
               t0: float, t1: float) -> dict:
    """Agreement of the two records by OpenFlow xid. controller: (t, xid) of every Ruleset 2
    flow-mod the controller journaled (any time); switch: (t, xid) of every Ruleset 2 flow-mod the
    switch received (any time). Counts, for the run window:
      matched                 sent by the controller in [t0, t1] and received by the switch
      missing_at_switch       sent by the controller in [t0, t1], never seen by the switch
      unknown_to_controller   received by the switch in [t0, t1], not in the controller's journal
      delay_ms_p50/max        switch receive time - controller send time, over matched ones
    """
    ctl = {xid: t for t, xid in controller}
    sw: dict[int, float] = {}
    for t, xid in switch:
        sw.setdefault(xid, t)
    sent = [(t, xid) for xid, t in ctl.items() if t0 <= t <= t1]
    delays = sorted((sw[xid] - t) * 1000 for t, xid in sent if xid in sw)
    unknown = sum(1 for xid, t in sw.items() if t0 <= t <= t1 and xid not in ctl)
    return {"matched": len(delays), "missing_at_switch": len(sent) - len(delays),
            "unknown_to_controller": unknown,
            "delay_ms_p50": _pct(delays, 0.5), "delay_ms_max": round(delays[-1], 1) if delays else None}


def _pct(sorted_values: list[float], q: float) -> Optional[float]:
    if not sorted_values:
        return None
    return round(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))], 1)


def bounded_by_barrier(switch: Iterable[tuple[float, int]], confirmed: dict[int, float]) -> tuple[list[float], dict]:
    """When the switch had each flow-mod, as well as the records can say: ovs-ofctl's receive time,
    but never later than the controller's receipt of the barrier reply that covers it (a switch
    answers a barrier only after processing every message before it, so a later ovs-ofctl time is
    the reader's lag, not the switch's). switch: (t, xid); confirmed: xid -> barrier reply time.
    Returns the times and {snoop_clock_late, snoop_clock_late_ms_max}."""
    times, late = [], []
    for t, xid in switch:
        bound = confirmed.get(xid)
        if bound is not None and t > bound:
            late.append((t - bound) * 1000)
            t = bound
        times.append(t)
    return times, {"snoop_clock_late": len(late),
                   "snoop_clock_late_ms_max": round(max(late), 1) if late else None}
