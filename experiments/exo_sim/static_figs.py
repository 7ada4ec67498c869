"""Figures 4.1-4.3 (thesis 4.2, static distributions): payloads for results/sim/fig4_{1,2,3}.json."""
from __future__ import annotations

import numpy as np
from exo_common.config import SwitchSection
from exo_testbed import record
from exo_testbed.loss_rules import rule_key

from .baselines import NOTES, SYSTEMS, WITH_IDEAL
from .common import MODEL_NOTES, Scale, alpha_key, fill_defaults, progress
from .model import StaticModel
from .placement import Placement
from .throughput import LOSS_RULES

FIG41_ALPHAS = (0.0, 0.9, 0.95, 0.99, 0.995, 0.999)
FIG42_ALPHAS = (0.0, 0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.996, 0.999, 1.01, 1.05)
FIG43_SIZES = (10, 30, 100, 300, 1000, 3000, 10000, 15000, 20000)
QUICK_FIG42_ALPHAS = (0.0, 0.9, 0.99, 0.995, 0.999)
QUICK_FIG43_SIZES = (10, 100, 1000, 10000, 15000, 20000)


class Context:
    """Options shared by the static figures, and a memo of models per alpha."""

    def __init__(self, scale: Scale, placement: str = "even", lookaside_miss_cost: float = 1.0,
                 readthrough_miss_cost: float = 2.0, quick: bool = False):
        self.scale, self.quick = scale, quick
        sw = SwitchSection()
        self.placement = (Placement(scale.nodes, "ring", sw.partition_bits, sw.virtual_nodes)
                          if placement == "ring" else Placement(scale.nodes))
        self.costs = (lookaside_miss_cost, readthrough_miss_cost)
        self._models: dict[float, StaticModel] = {}

    def model(self, alpha: float) -> StaticModel:
        if alpha not in self._models:
            self._models[alpha] = StaticModel(self.scale, alpha, self.placement, lookaside_miss_cost=self.costs[0],
                                              readthrough_miss_cost=self.costs[1])
        return self._models[alpha]

    def model_info(self, extra: list[str] = ()) -> dict:
        return {"notes": [*MODEL_NOTES, *extra], "systems": NOTES,
                "lookaside_miss_cost": self.costs[0], "readthrough_miss_cost": self.costs[1],
                "placement": self.placement.describe(), "loss_rules": LOSS_RULES,
                "cache_fill": fill_defaults()["cache_fill"]}


# The record's systems (exo_testbed.record.SYSTEMS) and rule keys, from this model's names.
SYSTEM_OF_RECORD = {"no_cache": "no_cache", "cache": "exoskeleton"}
RECORD_RULE = {name: rule_key(ml) for name, ml in LOSS_RULES.items()}


def _head(ctx: Context, figure: str) -> dict:
    return record.header(figure, "simulator", ctx.scale.testbed(), list(RECORD_RULE.values()))


def _by_rule(per_rule: dict, keys: list[str]) -> dict:
    """{loss5: [v per key]} -> {"0.05": {key: v}}, the record's shape."""
    return {RECORD_RULE[r]: dict(zip(keys, (float(v) for v in vals))) for r, vals in per_rule.items()}


def _summary(pt, cluster) -> dict:
    return {k: round(v, 6) for k, v in pt.as_dict(cluster).items()}


def fig4_1(ctx: Context, k: int = 1000) -> dict:
    """Per-node throughput, nodes sorted, for each alpha, with and without a k-entry cache."""
    per_node, summary = {}, {}
    for a in FIG41_ALPHAS:
        progress(f"fig4_1: alpha {alpha_key(a)}")
        m = ctx.model(a)
        ev = m.evaluate(k)
        key = alpha_key(a)
        per_node[key] = {s: {r: np.sort(ev[s][r].db_answered)[::-1].round(1) for r in LOSS_RULES} for s in SYSTEMS}
        summary[key] = {s: {r: _summary(ev[s][r], m.cluster) for r in LOSS_RULES} for s in SYSTEMS}
        summary[key]["held"] = ev["held"]
        summary[key]["cache_share"] = ev["hit"]
        summary[key]["tail_rel_std"] = m.describe()["tail_rel_std"]
    alphas = [alpha_key(a) for a in FIG41_ALPHAS]
    util = {name: {a: np.asarray(per_node[a][s]["loss5"]) / ctx.scale.node_rps for a in alphas}
            for name, s in SYSTEM_OF_RECORD.items()}
    return {"figure": "4.1", "title": "Throughput of each db node, nodes sorted by throughput",
            "cache_entries": k, "alphas": alphas,
            "per_node": per_node, "summary": summary,
            "testbed": record.fig4_1(_head(ctx, "fig4_1"), alphas, k, RECORD_RULE["loss5"], util),
            "model": ctx.model_info(["per_node: each db node's answered requests/s at the system's "
                                     "throughput-rule offered rate, highest first"])}


