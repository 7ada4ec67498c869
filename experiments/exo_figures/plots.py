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
        ax.set_title(f"Per-node throughput, {title} (run at or just under 5% loss)", fontsize=10)
        ax.set_xlabel("db node (sorted by throughput)")
        ax.axhline(90, color="gray", lw=0.6, ls=":")
        ax.set_ylim(0, 110)
    axes[0].set_ylabel("% of node limit")
    axes[1].legend(fontsize=7)
    return _finish(fig, d, path)


def _errbar(ax, x, y, bounds, **kw):
    """Bounds of an interpolated point (throughput.LossPoint.bounds_rps) as an error bar."""
    lo = [max(0.0, yi - b[0]) if yi is not None and b and b[0] is not None else 0.0 for yi, b in zip(y, bounds)]
    hi = [max(0.0, b[1] - yi) if yi is not None and b and b[1] is not None else 0.0 for yi, b in zip(y, bounds)]
    pts = [(xi, yi, l, h) for xi, yi, l, h in zip(x, y, lo, hi) if yi is not None]
    if pts:
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[[p[2] for p in pts], [p[3] for p in pts]],
                    fmt="none", capsize=2, lw=0.6, **kw)


def fig4_2(d: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    keys = list(d["series"]["cache_1000"])
    x = list(range(len(keys)))
    k = lambda v: None if v is None else v / 1000  # noqa: E731
    for kind, label, color in (("cache_1000", "with 1,000-entry cache", "C0"), ("no_cache", "no cache", "C1")):
        for rule, series, ls in (("0.05", "series", "-"), ("0.001", "series_strict", "--")):
            y = [k(d[series][kind].get(a)) for a in keys]
            ax.plot(x, [float("nan") if v is None else v for v in y], marker="o", ls=ls, color=color,
                    label=f"{label}, {float(rule):.1%} loss")
            pts = d.get("points", {}).get(kind, {})
            _errbar(ax, x, y, [[k(b) for b in (pts.get(a, {}).get(rule, {}).get("bounds_rps") or [None, None])]
                               for a in keys], color=color)
    ax.plot(x, [d["series"]["ideal"][a] / 1000 for a in keys], ls=":", color="gray", label="ideal")
    ax.set_xticks(x, keys)
    ax.set_xlabel("Zipf alpha")
    ax.set_ylabel("cluster throughput (k req/s)")
    for i, a in enumerate(keys):
        g, gs = d["gain"].get(a), d.get("gain_strict", {}).get(a)
        txt = " / ".join(f"{v:.2f}x" if v is not None else "n/a" for v in (g, gs))
        top = d["series"]["cache_1000"].get(a) or d["series"]["ideal"][a]
        ax.annotate(txt, (i, top / 1000), fontsize=7, textcoords="offset points", xytext=(0, 8), ha="center")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("Cluster throughput vs skew; gain at 5% / 0.1% loss (bars: bracketing runs)")
    return _finish(fig, d, path)


def fig4_3(d: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    sizes = [int(s) for s in d["series"]["throughput_rps"]]
    nan = lambda v: float("nan") if v is None else v / 1000  # noqa: E731
    ax.semilogx(sizes, [nan(v) for v in d["series"]["throughput_rps"].values()], marker="o", label="measured, 5% loss")
    if "throughput_strict_rps" in d["series"]:
        ax.semilogx(sizes, [nan(v) for v in d["series"]["throughput_strict_rps"].values()], marker="o", ls="--",
                    label="measured, 0.1% loss")
    ax.semilogx(sizes, [v / 1000 for v in d["series"]["ideal_rps"].values()], ls="--", label="ideal")
    ax.semilogx(sizes, [v / 1000 for v in d["series"]["cache_served_rps"].values()], marker=".", label="served by cache")
    ax.axhline(d["scale"]["cache_rps"] / 1000, color="gray", lw=0.6, ls=":", label="cache node limit")
    ax.set_xlabel("cache entries")
    ax.set_ylabel("k req/s")
    ax.set_title("Throughput vs cache size, alpha 0.99")
    ax.legend(fontsize=8)
    return _finish(fig, d, path)


def fig4_4(d: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 4.5))
    s = d["series"]
    ax.plot(s["t"], [v / 1000 for v in s["answered_rps"]], lw=0.7, label="answered")
    ax.plot(s["t"], [v / 1000 for v in s["from_cache_rps"]], lw=0.7, label="from cache")
    strict = s.get("recovery_s_strict", [None] * len(s["swap_at_s"]))
    for sw, t, r, rs in zip(s.get("swaps", [{}] * len(s["swap_at_s"])), s["swap_at_s"], s["recovery_s"], strict):
        ax.axvline(t, color="red", lw=0.6, ls=":")
        if sw.get("level_rps"):
            end = t + (rs if rs is not None else sw.get("window_s", 0))
            ax.hlines(sw["level_rps"] / 1000, t - 10, end, color="gray", lw=0.6, ls="--")
        f = (lambda v: "never" if v is None else f"{v:.1f} s")  # noqa: E731
        ax.annotate(f"strict {f(rs)}\nmean {f(r)}", (t, 0.02), xycoords=("data", "axes fraction"), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("k req/s (100 ms bins)")
    ax.set_title(f"50 hottest <-> 50 coldest every 50 s, R = {s['rule_updates_per_s']:g}/s: recovery strict mean "
                 f"{d.get('recovery_s_strict_mean')} s (all recovered: {d.get('recovered_all')}), "
                 f"mean criterion {d['recovery_s_mean']} s", fontsize=9)
    ax.legend(fontsize=8)
    return _finish(fig, d, path)


PLOTS = {"fig4_1": fig4_1, "fig4_2": fig4_2, "fig4_3": fig4_3, "fig4_4": fig4_4}
