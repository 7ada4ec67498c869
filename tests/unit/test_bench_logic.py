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
