"""Turns the runs into results/fig4_N.json documents (each with `scale`) and the summary table
of ours against the thesis and the targets (targets.py)."""
from __future__ import annotations

from typing import Optional

from exo_testbed import record
from exo_testbed.ideal import top_share
from exo_testbed.recovery import criteria_text
from exo_testbed.scale import Scale
from exo_testbed.thesis import THESIS_CLAIMS

from . import targets
from .keys import alpha_key
from .throughput import rule_text

TARGETS = {"min_utilisation_cache_alpha_ge_0.99": targets.TARGETS["min_utilisation_cache_alpha_ge_0.99"],
           "recovery_s_mean_lt": targets.TARGETS["recovery_s_strict_mean_lt"],
           "gain_strict_0.995_min": targets.TARGETS["gain_strict_min"]}
RULES = ("0.05", "0.001")


RECORD_SYSTEMS = {"no_cache": "no_cache", "cache": "cache_1000"}   # record system -> static kind


def _head(scale: Scale, figure: str, rules=RULES) -> dict:
    return record.header(figure, "mininet", scale.testbed(), list(rules))


def _both(static: dict) -> list[str]:
    """Alpha keys measured with and without the cache, in run order."""
    return [a for a in static["cache_1000"] if a in static["no_cache"]]


def _at(p: dict, rule: str, field: str):
    return p["at_loss"][rule].get(field) if rule in p.get("at_loss", {}) else None


def _base(scale: Scale, quick: bool) -> dict:
    return {"scale": scale.as_json(), "scale_label": scale.label(), "quick": quick,
            "throughput_rule": rule_text(0.05), "throughput_rule_strict": rule_text(0.001)}


def fig4_1(static: dict, scale: Scale, quick: bool) -> dict:
    d = _base(scale, quick)
    d["series"] = {"no_cache": static["no_cache"], "cache_1000": static["cache_1000"]}
    d["node_utilisation_from"] = "the run with the highest offered rate whose loss is <= 0.05 (measured_at_run)"
    mins = {a: min(p["node_utilisation_sorted"]) for a, p in static["cache_1000"].items()}
    d["min_node_utilisation"] = {"cache_1000": mins,
                                 "no_cache": {a: min(p["node_utilisation_sorted"])
                                              for a, p in static["no_cache"].items()}}
    hot = [v for a, v in mins.items() if a != "uniform" and float(a) >= 0.99]
    d["min_utilisation_cache_alpha_ge_0.99"] = min(hot) if hot else None
    d["target_min_utilisation"] = TARGETS["min_utilisation_cache_alpha_ge_0.99"]
    d["target_min_utilisation_check"] = targets.min_utilisation_target(mins)
    alphas = _both(static)
    d["testbed"] = record.fig4_1(_head(scale, "fig4_1"), alphas, 1000, "0.05", {
        name: {a: static[kind][a]["node_utilisation_sorted"] for a in alphas} for name, kind in RECORD_SYSTEMS.items()})
    return d


def _gains(static: dict, rule: str) -> tuple[dict, dict]:
    """gain[a] = cached / no-cache throughput where both points met the rule; else why not."""
    key = targets.THR_KEY[rule]
    gain, missing = {}, {}
    for a, wc in static["cache_1000"].items():
        nc = static["no_cache"].get(a)
        if nc is None:
            continue
        if wc[key] is not None and nc[key]:
            gain[a] = round(wc[key] / nc[key], 3)
        else:
            missing[a] = {k: p["at_loss"][rule]["why"] for k, p in (("cache_1000", wc), ("no_cache", nc))
                          if p[key] is None}
    return gain, missing


