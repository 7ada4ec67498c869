"""PNG plots of the simulator's results (matplotlib, Agg backend): one per JSON, same name."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .baselines import LABELS, WITH_IDEAL  # noqa: E402

RULE_TITLES = {"loss5": "5% loss rule (thesis)", "loss0": "0% loss rule (no server over capacity)"}
STYLE = {"no_cache": dict(color="tab:red", marker="o"), "exoskeleton": dict(color="tab:blue", marker="s"),
         "look_aside": dict(color="tab:orange", marker="^"), "read_through": dict(color="tab:purple", marker="v"),
         "ideal": dict(color="black", ls="--"), "oracle_exoskeleton": dict(color="tab:green", ls="--")}


def _mrps(v):
    return np.asarray(v, dtype=float) / 1e6


def fig4_1(d: dict, ax_grid) -> None:
    for row, rule in enumerate(("loss5", "loss0")):
        for col, system in enumerate(("no_cache", "exoskeleton")):
            ax = ax_grid[row][col]
            for a in d["alphas"]:
                y = np.asarray(d["per_node"][a][system][rule]) / 1e3
                ax.plot(np.arange(1, len(y) + 1), y, marker=".", label=a if a == "uniform" else f"α={a}")
            ax.set_title(f"{'no cache' if system == 'no_cache' else 'cache of %d entries' % d['cache_entries']}, "
                         f"{RULE_TITLES[rule]}", fontsize=9)
            ax.set_xlabel("db node (sorted by throughput)")
            ax.set_ylabel("throughput (k requests/s)")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    ax_grid[0][0].legend(fontsize=8)


def fig4_2(d: dict, axes) -> None:
    x = np.arange(len(d["alphas"]))  # evenly spaced: the interesting alphas are close together
    for ax, rule in zip(axes, ("loss5", "loss0")):
        for s in WITH_IDEAL:
            ax.plot(x, _mrps(d["series"][s][rule]), label=LABELS[s], **STYLE[s])
        ax.set_xticks(x, list(d["alphas"]), rotation=45, fontsize=8)
        ax.set_title(RULE_TITLES[rule], fontsize=9)
        ax.set_xlabel("Zipf α")
        ax.set_ylabel("cluster throughput (M requests/s)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)


def fig4_3(d: dict, axes) -> None:
    x = d["fine_sizes"]
    for ax, rule in zip(axes, ("loss5", "loss0")):
        for s in WITH_IDEAL:
            ax.plot(x, _mrps(d["fine_series"][s][rule]), label=LABELS[s], **{**STYLE[s], "marker": None})
            if s != "ideal":
                ax.plot(d["sizes"], _mrps(d["series"][s][rule]), ls="none", **{k: v for k, v in STYLE[s].items() if k != "ls"})
        knee = d["knee"][rule]
        if knee["cache_bottleneck_from"]:
            ax.axvline(knee["cache_bottleneck_from"], color="gray", ls=":", label="cache node at capacity")
        ax.set_xscale("log")
        ax.set_title(f"α = {d['alpha']}, {RULE_TITLES[rule]}", fontsize=9)
        ax.set_xlabel("cache size (entries)")
        ax.set_ylabel("cluster throughput (M requests/s)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)


def fig4_4(d: dict, axes) -> None:
    t = np.asarray(d["series"]["t"])
    starts = d["baselines"]["state_start_s"] + [d["duration_s"]]
    for ax, rule in zip(axes[:2], ("loss5", "loss0")):
        ax.plot(t, _mrps(d["series"][rule]), color="tab:blue", lw=0.8, label="Exoskeleton (R = %g/s)" % d["switch"]["R"])
        for s in ("oracle_exoskeleton", "no_cache", "look_aside", "read_through"):
            y = np.repeat(_mrps(d["baselines"][s][rule]), 2)
            xs = np.ravel(list(zip(starts[:-1], starts[1:])))
            ax.plot(xs, y, lw=1, label=LABELS.get(s, "Exoskeleton, instant updates"),
                    **{k: v for k, v in STYLE[s].items() if k != "marker"})
        for ts in d["swap_times_s"]:
            ax.axvline(ts, color="gray", ls=":", lw=0.8)
        ax.set_title(f"{RULE_TITLES[rule]}; recovery mean "
                     f"{(d['recovery_s_mean'] if rule == 'loss5' else d['loss0']['recovery_s_mean']) or 0:.2f} s",
                     fontsize=9)
        ax.set_ylabel("throughput (M req/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower left")
    ax = axes[2]
    if d["swap_times_s"]:  # zoom on the first swap
        ts = d["swap_times_s"][0]
        win = (t >= ts - 2) & (t <= ts + 8)
        for rule, c in (("loss5", "tab:blue"), ("loss0", "tab:cyan")):
            ax.plot(t[win] - ts, _mrps(np.asarray(d["series"][rule])[win]), color=c, marker=".", ms=3,
                    label=RULE_TITLES[rule])
            ref = [r for r in (d["recovery"] if rule == "loss5" else d["recovery_loss0"]) if r["swap_s"] == ts]
            if ref:
                ax.axhline(0.95 * ref[0]["pre"] / 1e6, color=c, ls=":", lw=0.8)
        ax.set_xlabel(f"time since the swap at {ts:g} s (s); dotted: 95% of the pre-swap throughput")
        ax.set_ylabel("throughput (M req/s)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    ax = axes[3]
    for k in ("rules_installed", "adds_queued", "deletes_queued", "updates_last_1s"):
        ax.plot(t, d["series"][k], lw=0.8, label=k)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("rules")
    ax.set_yscale("symlog")
    ax.legend(fontsize=7, ncol=4)
    ax.grid(alpha=0.3)


def scale(d: dict, axes) -> None:
    ax = axes[0]
    n = np.asarray(d["nodes"], dtype=float)
    for a, rows in d["rows"].items():
        pts = [(r["nodes"], r["cache_size"]) for r in rows if r["cache_size"]]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=f"α={a}: smallest cache for ≥ 90% db utilisation")
    ax.plot(n, n * np.log(n), "k--", label="N ln N (Fan et al.: c = k·N log N)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("db nodes N (10^9 keys)")
    ax.set_ylabel("cache entries")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)


LAYOUT = {"fig4_1": (fig4_1, (2, 2), (12, 8)), "fig4_2": (fig4_2, (1, 2), (12, 4.5)),
          "fig4_3": (fig4_3, (1, 2), (12, 4.5)), "fig4_4": (fig4_4, (4, 1), (12, 13)),
          "scale": (scale, (1, 1), (7, 5))}


def plot(name: str, payload: dict, out_dir: Path) -> Path:
    fn, (rows, cols), size = LAYOUT[name]
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False)
    if name == "fig4_4":  # the full-length panels share their time axis; the zoom has its own
        for ax in (axes[0][0], axes[1][0]):
            ax.sharex(axes[3][0])
    fn(payload, axes if rows > 1 and cols > 1 else axes.ravel())
    fig.suptitle(payload.get("title", name), fontsize=11)
    fig.tight_layout()
    path = Path(out_dir) / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

