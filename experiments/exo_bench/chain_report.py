"""The replication cost figures (issue 15, outcome 5; docs/design/replication.md, section 7):
from the two chain cases' measurements to bench_replication.json's `replication` and `ratios`
blocks and the printed table. Pure: no I/O, so tests/unit/test_bench_replication_report.py
holds it to known inputs.

Every figure keeps its spread beside it: a ceiling (the loss rule of search.py) with the
answered rates of the repeat runs at the rate that passed and the per-second answered rates of
its best run; a latency with each repeat run's value. Every ratio is rf 3 over rf 1, measured
in one run of the bench on the same machine (`kind: measured`)."""
from __future__ import annotations

import statistics
from typing import Optional

SCHEMA = "exo-bench-replication/1"


def spread(values: list[float]) -> dict:
    """min / median / max / n of what was measured ({"n": 0} and Nones for nothing)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {"n": len(vals), "min": round(min(vals), 1), "median": round(statistics.median(vals), 1),
            "max": round(max(vals), 1)}


def ceiling_figure(ceiling: dict, repeats: list[dict], per_second: list[float]) -> dict:
    """One ceiling with its spread. `ceiling` is search.Ceiling.as_dict(); `repeats` the runs
    (Run.as_dict()) made again at the highest passing rate; `per_second` the answered requests
    of each second of the best passing run."""
    limit = ceiling.get("loss_limit", 0.01)
    passed = [r for r in repeats if r["loss"] <= limit and not r.get("errors") and not r.get("generator_limited")]
    return {"rps": ceiling.get("rps"), "loss_limit": limit, "limited_by": ceiling.get("limited_by"),
            "repeated_at_rate": (ceiling.get("bracket") or {}).get("pass"),
            "repeats_answered_rps": spread([r["answered_rps"] for r in repeats]),
            "repeats_loss": [round(r["loss"], 5) for r in repeats],
            "repeats_passing_loss_rule": len(passed),
            "best_run_per_second_answered": spread(per_second)}


def latency_figure(rate: Optional[float], runs: list[dict], key: str) -> dict:
    """A latency percentile (key: "p50_us" or "p99_us") at one offered PUT rate over repeat runs."""
    vals = [r.get(key) for r in runs]
    return {"offered_rate": rate, "median_us": spread(vals)["median"], "repeats_us": spread(vals),
            "per_run_us": vals, "per_run_loss": [round(r["loss"], 5) for r in runs]}


def case_figures(case: dict) -> dict:
    """The design's `replication.rf<N>` block of one case's raw measurements (runner output)."""
    put, get, lat = case.get("put") or {}, case.get("get") or {}, case.get("put_latency") or {}
    runs = lat.get("runs") or []
    return {
        "put_ceiling": ceiling_figure(put.get("ceiling") or {}, put.get("repeats") or [], put.get("per_second") or []),
        "put_p50_us_at": latency_figure(lat.get("rate"), runs, "p50_us"),
        "put_p99_us_at": latency_figure(lat.get("rate"), runs, "p99_us"),
        "get_ceiling": ceiling_figure(get.get("ceiling") or {}, get.get("repeats") or [], get.get("per_second") or []),
    }


def _div(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return round(a / b, 3) if a is not None and b else None


def ranges_overlap(a: dict, b: dict) -> Optional[bool]:
    """Whether two spreads' [min, max] overlap (None if either is empty)."""
    if not a.get("n") or not b.get("n"):
        return None
    return a["min"] <= b["max"] and b["min"] <= a["max"]