def fig4_2(static: dict, scale: Scale, quick: bool) -> dict:
    d = _base(scale, quick)
    wc, nc = static["cache_1000"], static["no_cache"]
    ideal = {a: round(targets.ideal_for(scale, a), 1) for a in wc}
    d["series"] = {"cache_1000": {a: p["throughput_rps"] for a, p in wc.items()},
                   "no_cache": {a: p["throughput_rps"] for a, p in nc.items()}, "ideal": ideal}
    d["series_strict"] = {"cache_1000": {a: p["throughput_strict_rps"] for a, p in wc.items()},
                          "no_cache": {a: p["throughput_strict_rps"] for a, p in nc.items()}, "ideal": ideal}
    # every point with its measured loss and the runs it comes from, per loss rule
    d["points"] = {kind: {a: p["at_loss"] for a, p in static[kind].items()} for kind in ("cache_1000", "no_cache")}
    d["gain"], gain_missing = _gains(static, "0.05")
    d["gain_strict"], strict_missing = _gains(static, "0.001")
    d["gain_not_measured"] = {"0.05": gain_missing, "0.001": strict_missing}
    d["ideal_gain"] = {a: round(ideal[a] / nc[a]["throughput_rps"], 3) for a in wc
                       if a in nc and nc[a]["throughput_rps"]}
    d["ideal_gain_strict"] = {a: round(ideal[a] / nc[a]["throughput_strict_rps"], 3) for a in wc
                              if a in nc and nc[a]["throughput_strict_rps"]}
    # A model, not a run: the offered rate at which the first node (or the cache) is full, from
    # each run's measured per-node shares (static_figs._model_zero_loss).
    z = {a: round(wc[a]["model_zero_loss_rps"] / nc[a]["model_zero_loss_rps"], 3) for a in wc
         if a in nc and nc[a]["model_zero_loss_rps"]}
    d["gain_zero_loss_model"] = z
    d["model_gain_zero_loss"] = z
    d["thesis_gain"] = {"0.995": THESIS_CLAIMS["gain_0.995"]}
    d["vs_thesis"] = {}
    for a, thesis in d["thesis_gain"].items():
        if a not in d["gain"]:
            continue
        ours = d["gain"][a]
        lim = targets.gain_limits(static, scale, a, "0.05")
        d["vs_thesis"][a] = {
            "thesis": thesis, "ours": ours, "ratio": round(ours / thesis, 3), "met": ours >= thesis,
            "ideal_gain": d["ideal_gain"].get(a), "gain_zero_loss_model": z.get(a), "model_gain_zero_loss": z.get(a),
            "gain_strict": d["gain_strict"].get(a), "limit": lim["summary"], "limits": lim}
    d["target_gain_strict"] = targets.gain_strict_target(static, scale, d["gain_strict"])
    alphas = _both(static)
    d["testbed"] = record.fig4_2(
        _head(scale, "fig4_2"), alphas, 1000,
        {name: {r: {a: _at(static[kind][a], r, "throughput_rps") for a in alphas} for r in RULES}
         for name, kind in RECORD_SYSTEMS.items()},
        {name: {r: {a: _at(static[kind][a], r, "loss") for a in alphas} for r in RULES}
         for name, kind in RECORD_SYSTEMS.items()},
        ideal)
    return d


def fig4_3(static: dict, scale: Scale, quick: bool) -> dict:
    d = _base(scale, quick)
    pts = static["cache_sizes"]
    sizes = sorted(pts, key=int)
    ideal = {s: round(targets.ideal_for(scale, "0.99", int(s)), 1) for s in sizes}
    d["alpha"] = 0.99
    d["series"] = {"throughput_rps": {s: pts[s]["throughput_rps"] for s in sizes},
                   "throughput_strict_rps": {s: pts[s]["throughput_strict_rps"] for s in sizes},
                   "ideal_rps": ideal,
                   "cache_served_rps": {s: pts[s]["cache_served_rps"] for s in sizes},
                   "from_cache": {s: pts[s]["from_cache"] for s in sizes},
                   "points": pts}
    # A model: the cache node is the bottleneck once the hottest entries' share h makes
    # cache/h < db/(1-h).
    bound = next((int(s) for s in sizes if scale.cache_rps / top_share(int(s), scale.keys, 0.99)
                  < scale.db_capacity / (1 - top_share(int(s), scale.keys, 0.99))), None)
    d["cache_bound_from_entries_model"] = bound
    d["model_cache_bound_entries"] = bound
    measured = [s for s in sizes if pts[s]["throughput_rps"] is not None]
    d["best_entries_measured"] = int(max(measured, key=lambda s: pts[s]["throughput_rps"])) if measured else None
    strict = [s for s in sizes if pts[s]["throughput_strict_rps"] is not None]
    d["best_entries_measured_strict"] = (int(max(strict, key=lambda s: pts[s]["throughput_strict_rps"]))
                                         if strict else None)
    d["thesis_cache_bound_entries"] = THESIS_CLAIMS["cache_bound_entries"]
    d["testbed"] = record.fig4_3(_head(scale, "fig4_3"), "0.99", [int(s) for s in sizes],
                                 {r: {s: _at(pts[s], r, "throughput_rps") for s in sizes} for r in RULES},
                                 {r: {s: _at(pts[s], r, "loss") for s in sizes} for r in RULES}, ideal)
    return d


