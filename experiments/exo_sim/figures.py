"""Thesis Figures 4.1-4.4 from the simulator: results/sim/fig4_{1,2,3,4}.json and .png.

    python -m exo_sim.figures [--quick] [--out results/sim] [--only fig4_2,fig4_4]
    python -m exo_sim.scale   [--quick]          (the scale study, scale.json)
    python -m exo_sim         [--quick]          (both)

Progress goes to stderr, a table of the key numbers to stdout. See docs/simulator.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import Scale, progress, switch_capacity, write_result
from .dynamic import DynConfig
from .fig_dynamic import fig4_4
from .static_figs import Context, fig4_1, fig4_2, fig4_3

FIGURES = ("fig4_1", "fig4_2", "fig4_3", "fig4_4")


def run(args) -> dict[str, dict]:
    scale = Scale(cache_ratio=args.cache_ratio, R=args.rule_rate, C=switch_capacity(args.cache_entries))
    ctx = Context(scale, args.placement, args.lookaside_miss_cost, args.readthrough_miss_cost, args.quick)
    only = set(args.only.split(",")) if args.only else set(FIGURES)
    results = {}
    for name in FIGURES:
        if name not in only:
            continue
        if name == "fig4_1":
            payload = fig4_1(ctx, args.cache_entries)
        elif name == "fig4_2":
            payload = fig4_2(ctx, args.cache_entries)
        elif name == "fig4_3":
            payload = fig4_3(ctx)
        else:
            dur, every = (100.0, 50.0) if args.quick else (args.duration, args.swap_every)
            cfg = DynConfig(alpha=args.dyn_alpha, capacity=args.cache_entries, duration_s=dur, swap_every_s=every,
                            barrier_ms=args.barrier_ms, seed=args.seed)
            payload = fig4_4(scale, cfg, ctx.placement)
        payload = {"scale": {**scale.as_dict(), "factor": 1.0}, **payload}
        path = write_result(args.out, name, payload)
        if not args.no_plot:
            from .plots import plot
            plot(name, payload, args.out)
        progress(f"wrote {path}")
        results[name] = payload
    return results


def table(results: dict[str, dict]) -> str:
    out = []
    if "fig4_2" in results:
        d = results["fig4_2"]
        out += ["fig4_2: gain of a %d-entry Exoskeleton cache over no cache" % d["cache_entries"],
                f"{'alpha':>6} {'gain 5%':>8} {'gain 0%':>8} {'exo 5% Mrps':>11} {'none 5%':>8} {'exo 0%':>7} "
                f"{'none 0%':>8} {'ideal 0%':>8} {'look-aside':>10} {'read-thru':>9} {'cache share':>11}"]
        for i, a in enumerate(d["alphas"]):
            s = d["series"]
            out.append(f"{a:>6} {d['gain'][a]:>8.2f} {d['gain_loss0'][a]:>8.2f} "
                       f"{s['exoskeleton']['loss5'][i] / 1e6:>11.3f} {s['no_cache']['loss5'][i] / 1e6:>8.3f} "
                       f"{s['exoskeleton']['loss0'][i] / 1e6:>7.3f} {s['no_cache']['loss0'][i] / 1e6:>8.3f} "
                       f"{s['ideal']['loss0'][i] / 1e6:>8.3f} {s['look_aside']['loss5'][i] / 1e6:>10.3f} "
                       f"{s['read_through']['loss5'][i] / 1e6:>9.3f} {d['cache_share'][i]:>11.3f}")
        if d.get("ring_placement"):
            r = d["ring_placement"]
            out.append(f"  ring placement (partition_bits {r['partition_bits']}, vnodes {r['virtual_nodes']}, "
                       f"largest node share {r['share_max']:.2f}/N): gain 5% "
                       + ", ".join(f"{a}: {g:.2f}" for a, g in r["gain"].items()))
        out.append("")
    if "fig4_1" in results:
        d = results["fig4_1"]
        out += ["fig4_1: db node utilisation (min / mean / max) at each system's throughput",
                f"{'alpha':>6} {'rule':>5} {'no cache':>17} {'Exoskeleton':>17} {'held':>5}"]
        for a in d["alphas"]:
            sm = d["summary"][a]
            for rule in ("loss5", "loss0"):
                cells = ["%.2f/%.2f/%.2f" % (sm[s][rule]["db_util_min"], sm[s][rule]["db_util_mean"],
                                            sm[s][rule]["db_util_max"]) for s in ("no_cache", "exoskeleton")]
                out.append(f"{a:>6} {rule:>5} {cells[0]:>17} {cells[1]:>17} {sm['held']:>5}")
        out.append("")
    if "fig4_3" in results:
        d = results["fig4_3"]
        out.append(f"fig4_3: cache size sweep at alpha {d['alpha']}")
        out.append(f"{'size':>6} " + " ".join(f"{s:>12}" for s in ("exo 5% Mrps", "exo 0%", "ideal 0%", "look-aside")))
        for i, k in enumerate(d["sizes"]):
            s = d["series"]
            out.append(f"{k:>6} {s['exoskeleton']['loss5'][i] / 1e6:>12.3f} {s['exoskeleton']['loss0'][i] / 1e6:>12.3f} "
                       f"{s['ideal']['loss0'][i] / 1e6:>12.3f} {s['look_aside']['loss5'][i] / 1e6:>12.3f}")
        for rule, kn in d["knee"].items():
            out.append(f"  knee ({rule}): best size {kn['best_size']} ({kn['best_throughput'] / 1e6:.3f} Mrps), "
                       f"cache node at capacity from {kn['cache_bottleneck_from']} entries")
        out.append("")
    if "fig4_4" in results:
        d = results["fig4_4"]
        out.append(f"fig4_4: swap of the {d['swap_keys']} hottest keys every {d['swap_every_s']:g} s, "
                   f"R = {d['switch']['R']:g}/s, alpha {d['alpha']}, {d['cache_entries']} entries")
        for rule, rec in (("loss5", d["recovery"]), ("loss0", d["recovery_loss0"])):
            out.append(f"  {rule}: " + "; ".join(f"t={r['swap_s']:g}s pre {r['pre'] / 1e6:.2f} dip {r['min'] / 1e6:.2f} "
                                                 f"back in {r['recovery_s']:.1f}s" for r in rec))
        out.append(f"  recovery_s_mean {d['recovery_s_mean']}, recovery_s_max {d['recovery_s_max']} (5% rule); "
                   f"0% rule mean {d['loss0']['recovery_s_mean']}, max {d['loss0']['recovery_s_max']}; "
                   f"rule updates/s max {d['switch']['rule_updates_per_s_max']}")
    return "\n".join(out)


def parser(prog: str = "python -m exo_sim.figures") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer points and a 100 s dynamic run (< 1 min)")
    ap.add_argument("--out", type=Path, default=Path("results/sim"))
    ap.add_argument("--only", default="", help="comma-separated subset of " + ",".join(FIGURES))
    ap.add_argument("--cache-ratio", type=float, default=1.0,
                    help="cache node capacity / all db nodes' capacity (default 1.0)")
    ap.add_argument("--cache-entries", type=int, default=1000, help="cache size of figs 4.1, 4.2, 4.4")
    ap.add_argument("--placement", choices=("even", "ring"), default="even",
                    help="even arcs (default) or the controller's partition table at the config defaults")
    ap.add_argument("--lookaside-miss-cost", type=float, default=1.0)
    ap.add_argument("--readthrough-miss-cost", type=float, default=2.0)
    ap.add_argument("--rule-rate", type=float, default=50.0, help="R, switch rule updates/s")
    ap.add_argument("--duration", type=float, default=300.0, help="fig4_4 length (s)")
    ap.add_argument("--swap-every", type=float, default=50.0, help="fig4_4 swap period (s)")
    ap.add_argument("--dyn-alpha", type=float, default=0.99, help="fig4_4 Zipf alpha")
    ap.add_argument("--barrier-ms", type=float, default=0.0, help="switch delay before a batch's barrier reply")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-plot", action="store_true")
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    results = run(args)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