def ratios(rf1: dict, rf3: dict) -> dict:
    """rf 3 / rf 1 for each figure: `value` on the headline numbers (ceilings; medians of the
    latency repeats), and `range` from the repeats' extremes (rf3 min / rf1 max .. rf3 max /
    rf1 min), so a reader sees how much of a ratio the run-to-run spread could explain."""
    def one(of: str, a: dict, b: dict, head: str, rep: str) -> dict:
        ra, rb = a.get(rep) or {}, b.get(rep) or {}
        rng = None
        if ra.get("n") and rb.get("n") and ra["min"] and rb["min"]:
            rng = [round(rb["min"] / ra["max"], 3), round(rb["max"] / ra["min"], 3)]
        return {"value": _div(b.get(head), a.get(head)), "range_from_repeats": rng, "kind": "measured",
                "of": of, "repeats_ranges_overlap": ranges_overlap(ra, rb)}

    return {
        "put_rf3_vs_rf1": one("chain_rf3 put ceiling / chain_rf1 put ceiling (requests/s, loss <= 1%)",
                              rf1["put_ceiling"], rf3["put_ceiling"], "rps", "repeats_answered_rps"),
        "put_p50_rf3_vs_rf1": one("chain_rf3 PUT p50 / chain_rf1 PUT p50, same offered rate",
                                  rf1["put_p50_us_at"], rf3["put_p50_us_at"], "median_us", "repeats_us"),
        "put_p99_rf3_vs_rf1": one("chain_rf3 PUT p99 / chain_rf1 PUT p99, same offered rate",
                                  rf1["put_p99_us_at"], rf3["put_p99_us_at"], "median_us", "repeats_us"),
        "get_rf3_vs_rf1": one("chain_rf3 GET ceiling at the tail / chain_rf1 GET ceiling at the sole node",
                              rf1["get_ceiling"], rf3["get_ceiling"], "rps", "repeats_answered_rps"),
    }


def common_put_rate(put_ceilings: list[Optional[float]], share: float = 0.5) -> Optional[float]:
    """The one PUT rate both cases' latency is measured at: `share` of the lower ceiling."""
    known = [c for c in put_ceilings if c]
    return round(share * min(known)) if known else None


def _n(v, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:,.2f}{unit}" if isinstance(v, float) and abs(v) < 10 else f"{v:,.0f}{unit}"


def _sp(s: dict) -> str:
    return "-" if not s or not s.get("n") else f"{_n(s['min'])}..{_n(s['max'])} (n={s['n']})"


def table(doc: dict) -> str:
    rep = doc.get("replication") or {}
    rows = [f"replication cost: 3 db nodes on one core, chain [db0] (rf 1) or [db0, db1, db2] (rf 3), "
            f"{'SMOKE (checks the harness, not the speed)' if doc.get('smoke') else 'full run'}",
            f"{'':4s}{'PUT ceiling/s':>14s} {'repeats':>22s} {'per second':>22s} "
            f"{'PUT p50 us':>11s} {'PUT p99 us':>11s} {'p99 repeats':>20s} {'GET ceiling/s':>14s} {'repeats':>22s}"]
    for rf in ("rf1", "rf3"):
        f = rep.get(rf)
        if not f:
            continue
        pc, p50, p99, gc = f["put_ceiling"], f["put_p50_us_at"], f["put_p99_us_at"], f["get_ceiling"]
        rows.append(f"{rf:4s}{_n(pc['rps']):>14s} {_sp(pc['repeats_answered_rps']):>22s} "
                    f"{_sp(pc['best_run_per_second_answered']):>22s} {_n(p50['median_us']):>11s} "
                    f"{_n(p99['median_us']):>11s} {_sp(p99['repeats_us']):>20s} {_n(gc['rps']):>14s} "
                    f"{_sp(gc['repeats_answered_rps']):>22s}")
    rate = doc.get("put_common_rate")
    rows.append(f"PUT latency at {_n(rate)} PUTs/s offered to both (half the lower PUT ceiling); "
                f"ceilings: highest answered rate with loss <= 1% and no error replies")
    for name, r in (doc.get("ratios") or {}).items():
        rng = r.get("range_from_repeats")
        rows.append(f"  {name:20s} {_n(r.get('value')):>7s} (measured; from the repeats' extremes "
                    f"{'-' if not rng else f'{rng[0]:.2f}..{rng[1]:.2f}'}; repeat ranges overlap: "
                    f"{ {True: 'yes', False: 'no', None: '-'}[r.get('repeats_ranges_overlap')]})")
    return "\n".join(rows)
