"""Scale study: how big must the cache be as the cluster grows? (results/sim/scale.json)

For N db nodes (32 .. 1,024) and 10^9 keys, bisection on the cache size k for the smallest k
that keeps every db node at >= 90% utilisation at Exoskeleton's throughput, compared with Fan
et al.'s bound (SoCC'11: caching the c = k' * N * log N hottest items makes the most loaded
back-end node no busier than average, k' a small constant): the table reports N ln N and
k / (N ln N). The criterion uses the 0% loss rule: under the 5% rule one hot node may overflow
by 5% of all traffic, which at these sizes needs no cache at all. Cache contents are the k
hottest ranks (what select_keys admits on exact rates, see model.StaticModel.selected).

The cache node's capacity defaults to 10x all db nodes together (--cache-ratio), so the answer is
about the number of entries, not the cache node's speed: with 1.0 the cache itself saturates
before 1,024 nodes reach 90% at alpha >= 0.99. Each row says how fast the cache must be
(cache_load_ratio: the cache's load / all db nodes' capacity at that throughput).

    python -m exo_sim.scale [--quick] [--out results/sim]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from .common import MODEL_NOTES, Scale, alpha_key, progress, write_result
from .model import StaticModel

NODES = (32, 64, 128, 256, 512, 1024)
ALPHAS = (0.9, 0.99, 0.995)
TARGET = 0.9


def smallest_cache(m: StaticModel, target: float = TARGET) -> dict:
    """Doubling from k = 1, then bisection, for the smallest k with db_util_min(k) >= target
    (beyond some size the cache node itself becomes the bottleneck and utilisation falls again,
    hence no plain bisection over all ranks). Checked: ok(k) and not ok(k - 1)."""
    def ok(k: int) -> bool:
        return m.db_util_min(k) >= target
    if ok(0):
        return {"cache_size": 0, "checked": True}
    hi = 1
    while not ok(hi):
        if hi >= m.zipf.top:
            return {"cache_size": None, "why": "not reached within the explicit ranks (cache node the bottleneck?)"}
        hi = min(2 * hi, m.zipf.top)
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return {"cache_size": hi, "checked": ok(hi) and not ok(hi - 1)}


def study(quick: bool = False, cache_ratio: float = 10.0, n_keys: int = 10**9) -> dict:
    nodes = (32, 256, 1024) if quick else NODES
    alphas = (0.99,) if quick else ALPHAS
    rows = {}
    for a in alphas:
        rows[alpha_key(a)] = []
        for n in nodes:
            progress(f"scale: alpha {alpha_key(a)}, {n} db nodes")
            m = StaticModel(Scale(nodes=n, n_keys=n_keys, cache_ratio=cache_ratio), a)
            res = smallest_cache(m)
            nlogn = n * math.log(n)
            row = {"nodes": n, **res, "n_ln_n": nlogn,
                   "ratio_to_n_ln_n": res["cache_size"] / nlogn if res["cache_size"] is not None else None,
                   "db_util_min_no_cache": m.db_util_min(0)}
            if res["cache_size"] is not None:
                ev = m.evaluate(res["cache_size"], use_selector=False, which=("no_cache", "exoskeleton", "ideal"))
                row.update(cache_share=ev["hit"],
                           throughput_loss0=ev["exoskeleton"]["loss0"].answered,
                           throughput_no_cache_loss0=ev["no_cache"]["loss0"].answered,
                           ideal_loss0=ev["ideal"]["loss0"].answered,
                           cache_load_ratio=ev["exoskeleton"]["loss0"].cache_work / m.cluster.db_total)
            rows[alpha_key(a)].append(row)
    big = Scale(nodes=1024, n_keys=n_keys, cache_ratio=cache_ratio)
    return {"study": "scale", "title": "Smallest cache keeping every db node >= 90% busy, vs Fan et al.'s N log N",
            "scale": {**big.as_dict(), "factor": 1.0}, "target_db_util_min": TARGET,
            "alphas": list(rows), "nodes": list(nodes), "rows": rows,
            "model": {"notes": [*MODEL_NOTES,
                                "criterion: min over db nodes of utilisation at Exoskeleton's 0%-loss throughput "
                                ">= 0.9; bisection on the cache size (the k hottest ranks cached)",
                                "fan_et_al: c = k * N ln N suffices (k a small constant); ratio_to_n_ln_n is our k",
                                "cache_load_ratio: the cache's load / all db nodes' capacity at that throughput "
                                "(> 1: one cache node as fast as the whole db tier is not enough)"]}}


def table(payload: dict) -> str:
    lines = ["scale study: smallest cache for >= 90% db utilisation (1e9 keys, 0% loss rule)",
             f"{'alpha':>6} {'nodes':>6} {'cache':>8} {'N ln N':>8} {'ratio':>6} {'hit':>6} {'thr/ideal':>9} "
             f"{'cache/db':>8}"]
    for a, rows in payload["rows"].items():
        for r in rows:
            c = r["cache_size"]
            lines.append(f"{a:>6} {r['nodes']:>6} {c if c is not None else '-':>8} {r['n_ln_n']:>8.0f} "
                         f"{(r['ratio_to_n_ln_n'] or 0):>6.2f} {r.get('cache_share', 0):>6.3f} "
                         f"{r.get('throughput_loss0', 0) / r.get('ideal_loss0', 1):>9.3f} "
                         f"{r.get('cache_load_ratio', 0):>8.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m exo_sim.scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 node counts, alpha 0.99 only")
    ap.add_argument("--out", type=Path, default=Path("results/sim"))
    ap.add_argument("--cache-ratio", type=float, default=10.0,
                    help="cache capacity / all db nodes' (default 10: never the bottleneck here)")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    payload = study(args.quick, args.cache_ratio)
    path = write_result(args.out, "scale", payload)
    if not args.no_plot:
        from .plots import plot
        plot("scale", payload, args.out)
    print(table(payload))
    progress(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
