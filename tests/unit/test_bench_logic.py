"""exo_bench's pure parts: the loss rule's search, and the ratios against their targets
(the speed itself is never asserted)."""
from __future__ import annotations

from exo_bench import report
from exo_bench.search import LOSS_LIMIT, Run, find_ceiling


def server(capacity: float, gen_max: float = 1e9):
    """A fake server that answers up to `capacity`/s and a generator that offers up to gen_max."""
    def run_at(rate: float) -> Run:
        offered = min(rate, gen_max)
        answered = min(offered, capacity)
        return Run(rate=rate, offered_rps=offered, answered_rps=answered, loss=1 - answered / offered)
    return run_at


def test_ceiling_is_bracketed_within_precision():
    c = find_ceiling(server(123_000), start=10_000, max_rate=2e6, max_runs=20, precision=0.02)
    assert c.limited_by is None
    assert c.bracket["pass"] <= 123_000 / (1 - LOSS_LIMIT) + 1
    assert c.bracket["fail"] / c.bracket["pass"] <= 1.02
    assert 0.97 * 123_000 <= c.rps <= 123_000
    assert all(r.passes() == (r.loss <= LOSS_LIMIT) for r in c.runs)


def test_a_run_over_the_loss_limit_never_sets_the_ceiling():
    c = find_ceiling(server(50_000), start=80_000, max_rate=2e6, max_runs=12)
    assert c.rps is not None and c.rps <= 50_000 * (1 + 1e-9)
    assert max(r.answered_rps for r in c.runs if r.passes()) == c.rps
    assert any(not r.passes() for r in c.runs)


def test_generator_limit_is_named_not_reported_as_the_servers_ceiling():
    c = find_ceiling(server(1e9, gen_max=300_000), start=100_000, max_rate=2e6, max_runs=12)
    assert c.limited_by == "load generator"
    assert c.rps <= 300_000


def test_budget_exhausted_is_named():
    c = find_ceiling(server(123_000), start=1_000, max_rate=2e6, max_runs=4)
    assert c.limited_by == "search budget"


def test_errors_fail_a_run():
    r = Run(rate=1000, offered_rps=1000, answered_rps=1000, loss=0.0, errors=3)
    assert not r.passes()


def _doc(cache, raw, mc, db, rdb, cp99, dp99):
    def case(rps, p99):
        return {"ceiling": {"rps": rps, "limited_by": None}, "latency_at_common": {"p99_us": p99, "loss": 0}}
    return {"cases": {"cache_node": case(cache, cp99), "raw": case(raw, 10), "memcached": case(mc, 10),
                      "db_node": case(db, dp99)},
            "rocksdb_in_process": {"gets_per_s": rdb}}


def test_ratios_met_and_missed_say_by_how_much():
    r = report.compute_ratios(_doc(cache=90, raw=100, mc=20, db=35, rdb=100, cp99=10, dp99=50))
    assert r["cache_vs_raw"]["met"] is True and r["cache_vs_raw"]["value"] == 0.9
    assert r["cache_vs_memcached"]["met"] is True
    assert r["db_vs_rocksdb"]["met"] is False and r["db_vs_rocksdb"]["short_by"] == 0.35
    assert "limits" in r["db_vs_rocksdb"]
    assert r["db_p99_vs_cache_p99"]["value"] == 5.0
    assert set(report.TARGETS) <= set(r)


def test_unmeasured_ratio_is_none_not_zero():
    r = report.compute_ratios(_doc(cache=90, raw=None, mc=20, db=35, rdb=None, cp99=10, dp99=50))
    assert r["cache_vs_raw"]["value"] is None and r["cache_vs_raw"]["met"] is None
    assert r["db_vs_rocksdb"]["met"] is None


def test_table_prints_every_ratio():
    doc = _doc(cache=90, raw=100, mc=20, db=35, rdb=100, cp99=10, dp99=50)
    doc["ratios"] = report.compute_ratios(doc)
    doc["common_rate"] = 10
    text = report.table(doc)
    for name in report.TARGETS:
        assert name in text


