"""`python -m exo_figures` (`make figures [QUICK=1]`): thesis Figures 4.1-4.4 on a Mininet/OVS
cluster of emulated wimpies; writes results/fig4_N.json + .png and prints ours vs the thesis."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from exo_testbed.ideal import ideal_rps, top_share
from exo_testbed.scale import Scale
from exo_topo.cluster import EmulatedCluster

from . import bench_cluster, documents
from .dynamic_fig import run_dynamic
from .publish import publish
from .runner import ensure_dir
from .static_figs import run_static

# max_runs: runs per static configuration for both loss rules together (static_figs.LOSS_RULES), of
# which one rule may ask for at most max_runs_per_loss before it is given up on (and says so)
FULL = {"alphas": [0, 0.9, 0.95, 0.99, 0.995, 0.999],
        "sizes": [10, 30, 100, 300, 1000, 3000, 10000, 15000, 20000], "probe_s": 3, "run_s": 5, "swaps": 3,
        "max_runs": 12, "max_runs_per_loss": 7}
QUICK = {"alphas": [0, 0.99, 0.995], "sizes": [100, 1000, 20000], "probe_s": 2, "run_s": 3, "swaps": 2,
         "max_runs": 11, "max_runs_per_loss": 6}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m exo_figures", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer points (under 10 minutes)")
    p.add_argument("--only", default="4.1,4.2,4.3,4.4", help="figures to run, e.g. 4.4")
    p.add_argument("--out", type=Path, default=Path("results"), help="where fig4_N.json/.png go")
    p.add_argument("--run-dir", type=Path, default=Path("/tmp/exo/figures"), help="logs and sockets")
    p.add_argument("--node-rps", type=float, default=Scale.node_rps, help="each emulated wimpy's limit")
    p.add_argument("--cache-to-db", type=float, default=Scale.cache_to_db,
                   help="cache node limit / total db limit")
    p.add_argument("--openflow-port", type=int, default=6670)
    p.add_argument("--build", type=Path, default=None, help="build dir (default $EXO_BUILD or build/)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    only = {f"fig{x.strip().replace('.', '_')}" for x in args.only.split(",")}
    plan = QUICK if args.quick else FULL
    scale = Scale(node_rps=args.node_rps, cache_to_db=args.cache_to_db)
    out = ensure_dir(args.out)
    raw = ensure_dir(out / "figures-runs")
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    docs: dict[str, dict] = {}
    progress(scale.label())
    if only & {"fig4_1", "fig4_2", "fig4_3"}:
        entries = max([1000, *plan["sizes"]])
        cfg = bench_cluster.figure_config(args.run_dir / "static", scale, entries, dynamic=False,
                                          openflow_port=args.openflow_port)
        progress("static cluster: starting")
        with EmulatedCluster(cfg, args.run_dir / "static", build_dir=args.build, start_timeout=120) as cl:
            static = run_static(cl, scale, plan["alphas"], plan["sizes"] if "fig4_3" in only else [], raw,
                                plan["probe_s"], plan["run_s"], (plan["max_runs"], plan["max_runs_per_loss"]), progress)
        docs["fig4_1"] = documents.fig4_1(static, scale, args.quick)
        docs["fig4_2"] = documents.fig4_2(static, scale, args.quick)
        if "fig4_3" in only:
            docs["fig4_3"] = documents.fig4_3(static, scale, args.quick)
    if "fig4_4" in only:
        with_c = docs.get("fig4_2", {}).get("series", {}).get("cache_1000", {}).get("0.99")
        rate = with_c or 0.9 * ideal_rps(scale.db_capacity, scale.cache_rps, top_share(1000, scale.keys, 0.99))
        cfg = bench_cluster.figure_config(args.run_dir / "dynamic", scale, 1000, dynamic=True,
                                          openflow_port=args.openflow_port)
        progress("dynamic cluster: starting (static rules at R = 50/s take ~20 s)")
        with EmulatedCluster(cfg, args.run_dir / "dynamic", build_dir=args.build, start_timeout=180) as cl:
            dyn = run_dynamic(cl, scale, rate, plan["swaps"], raw, 0.99, progress)
        docs["fig4_4"] = documents.fig4_4(dyn, scale, args.quick)

    publish({k: v for k, v in docs.items() if k in only}, out, scale, time.monotonic() - t0)
    for name in sorted(only & set(docs)):
        progress(f"wrote {out / name}.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
