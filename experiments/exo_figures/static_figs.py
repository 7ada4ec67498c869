"""Figures 4.1, 4.2 and 4.3 (thesis 4.2, static distributions) on one bench cluster.

Order, so the cache is only ever filled up: every alpha without cache (the baseline on the same
cluster), then the 1,000 hottest keys cached and every alpha again (4.1, 4.2), then alpha 0.99
with the cache grown step by step to 20,000 entries (4.3). The hottest keys are the generator's
own ranks (`exo-loadgen --print-keys`), the same for every alpha.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

from . import bench_cluster, keys
from .runner import Workload, measure, served_sorted
from .scale import Scale
from .throughput import Search, find_throughput

# After a prefill OVS's revalidators are still busy with the new flows for a moment (a run
# started at once lost 5% in its first second): the thesis, too, measured a settled switch.
SETTLE_S = 2.0


def _search(cl, scale: Scale, wl: Workload, out_dir: Path, tag: str, probe_s: float, run_s: float,
            max_loss: float) -> Search:
    n = [0]

    def run(rate: float):
        n[0] += 1
        dur = probe_s if n[0] == 1 else run_s
        return measure(cl, scale, rate, dur, wl, out_dir / f"{tag}-run{n[0]}.json", label=tag)

    return find_throughput(run, probe_rate=0.5 * scale.db_capacity, max_loss=max_loss)


def _point(s: Search, names: list[str], scale: Scale) -> dict:
    b = s.best
    # The strict variant: the offered rate at which the first target (node or cache) is full,
    # from the shares this run measured; what a 0% loss rule would give (docs/figures.md).
    zero_loss = min(b.capacities[t] / sh for t, sh in b.shares.items() if sh > 0 and t in b.capacities)
    return {"throughput_rps": round(s.throughput_rps, 1), "offered_rps": round(b.offered_rps, 1),
            "zero_loss_rps_model": round(zero_loss, 1),
            "loss": round(b.loss, 4), "met_loss_rule": s.met_loss_rule,
            "from_cache": round(b.detail["from_cache"], 4),
            "cache_served_rps": round(b.detail["served_rps"]["cache0"], 1),
            "node_utilisation_sorted": [round(u, 4) for u in served_sorted(b, names, scale.node_rps)],
            "p50_us": b.detail["p50_us"], "p99_us": b.detail["p99_us"],
            "runs": [{"offered_rps": round(m.offered_rps, 1), "answered_rps": round(m.answered_rps, 1),
                      "loss": round(m.loss, 4)} for m in s.runs]}


def run_static(cl, scale: Scale, alphas: list[float], cache_sizes: list[int], out_dir: Path,
               probe_s: float, run_s: float, max_loss: float,
               progress: Callable[[str], None]) -> dict:
    names = [d.name for d in cl.cfg.db_nodes]
    res: dict = {"no_cache": {}, "cache_1000": {}, "cache_sizes": {}}
    total = 2 * len(alphas) + len(cache_sizes)
    step = 0

    def go(kind: str, key: str, wl: Workload) -> None:
        nonlocal step
        step += 1
        progress(f"[{step}/{total}] {kind} {key}")
        res[kind][key] = _point(_search(cl, scale, wl, out_dir, f"{kind}-{key}", probe_s, run_s, max_loss),
                                names, scale)

    bench_cluster.clear_cache(cl)
    for a in alphas:
        go("no_cache", keys.alpha_key(a), Workload(alpha=a, keys=scale.keys))
    hottest = keys.hottest(cl, max([1000, *cache_sizes]), scale.key_size, scale.keys)
    held = bench_cluster.prefill(cl, hottest[:1000])
    time.sleep(SETTLE_S)
    progress(f"cache filled with {held} keys")
    for a in alphas:
        go("cache_1000", keys.alpha_key(a), Workload(alpha=a, keys=scale.keys))
    for size in sorted(cache_sizes):
        if size < held:  # sizes below 1,000: start from an empty cache
            bench_cluster.clear_cache(cl)
        held = bench_cluster.prefill(cl, hottest[:size])
        time.sleep(SETTLE_S)
        if held < size:
            print(f"  cache holds {held} of {size} keys", file=sys.stderr)
        go("cache_sizes", str(size), Workload(alpha=0.99, keys=scale.keys))
        res["cache_sizes"][str(size)]["entries_held"] = held
    return res