def test_one_stalled_run_does_not_cap_the_ceiling_but_two_do():
    calls: dict[float, int] = {}

    def flaky(rate: float) -> Run:
        calls[rate] = calls.get(rate, 0) + 1
        stalled = rate == 50_000 and calls[rate] == 1  # the first run at 50k hits a stall
        loss = 0.05 if stalled or rate > 90_000 else 0.0
        return Run(rate=rate, offered_rps=rate, answered_rps=rate * (1 - loss), loss=loss)

    c = find_ceiling(flaky, start=25_000, max_rate=2e6, max_runs=14)
    assert c.rps > 80_000 and calls[50_000] == 2
    def always_fails_at_50k(rate: float) -> Run:
        loss = 0.1 if rate >= 50_000 else 0.0
        return Run(rate=rate, offered_rps=rate, answered_rps=rate * (1 - loss), loss=loss)

    strict = find_ceiling(always_fails_at_50k, start=25_000, max_rate=2e6, max_runs=14)
    assert strict.rps < 50_000


# ---- the proxy case (issue 13): GETs/s against 100,000, and the latency it adds

def _proxy_doc(gets, p99=300.0, direct_p99=120.0, node_p99=90.0, rate=40_000, cores_busy=None, proxy_cpu=0.97):
    doc = _doc(cache=200_000, raw=300_000, mc=60_000, db=80_000, rdb=100_000, cp99=node_p99, dp99=400)
    doc["cases"]["proxy"] = {
        "ceiling": {"rps": gets, "limited_by": None},
        "generator": {"program": "exo-mcload", "connections": 128, "depth": 1},
        "server": {"cores": {"0": ["exo-mcload (the memcached client)", "exo-cache-node (idle_sleep_us 20)"],
                             "1": ["exo-proxy"]}},
        "latency_at_common": {"rate": rate, "p50_us": 100.0, "p99_us": p99, "loss": 0.0,
                              "direct_same_setup": {"rate": rate, "p50_us": 40.0, "p99_us": direct_p99, "loss": 0.0}},
        "evidence": {"rate": 0.9 * (gets or 0), "cpu_ns_per_request": 9000.0, "cpu_utilisation": proxy_cpu,
                     "syscalls_per_request": 2.5, "cores_busy": cores_busy or {"0": 0.6, "1": 0.98},
                     "cpu_utilisation_of": {"cache_node": 0.3},
                     "generator_run": {"extra": {"cpu_user_s": 0.2, "cpu_sys_s": 1.1, "answered": 260_000}}},
        "proxy_stats": {"cluster_sent": 10, "cluster_resent": 0, "cluster_timeouts": 0},
    }
    return doc


def test_proxy_figures_report_the_target_and_the_latency_added():
    px = report.proxy_figures(_proxy_doc(gets=120_000))
    assert px["gets_per_s"] == 120_000 and px["target_gets_per_s"] == 100_000 and px["met"] is True
    assert px["short_by"] is None and "limits" not in px
    assert px["connections"] == 128 and px["depth"] == 1
    assert px["p99_added_us"] == 180.0 and px["p50_added_us"] == 60.0
    assert px["vs_cache_node_case"]["p99_added_us"] == 210.0
    assert px["cores"]["1"] == ["exo-proxy"]


def test_a_missed_proxy_target_says_by_how_much_and_what_limits_it():
    px = report.proxy_figures(_proxy_doc(gets=80_000))
    assert px["met"] is False and px["short_by"] == 20_000 and px["short_by_share"] == 0.2
    text = " ".join(px["limits"])
    assert "9000 CPU-ns/request" in text and "core 1 98% busy, of which the proxy process 97%" in text
    assert "exo-mcload (5.0 us CPU per answer)" in text
    assert "bound: the proxy's core is full" in text and "bound: the generator's core" not in text
    r = report.compute_ratios(_proxy_doc(gets=80_000))["proxy_gets_per_s_vs_target"]
    assert r["value"] == 0.8 and r["target"] == 1.0 and r["met"] is False and r["limits"]


