"""The project's targets for the figures (issue 11), each checked against a run's own data; where
one is missed, by how much and what limits it, with every number and sentence computed from
the run (no fixed text). Pure."""
from __future__ import annotations

from typing import Optional

from exo_testbed.ideal import ideal_rps, top_share
from exo_testbed.record import alpha_of  # noqa: F401  (read as targets.alpha_of)
from exo_testbed.scale import Scale
from exo_testbed.thesis import TARGETS  # noqa: F401  (read as targets.TARGETS)

THR_KEY = {"0.05": "throughput_rps", "0.001": "throughput_strict_rps"}


def ideal_for(scale: Scale, alpha_key: str, entries: int = 1000) -> float:
    return ideal_rps(scale.db_capacity, scale.cache_rps, top_share(entries, scale.keys, alpha_of(alpha_key)))


def gain_limits(static: dict, scale: Scale, a: str, rule: str) -> Optional[dict]:
    """What bounds the gain at alpha a under loss rule `rule` ("0.05" or "0.001"), from the runs."""
    nc_p, wc_p = static["no_cache"].get(a), static["cache_1000"].get(a)
    if nc_p is None or wc_p is None:
        return None
    nc, wc = nc_p[THR_KEY[rule]], wc_p[THR_KEY[rule]]
    ideal = ideal_for(scale, a)
    s, name = nc_p["hottest_db_share"], nc_p["hottest_db_node"]
    out = {"loss_rule": float(rule), "no_cache_rps": nc, "cache_1000_rps": wc, "ideal_rps": round(ideal, 1),
           "hottest_db_node_no_cache": name, "hottest_db_share_no_cache": s,
           "even_db_share": round(1 / scale.db_nodes, 5),
           "hottest_db_full_at_offered_rps": round(scale.node_rps / s, 1) if s > 0 else None}
    # runs with the cache that lost more than L where no node nor the cache was over its limit
    unexplained = [r for r in wc_p.get("runs", []) if r["loss"] > float(rule) and r.get("model_loss") == 0]
    out["cache_1000_runs_over_rule_unexplained"] = unexplained
    tail = ""
    if unexplained:
        r = min(unexplained, key=lambda x: x["offered_rps"])
        tail = (f"; with the cache {len(unexplained)} run(s) lost more than {float(rule):g} where no node nor "
                f"the cache was over its limit (the lowest: {r['offered_rps']:.0f} req/s offered, "
                f"{r['loss']:.2%} lost), loss the targets do not cause")
    if nc is None or wc is None:
        why = {k: p["at_loss"][rule]["why"] for k, p, v in (("no cache", nc_p, nc), ("cache", wc_p, wc)) if v is None}
        out["summary"] = f"no measured {rule} loss point: " + "; ".join(f"{k}: {w}" for k, w in why.items()) + tail
        return out
    out.update(no_cache_share_of_db_capacity=round(nc / scale.db_capacity, 4),
               cache_share_of_ideal=round(wc / ideal, 4), ideal_gain=round(ideal / nc, 3))
    hot = (f"the hottest db node ({name}) receives {s:.2%} of the requests ({s * scale.db_nodes:.2f}x an even "
           f"share), so it is full at {scale.node_rps / s:.0f} req/s offered; " if s > 0 else "")
    out["summary"] = (
        f"alpha {a}, {float(rule):g} loss: without the cache {hot}the cluster answers {nc:.0f} req/s "
        f"({nc / scale.db_capacity:.0%} of the db nodes' capacity); with the cache it answers {wc:.0f} req/s, "
        f"{wc / ideal:.0%} of the ideal {ideal:.0f} req/s, so the gain is at most ideal / no-cache = "
        f"{ideal / nc:.2f}x") + tail
    return out


def gain_strict_target(static: dict, scale: Scale, gain_strict: dict) -> dict:
    a, need = TARGETS["gain_strict_alpha"], TARGETS["gain_strict_min"]
    g = gain_strict.get(a)
    t = {"alpha": a, "min": need, "measured": g, "met": None if a not in static["cache_1000"] else
         (g is not None and g >= need)}
    if t["met"] is False:
        t["short_by"] = None if g is None else round(need - g, 3)
        t["ratio_to_target"] = None if g is None else round(g / need, 3)
        t["limits"] = gain_limits(static, scale, a, "0.001")
    return t


def min_utilisation_target(mins: dict) -> dict:
    need = TARGETS["min_utilisation_cache_alpha_ge_0.99"]
    hot = {a: v for a, v in mins.items() if a != "uniform" and float(a) >= 0.99}
    if not hot:
        return {"min": need, "measured": None, "met": None}
    worst = min(hot, key=hot.get)
    t = {"min": need, "measured": hot[worst], "at_alpha": worst, "met": hot[worst] > need}
    if not t["met"]:
        t["short_by"] = round(need - hot[worst], 4)
    return t


def recovery_target(dyn: dict) -> dict:
    need = TARGETS["recovery_s_strict_mean_lt"]
    mean, ok_all = dyn.get("recovery_s_strict_mean"), dyn.get("recovered_all", False)
    t = {"strict_mean_lt_s": need, "every_swap_recovered": True, "recovery_s_strict_mean": mean,
         "recovered_all": ok_all, "met": mean is not None and mean < need and ok_all}
    if not t["met"]:
        t["over_by_s"] = None if mean is None else round(max(0.0, mean - need), 3)
        t["not_recovered_strict"] = dyn.get("not_recovered_strict")
        t["limits"] = [_swap_limit(r) for r in dyn.get("swaps", [])]
        t["summary"] = "; ".join(x["summary"] for x in t["limits"])
    return t


def _swap_limit(r: dict) -> dict:
    keys = ("swap_at_s", "recovery_s_strict", "recovery_s", "from_cache_recovery_s_strict",
            "baseline_bins_below_level_share", "dip_min_ratio", "dip_lost_requests", "window_s")
    out = {k: r.get(k) for k in keys}
    rs, fc, below = r.get("recovery_s_strict"), r.get("from_cache_recovery_s_strict"), r.get("baseline_bins_below_level_share")
    parts = [f"swap at {r['swap_at_s']:g} s: " + (f"strict recovery after {rs:g} s" if rs is not None else
                                                  f"no 1 s at 95% within its {r['window_s']:g} s window")]
    if r.get("recovery_s") is not None:
        parts.append(f"mean criterion after {r['recovery_s']:g} s")
    if "from_cache_recovery_s_strict" in r:
        parts.append("from-cache rate " + (f"back to 95% for 1 s after {fc:g} s" if fc is not None else
                                           "never back to 95% for 1 s"))
    if below is not None:
        parts.append(f"{below:.0%} of the 10 s before the swap were bins under 95% of its mean")
    if r.get("dip_min_ratio") is not None:
        parts.append(f"lowest bin {r['dip_min_ratio']:.0%} of baseline, {r['dip_lost_requests']:.0f} requests lost")
    out["summary"] = ", ".join(parts)
    return out