def fig4_2(ctx: Context, k: int = 1000) -> dict:
    """Cluster throughput vs alpha: with the cache, without, the baselines and the ideal."""
    alphas = QUICK_FIG42_ALPHAS if ctx.quick else FIG42_ALPHAS
    series = {s: {r: [] for r in LOSS_RULES} for s in WITH_IDEAL}
    loss = {s: {r: [] for r in LOSS_RULES} for s in WITH_IDEAL}
    db_part = {r: [] for r in LOSS_RULES}
    share, held = [], []
    for a in alphas:
        progress(f"fig4_2: alpha {alpha_key(a)}")
        ev = ctx.model(a).evaluate(k)
        for s in WITH_IDEAL:
            for r in LOSS_RULES:
                series[s][r].append(ev[s][r].answered)
                loss[s][r].append(ev[s][r].loss)
        for r in LOSS_RULES:
            db_part[r].append(float(ev["exoskeleton"][r].db_answered.sum()))
        share.append(ev["hit"])
        held.append(ev["held"])
    keys = [alpha_key(a) for a in alphas]

    def gain(system, r):
        return {key: series[system][r][i] / series["no_cache"][r][i] for i, key in enumerate(keys)}

    cache_part = {r: [series["exoskeleton"][r][i] - db_part[r][i] for i in range(len(alphas))] for r in LOSS_RULES}
    ring = _ring_sensitivity(ctx, k, alphas) if ctx.placement.mode == "even" else None
    return {"figure": "4.2", "title": "Cluster throughput vs Zipf alpha (cache of %d entries)" % k,
            "cache_entries": k, "alphas": keys, "series": series, "cache_share": share, "held": held,
            "exoskeleton_db_part": db_part, "exoskeleton_cache_part": cache_part,
            "gain": gain("exoskeleton", "loss5"), "gain_loss0": gain("exoskeleton", "loss0"),
            "gain_look_aside": gain("look_aside", "loss5"), "gain_read_through": gain("read_through", "loss5"),
            "cache_answers_more_than_db_nodes": [key for i, key in enumerate(keys)
                                                 if cache_part["loss5"][i] > db_part["loss5"][i]],
            "ring_placement": ring,
            "testbed": record.fig4_2(
                _head(ctx, "fig4_2"), keys, k,
                {name: _by_rule(series[s], keys) for name, s in SYSTEM_OF_RECORD.items()},
                {name: _by_rule(loss[s], keys) for name, s in SYSTEM_OF_RECORD.items()},
                dict(zip(keys, series["ideal"]["loss0"]))),
            "model": ctx.model_info(["gain: Exoskeleton / no cache under the 5% loss rule; gain_loss0 under 0%",
                                     "ring_placement: the same with the controller's partition table at the "
                                     "config defaults (uneven slot counts cap every system alike)"])}


def _ring_sensitivity(ctx: Context, k: int, alphas) -> dict:
    sw = SwitchSection()
    ring = Context(ctx.scale, "ring", *ctx.costs, quick=True)
    out = {"partition_bits": sw.partition_bits, "virtual_nodes": sw.virtual_nodes,
           "share_max": float(ring.placement.fraction.max() * ctx.scale.nodes), "gain": {}, "gain_loss0": {}}
    for a in alphas:
        ev = ring.model(a).evaluate(k, which=("no_cache", "exoskeleton"))
        key = alpha_key(a)
        out["gain"][key] = ev["exoskeleton"]["loss5"].answered / ev["no_cache"]["loss5"].answered
        out["gain_loss0"][key] = ev["exoskeleton"]["loss0"].answered / ev["no_cache"]["loss0"].answered
    return out


def fig4_3(ctx: Context, alpha: float = 0.99) -> dict:
    """Cluster throughput vs cache size at alpha 0.99: where the cache node becomes the bottleneck."""
    sizes = list(QUICK_FIG43_SIZES if ctx.quick else FIG43_SIZES)
    fine = sorted(set(np.unique(np.geomspace(10, 20000, 12 if ctx.quick else 40).astype(int)).tolist()) | set(sizes))
    m = ctx.model(alpha)
    rows = {}
    for i, k in enumerate(fine):
        if i % 10 == 0:
            progress(f"fig4_3: cache size {k}")
        rows[k] = m.evaluate(k)
    series = {s: {r: [rows[k][s][r].answered for k in sizes] for r in LOSS_RULES} for s in WITH_IDEAL}
    fine_series = {s: {r: [rows[k][s][r].answered for k in fine] for r in LOSS_RULES} for s in WITH_IDEAL}
    util = {r: [rows[k]["exoskeleton"][r].cache_work / m.cluster.cache_cap for k in fine] for r in LOSS_RULES}
    db_min = {r: [float((rows[k]["exoskeleton"][r].db_answered / m.cluster.db_cap).min()) for k in fine]
              for r in LOSS_RULES}
    knee = {}
    for r in LOSS_RULES:
        thr = fine_series["exoskeleton"][r]
        best = int(np.argmax(thr))
        bottleneck = next((k for k, u in zip(fine, util[r]) if u >= 0.999), None)
        knee[r] = {"best_size": fine[best], "best_throughput": thr[best],
                   "cache_bottleneck_from": bottleneck,
                   "thesis_sizes_below_best": [k for k, v in zip(sizes, series["exoskeleton"][r]) if v < 0.99 * thr[best]
                                               and k > fine[best]]}
    return {"figure": "4.3", "title": "Cluster throughput vs cache size (alpha %g)" % alpha, "alpha": alpha_key(alpha),
            "sizes": sizes, "series": series, "fine_sizes": fine, "fine_series": fine_series,
            "cache_share": [rows[k]["hit"] for k in fine], "held": [rows[k]["held"] for k in fine],
            "exoskeleton_cache_util": util, "exoskeleton_db_util_min": db_min, "knee": knee,
            "testbed": record.fig4_3(_head(ctx, "fig4_3"), alpha_key(alpha), sizes,
                                     _by_rule(series["exoskeleton"], [str(s) for s in sizes]),
                                     _by_rule({r: [rows[s]["exoskeleton"][r].loss for s in sizes] for r in LOSS_RULES},
                                              [str(s) for s in sizes]),
                                     {str(s): v for s, v in zip(sizes, series["ideal"]["loss0"])}),
            "model": ctx.model_info(["knee.best_size: the cache size with the highest Exoskeleton throughput; "
                                     "cache_bottleneck_from: the smallest size at which the cache node is at "
                                     "capacity at that throughput (bigger caches then starve the db nodes)"])}
