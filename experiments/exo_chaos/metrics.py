"""Pure measurements over merged client histories (no cluster needed; unit-tested).

Ops are dicts as written by exoskeleton.history.History (fields: op, key, value, invoke_ns,
complete_ns (None = never completed), outcome ("ok" | "fail" | "unknown"), result).
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Iterable, Optional

INF = float("inf")


def ok_completions(ops: Iterable[dict]) -> list[int]:
    """Completion times (ns) of every op that succeeded, sorted."""
    return sorted(o["complete_ns"] for o in ops if o["outcome"] == "ok" and o["complete_ns"] is not None)


def bins(times_ns: list[int], start_ns: int, end_ns: int, bin_s: float) -> list[int]:
    """Count of times in each bin_s-long bin from start_ns (inclusive) to end_ns (exclusive)."""
    width = int(bin_s * 1e9)
    n = max(0, -(-(end_ns - start_ns) // width))
    out = [0] * n
    for t in times_ns:
        if start_ns <= t < end_ns:
            out[(t - start_ns) // width] += 1
    return out


def recovery_s(times_ns: list[int], ref_ns: int, baseline_from_ns: int, window_s: float = 10.0,
               bin_s: float = 0.2, share: float = 0.8, hold_s: float = 1.0) -> Optional[float]:
    """Seconds after ref_ns until throughput is back: the start of the first bin from which every
    bin for hold_s carries at least `share` of the baseline (the median bin in
    [baseline_from_ns, ref_ns)); 0.0 if it never dipped. None if not back within window_s."""
    base_bins = bins(times_ns, baseline_from_ns, ref_ns, bin_s)
    if not base_bins:
        return None
    baseline = statistics.median(base_bins)
    after = bins(times_ns, ref_ns, ref_ns + int((window_s + hold_s) * 1e9), bin_s)
    need = max(1, round(hold_s / bin_s))
    for i in range(0, len(after) - need + 1):
        if all(b >= share * baseline for b in after[i:i + need]):
            return round(i * bin_s, 3)
    return None


def lost_acked_writes(ops: Iterable[dict], final_reads: dict[bytes, Optional[bytes]],
                      initial: Optional[dict[bytes, Optional[bytes]]] = None) -> list[dict]:
    """Keys whose final value (read after every fault healed and every client stopped) cannot be
    the last write: the value read is neither that of a write not superseded by a later
    acknowledged write, nor (when no write was acknowledged) the initial value. Such a key lost
    an acknowledged write. Unknown-outcome writes may or may not have happened, so they are
    candidates too, and never supersede anything."""
    initial = initial or {}
    writes = defaultdict(list)
    for o in ops:
        if o["op"] in ("put", "delete") and o["outcome"] in ("ok", "unknown"):
            writes[o["key"]].append(o)
    lost = []
    for key, final in final_reads.items():
        ws = writes.get(key, [])
        acked_invokes = sorted(w["invoke_ns"] for w in ws if w["outcome"] == "ok")
        candidates = set()
        for w in ws:
            done = w["complete_ns"] if w["outcome"] == "ok" else INF
            superseded = acked_invokes and acked_invokes[-1] > done
            if not superseded:
                candidates.add(w["value"] if w["op"] == "put" else None)
        if not acked_invokes:
            candidates.add(initial.get(key))
        if final not in candidates:
            lost.append({"key": key, "final": final, "expected_one_of": sorted(
                (c for c in candidates), key=lambda v: (v is not None, v or b""))})
    return lost


def outcome_counts(ops: Iterable[dict]) -> dict[str, int]:
    counts = {"ok": 0, "fail": 0, "unknown": 0}
    for o in ops:
        counts[o["outcome"]] = counts.get(o["outcome"], 0) + 1
    return counts
