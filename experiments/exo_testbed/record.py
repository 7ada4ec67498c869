"""The record of Figures 4.1-4.4 that both back ends write, under `testbed` in every
results/fig4_N.json (Mininet, exo_figures) and results/sim/fig4_N.json (simulator, exo_sim).

Each back end keeps its own detail beside it (the runs behind every Mininet point, the model's
baselines); the record holds what the two have in common, in one schema, so the two can be
checked alike and plotted on one chart (compare.py). The builders below compute what is derived
(gain, recovery) themselves, so both back ends get it from the same code:

  header    schema, figure, source ("mininet" | "simulator"), measured (false: a model's numbers),
            rules (loss-rule keys, loss_rules.rule_key), scale (scale_record)
  fig4_1    alphas, cache_entries, rule, utilisation_sorted[system][alpha] = [db node
            utilisation, highest first] at that system's throughput under `rule`
  fig4_2    alphas, cache_entries, throughput_rps[system][rule][alpha], loss[system][rule][alpha]
            (the measured or modelled loss of the point; None where the rule was not met),
            ideal_rps[alpha], gain[rule][alpha] = cache / no_cache (None where either is None)
  fig4_3    alpha, sizes, throughput_rps[rule][size], loss[rule][size], ideal_rps[size]
  fig4_4    bin_s, offered_rps, cache_entries, swap_at_s, t_s, answered_rps, and recovery: the
            per-swap records and summary of recovery.py (both criteria), computed here
Systems are "no_cache" and "cache" (Exoskeleton with its cache); throughputs in requests/s of the
record's own scale (compare.py divides by scale.db_capacity_rps to put both on one axis).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

from . import recovery

SCHEMA = "exo-testbed/1"
SOURCES = ("mininet", "simulator")
SYSTEMS = ("no_cache", "cache")
FIGURES = ("fig4_1", "fig4_2", "fig4_3", "fig4_4")
BIN_S = 0.1   # Figure 4.4's bins in the record: finer series (the simulator's 50 ms ticks) are averaged to it
SCALE_FIELDS = ("db_nodes", "node_rps", "db_capacity_rps", "cache_rps", "keys", "rule_updates_per_s",
                "rate_factor")


class RecordError(ValueError):
    """A record that does not follow the schema; the message names the field."""


def alpha_key(alpha: float) -> str:
    """The JSON key of an alpha: "uniform" for 0, else its shortest form ("0.99", "0.995")."""
    return "uniform" if alpha == 0 else f"{alpha:g}"


def alpha_of(key: str) -> float:
    return 0.0 if key == "uniform" else float(key)


def scale_record(db_nodes: int, node_rps: float, cache_rps: float, keys: int, rule_updates_per_s: float,
                 rate_factor: float) -> dict:
    return {"db_nodes": db_nodes, "node_rps": node_rps, "db_capacity_rps": db_nodes * node_rps,
            "cache_rps": cache_rps, "keys": keys, "rule_updates_per_s": rule_updates_per_s,
            "rate_factor": rate_factor}


def header(figure: str, source: str, scale: dict, rules: Sequence[str]) -> dict:
    if source not in SOURCES:
        raise RecordError(f"source: {source!r} is not one of {SOURCES}")
    return {"schema": SCHEMA, "figure": figure, "source": source, "measured": source == "mininet",
            "rules": list(rules), "scale": dict(scale)}


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return round(a / b, 3) if a is not None and b else None


def fig4_1(head: dict, alphas: Sequence[str], cache_entries: int, rule: str,
           utilisation_sorted: Mapping[str, Mapping[str, Sequence[float]]]) -> dict:
    return {**head, "alphas": list(alphas), "cache_entries": cache_entries, "rule": rule,
            "utilisation_sorted": {s: {a: [round(float(u), 4) for u in utilisation_sorted[s][a]] for a in alphas}
                                   for s in SYSTEMS}}


def fig4_2(head: dict, alphas: Sequence[str], cache_entries: int,
           throughput_rps: Mapping[str, Mapping[str, Mapping[str, Optional[float]]]],
           loss: Mapping[str, Mapping[str, Mapping[str, Optional[float]]]],
           ideal_rps: Mapping[str, float]) -> dict:
    rules = head["rules"]
    thr = {s: {r: {a: throughput_rps[s][r].get(a) for a in alphas} for r in rules} for s in SYSTEMS}
    return {**head, "alphas": list(alphas), "cache_entries": cache_entries, "throughput_rps": thr,
            "loss": {s: {r: {a: loss[s][r].get(a) for a in alphas} for r in rules} for s in SYSTEMS},
            "ideal_rps": {a: ideal_rps[a] for a in alphas},
            "gain": {r: {a: _ratio(thr["cache"][r][a], thr["no_cache"][r][a]) for a in alphas} for r in rules}}


def fig4_3(head: dict, alpha: str, sizes: Sequence[int], throughput_rps: Mapping[str, Mapping[str, Optional[float]]],
           loss: Mapping[str, Mapping[str, Optional[float]]], ideal_rps: Mapping[str, float]) -> dict:
    keys = [str(k) for k in sizes]
    return {**head, "alpha": alpha, "sizes": [int(k) for k in sizes],
            "throughput_rps": {r: {k: throughput_rps[r].get(k) for k in keys} for r in head["rules"]},
            "loss": {r: {k: loss[r].get(k) for k in keys} for r in head["rules"]},
            "ideal_rps": {k: ideal_rps[k] for k in keys}}


def fig4_4(head: dict, bin_s: float, offered_rps: float, cache_entries: int, swap_at_s: Sequence[float],
           t_s: Sequence[float], answered_rps: Sequence[float],
           from_cache_rps: Optional[Sequence[float]] = None) -> dict:
    """Recovery by the one pair of criteria (recovery.py) on the answered rate at a fixed offered
    rate, in BIN_S bins: the same computation, on the same bins, for the measured and the
    modelled series (a series in finer bins is averaged to BIN_S first, see rebin)."""
    t_s, answered_rps, from_cache_rps, bin_s = rebin(t_s, answered_rps, from_cache_rps, bin_s)
    per_swap = recovery.swap_recoveries(list(t_s), list(answered_rps), list(swap_at_s), bin_s,
                                        from_cache_rps=None if from_cache_rps is None else list(from_cache_rps))
    return {**head, "bin_s": bin_s, "offered_rps": offered_rps, "cache_entries": cache_entries,
            "swap_at_s": list(swap_at_s), "t_s": list(t_s), "answered_rps": [round(v, 1) for v in answered_rps],
            "recovery": {"criteria": recovery.criteria_text(bin_s), "swaps": per_swap,
                         **recovery.summarise(per_swap)}}


def rebin(t_s: Sequence[float], rps: Sequence[float], rps2: Optional[Sequence[float]], bin_s: float):
    """Average a series in bins of bin_s into BIN_S bins when BIN_S is a whole multiple of bin_s
    (a partial last bin is dropped); otherwise return it as it is."""
    n = BIN_S / bin_s
    if bin_s >= BIN_S or abs(n - round(n)) > 1e-9:
        return list(t_s), list(rps), None if rps2 is None else list(rps2), bin_s
    n = round(n)
    full = len(t_s) // n * n

    def avg(v):
        return [sum(v[i:i + n]) / n for i in range(0, full, n)]
    return ([round(t_s[i], 6) for i in range(0, full, n)], avg(rps), None if rps2 is None else avg(rps2), BIN_S)


# --- validation: what every record must hold, checked the same for both back ends -------------

def _num(v: Any, where: str, optional: bool = False) -> None:
    if v is None and optional:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
        raise RecordError(f"{where}: expected a number{' or null' if optional else ''}, got {v!r}")


def _keys(d: Any, want: Sequence[str], where: str) -> None:
    if not isinstance(d, dict):
        raise RecordError(f"{where}: expected an object, got {type(d).__name__}")
    missing = [k for k in want if k not in d]
    if missing:
        raise RecordError(f"{where}: missing {', '.join(missing)}")


def _by(d: Any, outer: Sequence[str], inner: Sequence[str], where: str, optional: bool = True) -> None:
    _keys(d, outer, where)
    for o in outer:
        _keys(d[o], inner, f"{where}.{o}")
        for i in inner:
            _num(d[o][i], f"{where}.{o}.{i}", optional)


def validate(rec: Any) -> dict:
    """Raises RecordError naming the first field that breaks the schema; returns rec."""
    _keys(rec, ("schema", "figure", "source", "measured", "rules", "scale"), "testbed")
    if rec["schema"] != SCHEMA:
        raise RecordError(f"testbed.schema: {rec['schema']!r}, this code reads {SCHEMA!r}")
    if rec["source"] not in SOURCES:
        raise RecordError(f"testbed.source: {rec['source']!r} is not one of {SOURCES}")
    _keys(rec["scale"], SCALE_FIELDS, "testbed.scale")
    for k in SCALE_FIELDS:
        _num(rec["scale"][k], f"testbed.scale.{k}")
    rules, fig = rec["rules"], rec["figure"]
    if fig == "fig4_1":
        _keys(rec, ("alphas", "cache_entries", "rule", "utilisation_sorted"), "testbed")
        _keys(rec["utilisation_sorted"], SYSTEMS, "testbed.utilisation_sorted")
        for s in SYSTEMS:
            _keys(rec["utilisation_sorted"][s], rec["alphas"], f"testbed.utilisation_sorted.{s}")
            for a in rec["alphas"]:
                for i, u in enumerate(rec["utilisation_sorted"][s][a]):
                    _num(u, f"testbed.utilisation_sorted.{s}.{a}[{i}]")
    elif fig == "fig4_2":
        _keys(rec, ("alphas", "cache_entries", "throughput_rps", "loss", "ideal_rps", "gain"), "testbed")
        for field in ("throughput_rps", "loss"):
            _keys(rec[field], SYSTEMS, f"testbed.{field}")
            for s in SYSTEMS:
                _by(rec[field][s], rules, rec["alphas"], f"testbed.{field}.{s}")
        _by(rec["gain"], rules, rec["alphas"], "testbed.gain")
        _by({"_": rec["ideal_rps"]}, ["_"], rec["alphas"], "testbed.ideal_rps", optional=False)
    elif fig == "fig4_3":
        _keys(rec, ("alpha", "sizes", "throughput_rps", "loss", "ideal_rps"), "testbed")
        sizes = [str(k) for k in rec["sizes"]]
        _by(rec["throughput_rps"], rules, sizes, "testbed.throughput_rps")
        _by(rec["loss"], rules, sizes, "testbed.loss")
    elif fig == "fig4_4":
        _keys(rec, ("bin_s", "offered_rps", "swap_at_s", "t_s", "answered_rps", "recovery"), "testbed")
        if len(rec["t_s"]) != len(rec["answered_rps"]):
            raise RecordError(f"testbed.answered_rps: {len(rec['answered_rps'])} bins for {len(rec['t_s'])} times")
        _keys(rec["recovery"], ("swaps", "recovery_s", "recovery_s_strict", "recovery_s_mean",
                                "recovery_s_strict_mean", "recovered_all"), "testbed.recovery")
        if len(rec["recovery"]["swaps"]) != len(rec["swap_at_s"]):
            raise RecordError("testbed.recovery.swaps: not one per swap_at_s")
    else:
        raise RecordError(f"testbed.figure: {fig!r} is not one of {FIGURES}")
    return rec
