"""The test bed's record (experiments/exo_testbed/record.py): both back ends write it with one
schema, derive gain and recovery with the same code, and the validator rejects what breaks it.
The simulator runs for real (--quick, ~5 s); the Mininet side is built by exo_figures.documents
from synthetic runs, as test_figures_logic.py does."""
import json

import pytest

from exo_figures import documents, publish, redocument
from exo_sim import figures as sim_figures
from exo_testbed import compare, record
from exo_testbed.scale import Scale


@pytest.fixture(scope="module")
def sim_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim")
    sim_figures.run(sim_figures.parser().parse_args(["--quick", "--no-plot", "--out", str(out)]))
    return out


def _point(thr, strict, util, loss=0.05):
    at = lambda v, L: {"throughput_rps": v, "met_loss_rule": v is not None, "loss": L if v else None,  # noqa: E731
                       "why": None if v else "x"}
    return {"throughput_rps": thr, "throughput_strict_rps": strict, "node_utilisation_sorted": util,
            "from_cache": 0.3, "cache_served_rps": 10.0, "hottest_db_node": "db7", "hottest_db_share": 0.05,
            "model_zero_loss_rps": strict, "zero_loss_rps_model": strict,
            "at_loss": {"0.05": at(thr, loss), "0.001": at(strict, 0.001)}}


def _static():
    return {"no_cache": {"uniform": _point(8000, 7000, [1.0, 0.9]), "0.99": _point(6000, 3500, [1.0, 0.2])},
            "cache_1000": {"uniform": _point(8100, 7000, [1.0, 0.95]), "0.99": _point(13000, 11000, [1.0, 0.9])},
            "cache_sizes": {"100": _point(9000, 6000, [1.0, 0.5]), "1000": _point(13000, 11000, [1.0, 0.9])}}


def _dyn(bin_s=0.1, seconds=30.0, swap=10.0):
    n = round(seconds / bin_s)
    t = [round(i * bin_s, 3) for i in range(n)]
    ans = [500.0 if swap <= x < swap + 1.2 else 1000.0 for x in t]
    return {"bin_s": bin_s, "offered_rps": 1000.0, "swap_at_s": [swap], "t": t, "answered_rps": ans,
            "from_cache_rps": [0.0] * n, "rule_updates_per_s": 50, "recovery_s": [1.2], "recovery_s_strict": [1.2],
            "recovery_s_mean": 1.2, "recovery_s_strict_mean": 1.2, "recovery_s_max": 1.2,
            "recovery_s_strict_max": 1.2, "recovered_all": True, "not_recovered_strict": 0, "swaps": []}


def _mininet_docs():
    s = Scale()
    st = _static()
    return {"fig4_1": documents.fig4_1(st, s, True), "fig4_2": documents.fig4_2(st, s, True),
            "fig4_3": documents.fig4_3(st, s, True), "fig4_4": documents.fig4_4(_dyn(), s, True)}


@pytest.mark.parametrize("name", record.FIGURES)
def test_both_back_ends_write_a_valid_record(sim_out, name):
    sim = json.loads((sim_out / f"{name}.json").read_text())["testbed"]
    mn = _mininet_docs()[name]["testbed"]
    for rec, src in ((sim, "simulator"), (mn, "mininet")):
        record.validate(rec)
        assert rec["source"] == src and rec["figure"] == name and rec["measured"] == (src == "mininet")
    # the same fields at the top of the record, whichever back end wrote it
    assert set(sim) == set(mn)


def test_gain_is_one_definition_for_both(sim_out):
    sim = json.loads((sim_out / "fig4_2.json").read_text())
    for a, g in sim["gain"].items():      # the simulator's own gain (5% rule) is the record's
        assert sim["testbed"]["gain"]["0.05"][a] == pytest.approx(g, abs=1e-3)
    mn = _mininet_docs()["fig4_2"]
    assert mn["testbed"]["gain"]["0.05"] == {a: pytest.approx(g, abs=1e-3) for a, g in mn["gain"].items()}
    assert mn["testbed"]["gain"]["0.001"]["0.99"] == pytest.approx(11000 / 3500, abs=1e-3)


def test_the_simulator_also_measures_the_strict_rule(sim_out):
    rec = json.loads((sim_out / "fig4_2.json").read_text())["testbed"]
    assert rec["rules"] == ["0.05", "0.001", "0"]
    for a in rec["alphas"]:
        l5, l01 = rec["loss"]["cache"]["0.05"][a], rec["loss"]["cache"]["0.001"][a]
        assert l5 <= 0.05 + 1e-9 and l01 <= 0.001 + 1e-9


