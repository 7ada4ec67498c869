"""Both back ends on one chart per figure, from the `testbed` records (record.py) of
results/fig4_N.json (Mininet, measured) and results/sim/fig4_N.json (simulator, a model):
results/compare/fig4_N.png, results/compare/compare.json, and a table.

    python -m exo_testbed.compare [--mininet results] [--sim results/sim] [--out results/compare]

Throughputs are divided by each record's own db capacity (scale.db_capacity_rps), so the Mininet
cluster (scaled down by rate_factor) and the simulator (thesis scale) share one axis; Figure 4.4
is shown as answered / offered. A figure missing from either side, or written before the record existed, is skipped and the
reason saved under `skipped`; a record that breaks the schema is an error (exit 2).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import record  # noqa: E402
from .loss_rules import STRICT_LOSS, THESIS_LOSS, rule_key  # noqa: E402

STYLE = {"mininet": dict(marker="o", ls="-"), "simulator": dict(marker="s", ls="--", alpha=0.8)}
COLOR = {"no_cache": "tab:red", "cache": "tab:blue"}
SHOWN_RULES = (rule_key(THESIS_LOSS), rule_key(STRICT_LOSS))   # the rules both back ends have


class NoRecord(Exception):
    """A figure that cannot be compared (no file, or a file written before the record existed)."""


def load(path: Path) -> dict:
    """The validated record of one result file. NoRecord when there is none to compare; a
    record that breaks the schema raises RecordError naming the file and the field."""
    if not path.exists():
        raise NoRecord(f"no {path}")
    doc = json.loads(path.read_text())
    if "testbed" not in doc:
        raise NoRecord(f"{path}: no `testbed` record (written before it existed; "
                       f"`python -m exo_figures.redocument` adds it to Mininet results)")
    try:
        return record.validate(doc["testbed"])
    except record.RecordError as e:
        raise record.RecordError(f"{path}: {e}") from None


def _norm(v: Optional[float], rec: dict) -> float:
    return float("nan") if v is None else v / rec["scale"]["db_capacity_rps"]


def _label(rec: dict) -> str:
    return "Mininet (measured)" if rec["source"] == "mininet" else "simulator (model)"


def plot_fig4_1(recs: list[dict], ax) -> None:
    for rec in recs:
        for a in rec["alphas"]:
            if a not in ("0.99", "0.995"):
                continue
            u = rec["utilisation_sorted"]["cache"][a]
            ax.plot(range(1, len(u) + 1), [100 * x for x in u], label=f"{_label(rec)}, α {a}",
                    **{**STYLE[rec["source"]], "marker": "."})
    ax.set_xlabel("db node (sorted)")
    ax.set_ylabel("% of node limit, with cache, 5% rule")
    ax.set_ylim(0, 110)


def plot_fig4_2(recs: list[dict], ax) -> None:
    alphas = sorted({a for r in recs for a in r["alphas"]}, key=record.alpha_of)
    x = {a: i for i, a in enumerate(alphas)}
    for rec in recs:
        for system in record.SYSTEMS:
            for rule in SHOWN_RULES:
                if rule not in rec["rules"]:
                    continue
                pts = [(x[a], _norm(rec["throughput_rps"][system][rule][a], rec)) for a in rec["alphas"]]
                ax.plot(*zip(*pts), color=COLOR[system], lw=1.4 if rule == SHOWN_RULES[0] else 0.7,
                        label=f"{_label(rec)}, {system}, {float(rule):.1%} loss", **STYLE[rec["source"]])
    ax.set_xticks(range(len(alphas)), alphas)
    ax.set_xlabel("Zipf α")
    ax.set_ylabel("throughput / db capacity")


def plot_fig4_3(recs: list[dict], ax) -> None:
    for rec in recs:
        for rule in SHOWN_RULES:
            if rule not in rec["rules"]:
                continue
            sizes = rec["sizes"]
            ax.semilogx(sizes, [_norm(rec["throughput_rps"][rule][str(k)], rec) for k in sizes],
                        label=f"{_label(rec)}, {float(rule):.1%} loss", **STYLE[rec["source"]])
    ax.set_xlabel("cache entries (α 0.99)")
    ax.set_ylabel("throughput / db capacity")


def plot_fig4_4(recs: list[dict], ax) -> None:
    for rec in recs:
        first = rec["swap_at_s"][0] if rec["swap_at_s"] else 0.0
        ax.plot([t - first for t in rec["t_s"]], [v / rec["offered_rps"] for v in rec["answered_rps"]], lw=0.7,
                label=f"{_label(rec)}: strict recovery mean {rec['recovery']['recovery_s_strict_mean']} s")
    ax.axvline(0, color="gray", ls=":", lw=0.8)
    ax.set_xlim(-10, 20)
    ax.set_xlabel("time since the first swap (s)")
    ax.set_ylabel("answered / offered (100 ms bins)")


PLOTS = {"fig4_1": plot_fig4_1, "fig4_2": plot_fig4_2, "fig4_3": plot_fig4_3, "fig4_4": plot_fig4_4}


def summary(name: str, recs: dict[str, dict]) -> dict:
    """The figure's headline numbers from each side, for compare.json and the table."""
    out = {}
    for src, rec in recs.items():
        if name == "fig4_2":
            out[src] = {"gain": {r: rec["gain"][r] for r in SHOWN_RULES if r in rec["gain"]}}
        elif name == "fig4_4":
            rv = rec["recovery"]
            out[src] = {k: rv[k] for k in ("recovery_s_strict_mean", "recovery_s_mean", "recovered_all")}
        elif name == "fig4_1":
            out[src] = {"min_utilisation_cache": {a: min(u) for a, u in rec["utilisation_sorted"]["cache"].items()}}
        elif name == "fig4_3":
            r0 = SHOWN_RULES[0]
            measured = [k for k in rec["sizes"] if rec["throughput_rps"][r0][str(k)] is not None]
            best = max(measured, key=lambda k: rec["throughput_rps"][r0][str(k)]) if measured else None
            out[src] = {"best_entries_5pct": best}
    return out


def compare(mininet: Path, sim: Path, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"figures": {}, "skipped": {}}
    for name in record.FIGURES:
        try:
            recs = {src: load(d / f"{name}.json") for src, d in (("mininet", mininet), ("simulator", sim))}
        except NoRecord as e:
            result["skipped"][name] = str(e)
            continue
        fig, ax = plt.subplots(figsize=(9, 4.8))
        PLOTS[name](list(recs.values()), ax)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
        ax.set_title(f"{name}: Mininet (measured) and simulator (model) on one chart", fontsize=10)
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=110)
        plt.close(fig)
        result["figures"][name] = {"png": str(out / f"{name}.png"), **summary(name, recs),
                                   "scales": {src: r["scale"] for src, r in recs.items()}}
    (out / "compare.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def table(result: dict) -> str:
    lines = []
    for name, f in result["figures"].items():
        for src in ("mininet", "simulator"):
            lines.append(f"{name:7} {src:9} " + json.dumps(f[src]))
    for name, why in result["skipped"].items():
        lines.append(f"{name:7} skipped: {why}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m exo_testbed.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mininet", type=Path, default=Path("results"))
    ap.add_argument("--sim", type=Path, default=Path("results/sim"))
    ap.add_argument("--out", type=Path, default=Path("results/compare"))
    args = ap.parse_args(argv)
    try:
        result = compare(args.mininet, args.sim, args.out)
    except record.RecordError as e:
        print(f"exo_testbed.compare: {e}", file=sys.stderr)
        return 2
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