def fig4_4(dyn: dict, scale: Scale, quick: bool) -> dict:
    d = _base(scale, quick)
    d["series"] = dyn
    for k in ("recovery_s", "recovery_s_mean", "recovery_s_max", "recovery_s_strict", "recovery_s_strict_mean",
              "recovery_s_strict_max", "recovered_all", "not_recovered", "not_recovered_strict",
              "unrecovered_counted_as", "dip_lost_requests", "dip_min_ratio", "offered_rps", "loadavg_1m"):
        d[k] = dyn.get(k)
    d["loss"] = dyn.get("totals", {}).get("loss")   # of the whole series, warm-up included
    d["recovery_criteria"] = criteria_text(dyn["bin_s"])
    d["thesis_recovery_s_mean"] = THESIS_CLAIMS["recovery_s_mean"]
    d["target_recovery_s_mean"] = TARGETS["recovery_s_mean_lt"]
    d["target_recovery"] = targets.recovery_target(dyn)
    d["testbed"] = record.fig4_4(_head(scale, "fig4_4", ()), dyn["bin_s"], dyn.get("offered_rps"), 1000,
                                 dyn["swap_at_s"], dyn["t"], dyn["answered_rps"], dyn.get("from_cache_rps"))
    return d


def _yes_no(met: Optional[bool], miss: str = "") -> str:
    return "-" if met is None else ("yes" if met else f"no{miss}")


def table(docs: dict) -> list[tuple[str, str, str, str, str]]:
    """Rows (what, thesis, ours, target met?, target): "-" where a row has no target."""
    rows = []
    if "fig4_2" in docs:
        d = docs["fig4_2"]
        for a in d["series"]["cache_1000"]:
            if a in d["gain"]:
                z = d["model_gain_zero_loss"].get(a)
                ours = f"{d['gain'][a]:.2f}x (ideal {d['ideal_gain'][a]:.2f}x" + (f"; model 0% loss {z:.2f}x)" if z else ")")
            else:
                ours = "not measured (gain_not_measured)"
            rows.append((f"gain at 5% loss, 1,000 entries, alpha {a}", "~5x" if a == "0.995" else "-", ours, "-", "-"))
        t = d["target_gain_strict"]
        for a in d["series"]["cache_1000"]:
            g = d["gain_strict"].get(a)
            ours = (f"{g:.2f}x (ideal {d['ideal_gain_strict'][a]:.2f}x)" if g is not None
                    else "not measured (gain_not_measured)")
            if a == t["alpha"]:
                miss = f" (short by {t['short_by']:.2f}x)" if t.get("short_by") is not None else ""
                rows.append((f"gain at 0.1% loss, 1,000 entries, alpha {a}", "-", ours, _yes_no(t["met"], miss),
                             f">= {t['min']:.1f}x"))
            else:
                rows.append((f"gain at 0.1% loss, 1,000 entries, alpha {a}", "-", ours, "-", "-"))
    if "fig4_1" in docs:
        t = docs["fig4_1"]["target_min_utilisation_check"]
        if t["measured"] is not None:
            rows.append(("min db node utilisation, cache, alpha >= 0.99", "close to 100% (Fig 4.1)",
                         f"{t['measured']:.1%}", _yes_no(t["met"]), f"> {t['min']:.0%}"))
    if "fig4_3" in docs:
        d = docs["fig4_3"]
        rows.append(("cache node becomes the bottleneck at", "~15,000 entries",
                     f"{d['cache_bound_from_entries_model']} entries (model); best measured {d['best_entries_measured']}",
                     "-", "-"))
    if "fig4_4" in docs:
        d = docs["fig4_4"]
        t = d["target_recovery"]
        bits = [] if t["met"] else [x for x in (
            f"over by {t['over_by_s']:.2f} s" if t.get("over_by_s") else "",
            f"{t['not_recovered_strict']} swap(s) never recovered" if t.get("not_recovered_strict") else "") if x]
        rows.append(("recovery after a swap, strict, mean", "-", f"{d['recovery_s_strict_mean']} s "
                     f"(max {d['recovery_s_strict_max']} s, all recovered: {d['recovered_all']})",
                     _yes_no(t["met"], f" ({'; '.join(bits)})" if bits else ""), "< 1 s, every swap recovered"))
        rows.append(("recovery after a swap, mean criterion, mean", "2.5 s", f"{d['recovery_s_mean']} s", "-", "-"))
        rows.append(("recovery after a swap, mean criterion, max", "-", f"{d['recovery_s_max']} s", "-", "-"))
    return rows


def alpha_keys(alphas: list[float]) -> list[str]:
    return [alpha_key(a) for a in alphas]