def test_recovery_is_computed_on_the_same_bins():
    """A 50 ms series (the simulator's ticks) and the same series in 100 ms bins (Mininet's) give
    the same recovery: the record averages finer series to record.BIN_S first."""
    head = record.header("fig4_4", "simulator", Scale().testbed(), [])
    fine, coarse = _dyn(bin_s=0.05), _dyn(bin_s=0.1)
    a = record.fig4_4(head, 0.05, 1000.0, 1000, [10.0], fine["t"], fine["answered_rps"])
    b = record.fig4_4(head, 0.1, 1000.0, 1000, [10.0], coarse["t"], coarse["answered_rps"])
    assert a["bin_s"] == b["bin_s"] == record.BIN_S and len(a["t_s"]) == len(b["t_s"])
    assert a["recovery"]["recovery_s_strict"] == b["recovery"]["recovery_s_strict"] == [1.2]


@pytest.mark.parametrize("breaks, field", [
    (lambda r: r.pop("gain"), "testbed: missing gain"),
    (lambda r: r["throughput_rps"]["cache"]["0.05"].pop("0.99"), "testbed.throughput_rps.cache.0.05: missing 0.99"),
    (lambda r: r["loss"]["no_cache"]["0.001"].update({"uniform": "5%"}), "testbed.loss.no_cache.0.001.uniform"),
    (lambda r: r["scale"].pop("db_capacity_rps"), "testbed.scale: missing db_capacity_rps"),
    (lambda r: r.update(source="spreadsheet"), "testbed.source"),
    (lambda r: r.update(schema="exo-testbed/0"), "testbed.schema"),
])
def test_the_validator_names_the_broken_field(breaks, field):
    rec = json.loads(json.dumps(_mininet_docs()["fig4_2"]["testbed"]))
    record.validate(rec)
    breaks(rec)
    with pytest.raises(record.RecordError, match=field.replace(".", r"\.")):
        record.validate(rec)


def test_compare_puts_both_on_one_chart(sim_out, tmp_path, capsys):
    mn = tmp_path / "mininet"
    mn.mkdir()
    publish.publish(_mininet_docs(), mn, Scale(), None)
    assert compare.main(["--mininet", str(mn), "--sim", str(sim_out), "--out", str(tmp_path / "cmp")]) == 0
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert set(result["figures"]) == set(record.FIGURES) and not result["skipped"]
    for name in record.FIGURES:
        assert (tmp_path / "cmp" / f"{name}.png").stat().st_size > 10_000
    assert result["figures"]["fig4_4"]["mininet"]["recovery_s_strict_mean"] == 1.2
    # a result file without the record (written before it existed) is skipped, saying why ...
    d = json.loads((mn / "fig4_2.json").read_text())
    del d["testbed"]
    (mn / "fig4_2.json").write_text(json.dumps(d))
    assert compare.main(["--mininet", str(mn), "--sim", str(sim_out), "--out", str(tmp_path / "cmp")]) == 0
    skipped = json.loads((tmp_path / "cmp" / "compare.json").read_text())["skipped"]
    assert list(skipped) == ["fig4_2"] and "no `testbed` record" in skipped["fig4_2"]
    # ... and a broken one is an error naming the file and the field
    d["testbed"] = {"schema": record.SCHEMA}
    (mn / "fig4_2.json").write_text(json.dumps(d))
    assert compare.main(["--mininet", str(mn), "--sim", str(sim_out), "--out", str(tmp_path / "cmp")]) == 2
    assert "fig4_2.json: testbed: missing figure" in capsys.readouterr().err


def test_redocument_rebuilds_the_documents_from_their_runs(tmp_path):
    docs = _mininet_docs()
    publish.publish(docs, tmp_path, Scale(), None)
    for name in docs:       # as a result written before the record existed
        d = json.loads((tmp_path / f"{name}.json").read_text())
        del d["testbed"]
        (tmp_path / f"{name}.json").write_text(json.dumps(d))
    assert redocument.main(["--out", str(tmp_path)]) == 0
    for name, d in docs.items():
        again = json.loads((tmp_path / f"{name}.json").read_text())
        assert again["testbed"] == json.loads(json.dumps(d["testbed"]))
