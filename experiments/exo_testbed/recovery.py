"""Recovery after a hot-set swap (Figure 4.4), from a binned throughput series. Pure.

Baseline: the mean answered rate over the `window_s` (10 s) before the swap. Level: 95% of it.
Two criteria, both measured from the moment of the swap to the start of the first bin from which
the criterion holds, and that bin must itself be at the level:

  * strict: every bin of the next `hold_s` = 1 s (that bin included) is at the level;
  * mean:   the mean over the next 0.5 s (that bin included) is at the level.

The mean criterion forgives a single 100 ms hiccup of the userspace switch after recovery (on 2
shared cores OVS loses frames on every path at once every few seconds, before swaps as much as
after); the strict one does not. Both report None for a swap after which the criterion never
holds before the next swap (or the end of the run): a swap that never recovers.

Per swap also: the requests lost in the dip, sum over the bins from the swap up to the strict
recovery of max(0, baseline - answered) x bin_s; its depth, the lowest of those bins (recovery
bin included) / baseline; and, to see what limits recovery, the same strict criterion on the
from-cache rate and the share of the baseline window's own bins that were under the level.
"""
from __future__ import annotations

from typing import Optional, Sequence

LEVEL = 0.95
WINDOW_S = 10.0
HOLD_STRICT_S = 1.0
HOLD_MEAN_S = 0.5


def _recovered_at(vals: Sequence[float], idx: list[int], need: float, hold: int, mean: bool) -> Optional[int]:
    """The first position j in idx from which the criterion holds, or None."""
    for j in range(len(idx)):
        window = idx[j:j + hold]
        if len(window) < hold:
            return None
        if vals[idx[j]] < need:
            continue
        if (sum(vals[w] for w in window) / hold >= need) if mean else all(vals[w] >= need for w in window):
            return j
    return None


def _windows(t: Sequence[float], swaps: Sequence[float], bin_s: float, window_s: float):
    """Per swap: (indices of the baseline window, indices from the swap to the next swap or end, end)."""
    end = t[-1] + bin_s if t else 0.0
    for k, s in enumerate(swaps):
        limit = swaps[k + 1] if k + 1 < len(swaps) else end
        before = [i for i, ti in enumerate(t) if s - window_s <= ti < s]
        after = [i for i, ti in enumerate(t) if s <= ti < limit]
        yield s, before, after, limit


def recovery_times(t: Sequence[float], answered_rps: Sequence[float], swaps: Sequence[float],
                   bin_s: float, level: float = LEVEL, window_s: float = WINDOW_S,
                   hold_s: float = HOLD_MEAN_S, strict: bool = False) -> list[Optional[float]]:
    """Seconds from each swap to recovery (module doc); None = never recovered. strict=False is
    the mean criterion (hold 0.5 s); strict=True with hold_s=1.0 the strict one."""
    hold = max(1, round(hold_s / bin_s))
    out: list[Optional[float]] = []
    for s, before, after, _ in _windows(t, swaps, bin_s, window_s):
        if not before:
            out.append(None)
            continue
        need = level * sum(answered_rps[i] for i in before) / len(before)
        j = _recovered_at(answered_rps, after, need, hold, mean=not strict)
        out.append(None if j is None else round(t[after[j]] - s, 3))
    return out