def test_a_passing_run_asked_at_the_target_is_said_beside_a_near_miss():
    doc = _proxy_doc(gets=99_995)
    doc["cases"]["proxy"]["ceiling"]["runs"] = [
        {"rate": 100_000, "loss": 0.0, "errors": 0, "generator_limited": False},
        {"rate": 109_051, "loss": 0.05, "errors": 0, "generator_limited": False}]
    px = report.proxy_figures(doc)
    assert px["met"] is False and px["short_by"] == 5 and px["passed_at_target_rate"] is True
    doc["proxy"], doc["ratios"], doc["common_rate"] = px, report.compute_ratios(doc), 40_000
    assert "a run asked for 100,000/s passed the loss rule" in report.table(doc)
    doc["cases"]["proxy"]["ceiling"]["runs"][0]["loss"] = 0.02  # that run failed after all
    assert report.proxy_figures(doc)["passed_at_target_rate"] is False


def test_a_full_generator_core_is_named_as_the_bound():
    px = report.proxy_figures(_proxy_doc(gets=70_000, cores_busy={"0": 0.99, "1": 0.6}, proxy_cpu=0.55))
    assert any("bound: the generator's core is full" in s for s in px["limits"])
    assert not any("bound: the proxy's core" in s for s in px["limits"])
    # Core 1 full of something else than the proxy: said so, and not blamed on the proxy.
    px = report.proxy_figures(_proxy_doc(gets=70_000, cores_busy={"0": 0.95, "1": 0.97}, proxy_cpu=0.7))
    text = " ".join(px["limits"])
    assert "the proxy process used 70% of it" in text and "bound: the proxy's core" not in text
    assert "core 0 (exo-mcload and the cache node) is full too" in text


def test_proxy_latency_above_its_ceiling_is_flagged_and_unmeasured_is_none():
    assert "note" in report.proxy_figures(_proxy_doc(gets=30_000, rate=40_000))
    doc = _proxy_doc(gets=None)
    doc["cases"]["proxy"]["latency_at_common"] = {}
    px = report.proxy_figures(doc)
    assert px["met"] is None and px["p99_added_us"] is None
    assert report.compute_ratios(doc)["proxy_gets_per_s_vs_target"]["met"] is None
    assert "error" in report.proxy_figures(_doc(1, 1, 1, 1, 1, 1, 1))


def test_table_prints_the_proxy_figures():
    doc = _proxy_doc(gets=80_000)
    doc["proxy"] = report.proxy_figures(doc)
    doc["ratios"] = report.compute_ratios(doc)
    doc["common_rate"] = 40_000
    text = report.table(doc)
    assert "proxy_gets_per_s_vs_target" in text
    assert "80,000 GETs/s, target 100,000: NOT met, short by 20,000" in text
    assert "core 1: exo-proxy" in text and "added 60.00 / 180 us" in text


def test_mcload_argv_sends_to_the_proxy_and_checks_the_value_size():
    from pathlib import Path

    from exo_bench.loadgen import Target
    from exo_bench.mcload import McLoad
    lg = McLoad(Path("/b/exo-mcload"), "ns", Path("/tmp"), connections=64, depth=2, value_size=512)
    a = lg.argv(Target("memcached-tcp", keys=2000, dst={"server": "127.0.0.1:11211"}), 12345.6, Path("/o.json"))
    assert a[a.index("--server") + 1] == "127.0.0.1:11211" and a[a.index("--rate") + 1] == "12346"
    assert a[a.index("--connections") + 1] == "64" and a[a.index("--depth") + 1] == "2"
    assert a[a.index("--keys") + 1] == "2000" and a[a.index("--expect-value-size") + 1] == "512"
    assert "--unix" in lg.argv(Target("memcached-tcp", dst={"unix": "/run/p.sock"}), 1, Path("/o"))
    import pytest
    with pytest.raises(ValueError):
        lg.argv(Target("exo"), 1, Path("/o"))


def test_core_busy_shares_from_proc_stat():
    from exo_bench import evidence
    before = evidence.core_ticks("cpu  1 2 3 4\ncpu0 100 0 50 800 50 0 0 0 0 0\ncpu1 10 0 0 980 10 0 0 0 0 0\n")
    after = evidence.core_ticks("cpu0 190 0 60 840 60 0 0 0 0 0\ncpu1 20 0 0 1070 10 0 0 0 0 0\n")
    assert evidence.busy_share(before, after) == {"0": 0.667, "1": 0.1}
