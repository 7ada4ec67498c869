"""exo_bench's replication cost cases, their pure parts: the chain table the bench gives the
db nodes (every slot [db0] or [db0, db1, db2], held to the resolved config's checks), the
spread kept beside each figure, and the rf 3 / rf 1 ratios."""
import pytest

from exo_bench import chain_report
from exo_bench.chain import CHAIN_CASES, DB_NAMES, PARTITION_BITS, resolved_with_chain
from exo_common.config import ConfigError, parse_config
from exo_topo.configgen import emulation_config_dict


def _cfg(rf: int):
    return parse_config(emulation_config_dict(1, 3, 1, "/tmp/exo/unit-chain", replication={"factor": rf},
                                              switch={"partition_bits": PARTITION_BITS}), "<unit>")


def test_the_two_cases_differ_only_in_the_chain():
    rf1, rf3 = CHAIN_CASES
    assert (rf1.name, rf1.chain, rf1.read_server) == ("chain_rf1", ["db0"], "db0")
    assert (rf3.name, rf3.chain, rf3.read_server) == ("chain_rf3", ["db0", "db1", "db2"], "db2")
    for case in CHAIN_CASES:
        out = resolved_with_chain(_cfg(case.rf), case.chain)
        assert [d["name"] for d in out["db_nodes"]] == list(DB_NAMES)
        assert out["partitions"] == ["db0"] * (1 << PARTITION_BITS)
        assert all(c["nodes"] == case.chain for c in out["chains"])


def test_a_chain_the_config_refuses_is_not_written():
    with pytest.raises(ConfigError, match="repeats db node 'db0'"):
        resolved_with_chain(_cfg(3), ["db0", "db1", "db0"])
    with pytest.raises(ConfigError, match="more than replication.factor 1"):
        resolved_with_chain(_cfg(1), ["db0", "db1", "db2"])


def _run(answered, loss=0.0, p50=None, p99=None):
    return {"rate": answered, "offered_rps": answered, "answered_rps": answered, "loss": loss, "errors": 0,
            "generator_limited": False, "p50_us": p50, "p99_us": p99}


def _case(put, put_repeats, get, get_repeats, lat_runs, rate):
    ceiling = lambda rps: {"rps": rps, "loss_limit": 0.01, "bracket": {"pass": rps, "fail": None},  # noqa: E731
                           "limited_by": None}
    return {"put": {"ceiling": ceiling(put), "repeats": [_run(a, l) for a, l in put_repeats], "per_second": [put]},
            "get": {"ceiling": ceiling(get), "repeats": [_run(a) for a in get_repeats], "per_second": [get - 5, get]},
            "put_latency": {"rate": rate, "runs": [_run(rate, 0.0, p50, p99) for p50, p99 in lat_runs]}}


def test_figures_keep_their_spread_and_ratios_say_measured():
    rf1 = chain_report.case_figures(_case(60_000, [(59_000, 0.0), (58_000, 0.05)], 50_000, [49_000, 51_000],
                                          [(50, 200), (60, 300), (55, 250)], 1_000))
    rf3 = chain_report.case_figures(_case(2_000, [(2_000, 0.0), (1_900, 0.0)], 49_500, [48_000, 50_500],
                                          [(500, 900), (600, 1200), (550, 1000)], 1_000))
    assert rf1["put_ceiling"]["repeats_answered_rps"] == {"n": 2, "min": 58_000, "median": 58_500, "max": 59_000}
    assert rf1["put_ceiling"]["repeats_passing_loss_rule"] == 1  # the 5% run fails the same rule
    assert rf1["put_p99_us_at"]["median_us"] == 250 and rf1["put_p99_us_at"]["per_run_us"] == [200, 300, 250]
    assert rf1["get_ceiling"]["best_run_per_second_answered"]["min"] == 49_995
    r = chain_report.ratios(rf1, rf3)
    assert all(v["kind"] == "measured" for v in r.values())
    assert r["put_rf3_vs_rf1"]["value"] == pytest.approx(2_000 / 60_000, abs=1e-3)
    assert r["put_p99_rf3_vs_rf1"]["value"] == 4.0
    assert r["put_p99_rf3_vs_rf1"]["range_from_repeats"] == [3.0, 6.0]
    assert r["put_p99_rf3_vs_rf1"]["repeats_ranges_overlap"] is False
    assert r["get_rf3_vs_rf1"]["value"] == 0.99 and r["get_rf3_vs_rf1"]["repeats_ranges_overlap"] is True
    doc = {"replication": {"rf1": rf1, "rf3": rf3}, "ratios": r, "put_common_rate": 1_000, "smoke": False}
    text = chain_report.table(doc)
    assert "rf1" in text and "rf3" in text and "put_rf3_vs_rf1" in text


def test_empty_measurements_do_not_crash():
    f = chain_report.case_figures({})
    assert f["put_ceiling"]["rps"] is None and f["put_p99_us_at"]["median_us"] is None
    r = chain_report.ratios(f, f)
    assert r["put_rf3_vs_rf1"]["value"] is None and r["get_rf3_vs_rf1"]["repeats_ranges_overlap"] is None
    assert chain_report.common_put_rate([None, None]) is None
    assert chain_report.common_put_rate([60_000, 2_000]) == 1_000
