"""PNG plots of the four figures (matplotlib, Agg). Each carries the scale line."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _finish(fig, d: dict, path: Path) -> Path:
    fig.text(0.01, 0.005, d["scale_label"], fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig4_1(d: dict, path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, kind, title in ((axes[0], "no_cache", "no cache"), (axes[1], "cache_1000", "1,000-entry cache")):
        for a, p in d["series"][kind].items():
            u = p["node_utilisation_sorted"]
            ax.plot(range(1, len(u) + 1), [100 * x for x in u], marker=".", label=f"alpha {a}")
        ax.set_title(f"Per-node throughput, {title}")
        ax.set_xlabel("db node (sorted by throughput)")
        ax.axhline(90, color="gray", lw=0.6, ls=":")
        ax.set_ylim(0, 110)
    axes[0].set_ylabel("% of node limit")
    axes[1].legend(fontsize=7)
    return _finish(fig, d, path)


def fig4_2(d: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    keys = list(d["series"]["cache_1000"])
    x = range(len(keys))
    for kind, label in (("cache_1000", "with 1,000-entry cache"), ("no_cache", "no cache"), ("ideal", "ideal")):
        ax.plot(x, [d["series"][kind][k] / 1000 for k in keys], marker="o", label=label)
    ax.set_xticks(list(x), keys)
    ax.set_xlabel("Zipf alpha")
    ax.set_ylabel("cluster throughput (k req/s)")
    for i, k in enumerate(keys):
        ax.annotate(f"{d['gain'][k]:.2f}x", (i, d["series"]["cache_1000"][k] / 1000), fontsize=7,
                    textcoords="offset points", xytext=(0, 6), ha="center")
    ax.legend(fontsize=8)
    ax.set_title("Cluster throughput vs skew (5% loss rule)")
    return _finish(fig, d, path)


def fig4_3(d: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    sizes = [int(s) for s in d["series"]["throughput_rps"]]
    ax.semilogx(sizes, [v / 1000 for v in d["series"]["throughput_rps"].values()], marker="o", label="measured")
    ax.semilogx(sizes, [v / 1000 for v in d["series"]["ideal_rps"].values()], ls="--", label="ideal")
    ax.semilogx(sizes, [v / 1000 for v in d["series"]["cache_served_rps"].values()], marker=".", label="served by cache")
    ax.axhline(d["scale"]["cache_rps"] / 1000, color="gray", lw=0.6, ls=":", label="cache node limit")
    ax.set_xlabel("cache entries")
    ax.set_ylabel("k req/s")
    ax.set_title("Throughput vs cache size, alpha 0.99")
    ax.legend(fontsize=8)
    return _finish(fig, d, path)


def fig4_4(d: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 4))
    s = d["series"]
    ax.plot(s["t"], [v / 1000 for v in s["answered_rps"]], lw=0.7, label="answered")
    ax.plot(s["t"], [v / 1000 for v in s["from_cache_rps"]], lw=0.7, label="from cache")
    for t, r in zip(s["swap_at_s"], s["recovery_s"]):
        ax.axvline(t, color="red", lw=0.6, ls=":")
        ax.annotate("not recovered" if r is None else f"{r:.1f} s", (t, 0), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("k req/s (100 ms bins)")
    ax.set_title(f"50 hottest <-> 50 coldest every 50 s, R = {s['rule_updates_per_s']:g}/s: "
                 f"recovery mean {d['recovery_s_mean']} s, max {d['recovery_s_max']} s")
    ax.legend(fontsize=8)
    return _finish(fig, d, path)


PLOTS = {"fig4_1": fig4_1, "fig4_2": fig4_2, "fig4_3": fig4_3, "fig4_4": fig4_4}
