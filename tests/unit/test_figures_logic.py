"""The figure harness's pure parts: the throughput rule's search, recovery after a swap, the
documents (gain keyed by alpha string, scale in every document)."""
import pytest

from exo_figures import documents
from exo_figures.recovery import recovery_times
from exo_figures.scale import Scale
from exo_figures.throughput import Measurement, find_throughput, predicted_loss, rate_for_loss

CAPS = {"a": 100.0, "b": 100.0, "c": 100.0}
SHARES = {"a": 0.5, "b": 0.25, "c": 0.25}  # a is hot


def fake_cluster(extra_loss=0.0):
    """A cluster that behaves exactly like the model, plus loss the model does not see."""
    calls = []

    def measure(rate):
        served = sum(min(rate * s, CAPS[t]) for t, s in SHARES.items())
        loss = 1 - served / rate + extra_loss
        calls.append(rate)
        return Measurement(rate, rate * (1 - loss), loss, SHARES, CAPS)
    return measure, calls


def test_predicted_loss_by_hand():
    assert predicted_loss(200, SHARES, CAPS) == 0.0          # a exactly full
    assert predicted_loss(300, SHARES, CAPS) == pytest.approx(50 / 300)
    r = rate_for_loss(SHARES, CAPS, 0.05)                      # 0.5 r - 100 = 0.05 r
    assert r == pytest.approx(100 / 0.45, rel=1e-6)


def test_search_lands_on_the_loss_rule():
    measure, calls = fake_cluster()
    s = find_throughput(measure, probe_rate=50, max_loss=0.05)
    assert s.met_loss_rule and s.best.loss <= 0.05
    # aim 0.8 x 5% = 4%: 0.5 r - 100 = 0.04 r -> r = 217.4, answered 0.96 r
    assert s.throughput_rps == pytest.approx(0.96 * 100 / 0.46, rel=1e-3)
    assert len(calls) <= 4


def test_search_corrects_for_unmodelled_loss():
    measure, _ = fake_cluster(extra_loss=0.02)
    s = find_throughput(measure, probe_rate=50, max_loss=0.05)
    assert s.met_loss_rule and s.best.loss <= 0.05


def test_search_reports_when_the_rule_cannot_be_met():
    measure, _ = fake_cluster(extra_loss=0.2)
    s = find_throughput(measure, probe_rate=50, max_loss=0.05)
    assert not s.met_loss_rule


def test_recovery_times():
    bin_s = 0.1
    t = [round(i * bin_s, 1) for i in range(400)]
    ans = [100.0] * 400
    for i in range(100, 113):  # swap at 10 s: 1.3 s below 95%
        ans[i] = 50.0
    # swap at 20 s: no dip; swap at 30 s: never back before the end
    for i in range(300, 400):
        ans[i] = 10.0
    assert recovery_times(t, ans, [10.0, 20.0, 30.0], bin_s) == [1.3, 0.0, None]


def test_recovery_needs_the_level_held():
    bin_s = 0.1
    t = [round(i * bin_s, 1) for i in range(300)]
    ans = [100.0] * 300
    for i in range(100, 120):
        ans[i] = 50.0
    ans[105] = 100.0  # one good bin inside the dip is not recovery
    assert recovery_times(t, ans, [10.0], bin_s) == [2.0]
    # A bad bin just after (an OVS hiccup) counts by how much it lowers the mean of the next
    # 0.5 s: here enough to delay recovery until it is out of the window.
    ans[121] = 60.0
    assert recovery_times(t, ans, [10.0], bin_s) == [2.2]


def _point(thr, util):
    return {"throughput_rps": thr, "node_utilisation_sorted": util, "from_cache": 0.3,
            "cache_served_rps": 10.0}


def test_documents_carry_scale_and_gain_by_alpha_string():
    static = {"no_cache": {"uniform": _point(100, [1.0, 0.9]), "0.995": _point(40, [1.0, 0.2])},
              "cache_1000": {"uniform": _point(100, [1.0, 0.95]), "0.995": _point(200, [1.0, 0.93])},
              "cache_sizes": {}}
    s = Scale()
    d1, d2 = documents.fig4_1(static, s, True), documents.fig4_2(static, s, True)
    assert d2["gain"] == {"uniform": 1.0, "0.995": 5.0}
    assert d2["vs_thesis"]["0.995"]["met"] and d2["vs_thesis"]["0.995"]["ratio"] == 1.0
    assert d1["min_utilisation_cache_alpha_ge_0.99"] == 0.93
    for d in (d1, d2):
        assert d["scale"]["rate_factor"] == pytest.approx(250 / 72200, rel=1e-4)
    rows = documents.table({"fig4_1": d1, "fig4_2": d2})
    assert any(r[0].endswith("0.995") and r[3] == "yes" for r in rows)
