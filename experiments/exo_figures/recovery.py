"""Recovery time after a hot-set swap (Figure 4.4), from a binned throughput series. Pure.

Baseline: the mean answered rate over the `window_s` before the swap. Recovered: the first bin
start t >= swap from which the mean answered rate over the next `hold_s` is >= `level` x
baseline (the issue's 95%). A mean over a short window rather than every single bin, because a
userspace OVS on 2 shared cores has 100 ms hiccups (e.g. while it revalidates its datapath
flows after rule deletions) that are not the cache loop's doing, and any one of them inside a
bin-by-bin window would push "recovered" past it. Recovery time = t - swap: 0 when throughput
never dipped; None (not recovered) when no such t exists before the next swap or the end.
"""
from __future__ import annotations

from typing import Optional, Sequence


def recovery_times(t: Sequence[float], answered_rps: Sequence[float], swaps: Sequence[float],
                   bin_s: float, level: float = 0.95, window_s: float = 10.0,
                   hold_s: float = 0.5) -> list[Optional[float]]:
    out: list[Optional[float]] = []
    end = t[-1] + bin_s if t else 0.0
    hold = max(1, round(hold_s / bin_s))
    for k, s in enumerate(swaps):
        before = [a for ti, a in zip(t, answered_rps) if s - window_s <= ti < s]
        if not before:
            out.append(None)
            continue
        need = level * sum(before) / len(before)
        limit = swaps[k + 1] if k + 1 < len(swaps) else end
        idx = [i for i, ti in enumerate(t) if s <= ti < limit]
        found = None
        for j, i in enumerate(idx):
            window = idx[j:j + hold]
            if len(window) < hold:
                break
            if sum(answered_rps[w] for w in window) / hold >= need:
                found = round(t[i] - s, 3)
                break
        out.append(found)
    return out
