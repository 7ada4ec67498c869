"""Pure measurements over merged client histories (no cluster needed; unit-tested).

Ops are dicts as written by exo_harness.history.History (fields: op, key, value, invoke_ns,
complete_ns (None = never completed), outcome ("ok" | "fail" | "unknown"), result).
"""
from __future__ import annotations

import bisect
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
               bin_s: float = 0.2, share: float = 0.8, hold_s: float = 1.0,
               baseline_to_ns: Optional[int] = None, end_ns: Optional[int] = None) -> Optional[float]:
    """Seconds after ref_ns until throughput is back: the start of the first bin from which every
    bin for hold_s carries at least `share` of the baseline (the median bin in
    [baseline_from_ns, baseline_to_ns), baseline_to_ns defaulting to ref_ns); 0.0 if it never
    dipped. None if not back within window_s, or before end_ns (the end of the data: bins past
    it would read as an outage)."""
    baseline = _baseline(times_ns, baseline_from_ns,
                         ref_ns if baseline_to_ns is None else baseline_to_ns, bin_s)
    if baseline is None:
        return None
    after = bins(times_ns, ref_ns, _stop(ref_ns, window_s + hold_s, end_ns), bin_s)
    need = max(1, round(hold_s / bin_s))
    i = _first_hold(after, share * baseline, need)
    return None if i is None else round(i * bin_s, 3)


def dip(times_ns: list[int], inject_ns: int, heal_ns: int, baseline_from_ns: int,
        window_s: float = 10.0, bin_s: float = 0.2, share: float = 0.8, hold_s: float = 1.0,
        end_ns: Optional[int] = None) -> dict:
    """The throughput dip of one fault, measured from its injection (nothing is excused as
    "not healed yet": a 1.5 s outage reads as 1.5 s whatever the fault was).

    baseline: the median bin_s bin of ok completions in [baseline_from_ns, inject_ns).
    recovery_from_inject_s: seconds from inject_ns to the start of the first bin from which
      every bin for hold_s holds at least share x baseline (the criterion of recovery_s); 0.0
      if it never dipped; None if not recovered within window_s (or before end_ns).
    depth: the lowest bin over the baseline, from inject_ns until hold_s after the later of
      heal_ns and recovery (until the end of the window when it never recovered): 0.0 is a
      full outage, 1.0 no loss at all (it can exceed 1 when clients catch up).
    length_s: the time in bins below share x baseline over that same span.
    All None when the baseline window has no data."""
    baseline = _baseline(times_ns, baseline_from_ns, inject_ns, bin_s)
    out = {"baseline_per_s": None, "recovery_from_inject_s": None, "depth": None, "length_s": None}
    if baseline is None:
        return out
    stop = _stop(inject_ns, window_s + hold_s, end_ns)
    after = bins(times_ns, inject_ns, stop, bin_s)
    need = max(1, round(hold_s / bin_s))
    threshold = share * baseline
    i = _first_hold(after, threshold, need)
    if i is None:
        span = after
    else:
        healed_bins = -(-max(0, heal_ns - inject_ns) // int(bin_s * 1e9))
        span = after[:max(i, healed_bins) + need]
    out["baseline_per_s"] = round(baseline / bin_s, 1)
    out["recovery_from_inject_s"] = None if i is None else round(i * bin_s, 3)
    if span and baseline > 0:
        out["depth"] = round(min(span) / baseline, 3)
        out["length_s"] = round(sum(b < threshold for b in span) * bin_s, 3)
    return out


def _baseline(times_ns: list[int], start_ns: int, end_ns: int, bin_s: float) -> Optional[float]:
    base_bins = bins(times_ns, start_ns, end_ns, bin_s)
    return statistics.median(base_bins) if base_bins else None


def _stop(ref_ns: int, span_s: float, end_ns: Optional[int]) -> int:
    stop = ref_ns + int(span_s * 1e9)
    return stop if end_ns is None else min(stop, end_ns)


def _first_hold(after: list[int], threshold: float, need: int) -> Optional[int]:
    """Index of the first bin from which `need` bins in a row are >= threshold."""
    for i in range(0, len(after) - need + 1):
        if all(b >= threshold for b in after[i:i + need]):
            return i
    return None


def overlap_share(ops: Iterable[dict]) -> Optional[float]:
    """Share of the successful operations whose interval [invoke_ns, complete_ns] overlaps that
    of an acknowledged write (put or delete, outcome ok) to the same key by another client:
    the operations whose order against a concurrent foreign write the checker had to decide.
    Writes with an unknown outcome are left out (their interval never closes, so counting them
    would make every later operation "overlap"). None when there are no successful ops."""
    by_key: dict = defaultdict(list)
    for o in ops:
        if o["outcome"] == "ok" and o["complete_ns"] is not None:
            by_key[o["key"]].append(o)
    total = hit = 0
    for key_ops in by_key.values():
        writes = sorted((o for o in key_ops if o["op"] in ("put", "delete")),
                        key=lambda o: o["invoke_ns"])
        invokes = [w["invoke_ns"] for w in writes]
        # best[i]: the two latest completions, from different clients, among writes[:i+1]; an
        # op overlaps a foreign write iff one invoked by its completion ends after its invoke.
        best: list[tuple] = []
        top = ((-1, None), (-1, None))
        for w in writes:
            c = (w["complete_ns"], w.get("client"))
            a, b = top
            if c[1] == a[1]:
                top = (max(a, c, key=lambda x: x[0]), b)
            elif c[0] > a[0]:
                top = (c, a)
            elif c[1] != a[1] and c[0] > b[0]:
                top = (a, c)
            best.append(top)
        for o in key_ops:
            total += 1
            i = bisect.bisect_right(invokes, o["complete_ns"]) - 1
            if i < 0:
                continue
            a, b = best[i]
            latest_foreign = a if a[1] != o.get("client") else b
            hit += latest_foreign[0] >= o["invoke_ns"]
    return None if total == 0 else round(hit / total, 4)


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


def concurrency(ops: Iterable[dict]) -> dict:
    """Per key, how many successful operations were open (invoked, not yet complete, itself
    included) when each was invoked: the largest per-key mean and the largest count. This is
    what the checker's cost grows with (`python -m exo_chaos.linearizability --cost`)."""
    by_key: dict = defaultdict(list)
    for o in ops:
        if o["outcome"] == "ok" and o["complete_ns"] is not None:
            by_key[o["key"]] += [(o["invoke_ns"], 1), (o["complete_ns"] + 1, -1)]
    mean_max, most = 0.0, 0
    for ev in by_key.values():
        ev.sort()
        cur, seen = 0, []
        for _, d in ev:
            cur += d
            if d == 1:
                seen.append(cur)
        mean_max = max(mean_max, sum(seen) / len(seen))
        most = max(most, max(seen))
    return {"mean_open_max": round(mean_max, 2), "open_max": most}