def swap_recoveries(t: Sequence[float], answered_rps: Sequence[float], swaps: Sequence[float], bin_s: float,
                    from_cache_rps: Optional[Sequence[float]] = None, level: float = LEVEL,
                    window_s: float = WINDOW_S, hold_strict_s: float = HOLD_STRICT_S,
                    hold_mean_s: float = HOLD_MEAN_S) -> list[dict]:
    """Everything measured about each swap (module doc), one dict per swap."""
    hs, hm = max(1, round(hold_strict_s / bin_s)), max(1, round(hold_mean_s / bin_s))
    out = []
    for s, before, after, limit in _windows(t, swaps, bin_s, window_s):
        rec: dict = {"swap_at_s": s, "window_end_s": round(limit, 3), "window_s": round(limit - s, 3)}
        if not before or not after:
            rec.update(baseline_rps=None, recovery_s_strict=None, recovery_s=None)
            out.append(rec)
            continue
        base = sum(answered_rps[i] for i in before) / len(before)
        need = level * base
        js = _recovered_at(answered_rps, after, need, hs, mean=False)
        jm = _recovered_at(answered_rps, after, need, hm, mean=True)
        # the dip: bins from the swap up to the strict recovery bin (included), or the whole window
        dip = after[:js + 1] if js is not None else after
        lost = sum(max(0.0, base - answered_rps[i]) * bin_s for i in dip)
        lost_mean = sum(max(0.0, base - answered_rps[i]) * bin_s for i in after[:jm + 1]) if jm is not None else lost
        rec.update(
            baseline_rps=round(base, 1), level_rps=round(need, 1),
            recovery_s_strict=None if js is None else round(t[after[js]] - s, 3),
            recovery_s=None if jm is None else round(t[after[jm]] - s, 3),
            dip_lost_requests=round(lost, 1), dip_lost_requests_mean=round(lost_mean, 1),
            dip_min_ratio=round(min(answered_rps[i] for i in dip) / base, 4) if base > 0 else None,
            baseline_bins_below_level_share=round(sum(answered_rps[i] < need for i in before) / len(before), 4))
        if from_cache_rps is not None:
            fc_base = sum(from_cache_rps[i] for i in before) / len(before)
            jf = _recovered_at(from_cache_rps, after, level * fc_base, hs, mean=False)
            rec["from_cache_baseline_rps"] = round(fc_base, 1)
            rec["from_cache_recovery_s_strict"] = None if jf is None else round(t[after[jf]] - s, 3)
        out.append(rec)
    return out


def summarise(recs: list[dict]) -> dict:
    """Mean and max under both criteria; a swap that never recovered counts as the length of its
    window (swap to next swap or end of run), so it raises the mean instead of leaving it."""
    def stats(key: str) -> tuple[Optional[float], Optional[float], int]:
        vals = [r[key] if r.get(key) is not None else r["window_s"] for r in recs]
        missing = sum(r.get(key) is None for r in recs)
        if not vals:
            return None, None, missing
        return round(sum(vals) / len(vals), 3), round(max(vals), 3), missing

    mean_m, max_m, miss_m = stats("recovery_s")
    mean_s, max_s, miss_s = stats("recovery_s_strict")
    return {"recovery_s": [r.get("recovery_s") for r in recs],
            "recovery_s_mean": mean_m, "recovery_s_max": max_m, "not_recovered": miss_m,
            "recovery_s_strict": [r.get("recovery_s_strict") for r in recs],
            "recovery_s_strict_mean": mean_s, "recovery_s_strict_max": max_s,
            "not_recovered_strict": miss_s,
            "recovered_all": bool(recs) and miss_s == 0,
            "unrecovered_counted_as": "the time from the swap to the end of its window (next swap or end of run)",
            "dip_lost_requests": [r.get("dip_lost_requests") for r in recs],
            "dip_min_ratio": [r.get("dip_min_ratio") for r in recs]}


def criteria_text(bin_s: float, level: float = LEVEL, window_s: float = WINDOW_S,
                  hold_strict_s: float = HOLD_STRICT_S, hold_mean_s: float = HOLD_MEAN_S) -> dict:
    """The two criteria as recovery_times/swap_recoveries apply them, for the JSON."""
    base = f"{level:.0%} of the mean answered rate of the {window_s:g} s before the swap"
    return {"strict": f"every {bin_s * 1000:g} ms bin of the {hold_strict_s:g} s from the recovery bin on is >= {base}",
            "mean": f"the recovery bin is >= {base}, and so is the mean of the {hold_mean_s:g} s from it on",
            "measured": "seconds from the swap to the start of the recovery bin; null: never recovered"}
