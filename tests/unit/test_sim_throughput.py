"""exo_sim: the throughput rule, the baselines and the static model (docs/simulator.md)."""
import numpy as np
import pytest

from exo_sim.baselines import SYSTEMS, systems
from exo_sim.common import Scale
from exo_sim.model import StaticModel
from exo_sim.throughput import Cluster, Loads, at_rate, ideal, max_rate


def cluster(caps, cache=0.0):
    return Cluster(np.asarray(caps, dtype=float), cache)


def test_no_cache_two_nodes_by_hand():
    # Shares 3/4 and 1/4, 100 req/s each. 0% rule: the hot node fills at 100 / 0.75.
    c, loads = cluster([100, 100]), Loads(db=np.array([0.75, 0.25]))
    assert max_rate(loads, c, 0.0).answered == pytest.approx(400 / 3)
    # 5% rule: loss = 0.75 lam - 100 <= 0.05 lam  ->  lam = 100 / 0.7, answered = 0.95 lam.
    p = max_rate(loads, c, 0.05)
    assert p.offered == pytest.approx(1000 / 7)
    assert p.answered == pytest.approx(0.95 * 1000 / 7)
    assert p.loss == pytest.approx(0.05)
    assert list(p.db_answered) == pytest.approx([100, 250 / 7])


def test_exoskeleton_cache_by_hand():
    # Half the traffic is cached; the cache (50 req/s) is the bottleneck.
    c = cluster([100, 100], cache=50)
    exo = Loads(db=np.array([0.3, 0.2]), hit=0.5, cache_work=0.5)
    assert max_rate(exo, c, 0.0).answered == pytest.approx(100)
    assert max_rate(exo, c, 0.05).answered == pytest.approx(0.95 * 50 / 0.45)   # 0.5 lam - 50 <= 0.05 lam
    # Look-aside: every request costs the cache one lookup, so lam <= 50 at 0% loss.
    la = Loads(db=np.array([0.3, 0.2]), hit=0.5, cache_work=1.0, gate=True)
    assert max_rate(la, c, 0.0).answered == pytest.approx(50)
    # At lam = 100 the cache does half its work: it answers 25 hits, the db nodes 15 + 10 misses.
    p = at_rate(la, c, 100)
    assert p.cache_answered == pytest.approx(25) and p.answered == pytest.approx(50)


def test_ideal_is_the_zero_loss_rule_of_balanced_nodes():
    c = cluster([100] * 4, cache=300)
    for hit in (0.0, 0.3, 0.6, 0.8):
        balanced = Loads(db=np.full(4, (1 - hit) / 4), hit=hit, cache_work=hit)
        assert max_rate(balanced, c, 0.0).answered == pytest.approx(ideal(c, hit), rel=1e-8)


def test_look_aside_and_front_end_never_beat_exoskeleton_random_configs():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 9))
        base = rng.dirichlet(np.ones(n) * 0.5)
        cached = base * rng.uniform(0, 1, n) * (rng.uniform() < 0.8)
        c = cluster(rng.uniform(10, 100, n), cache=rng.uniform(0, 400))
        s = systems(base, cached, float(cached.sum()), rng.uniform(0.5, 2), rng.uniform(1, 3))
        for rule in (0.0, 0.05):
            exo = max_rate(s["exoskeleton"], c, rule).answered
            for other in ("look_aside", "read_through"):
                assert max_rate(s[other], c, rule).answered <= exo * (1 + 1e-9)


@pytest.fixture(scope="module")
def small_scale():
    return Scale(nodes=8, node_rps=10_000, n_keys=10**6)


def test_uniform_traffic_gives_gain_one(small_scale):
    m = StaticModel(small_scale, 0.0, top=20_000)
    ev = m.evaluate(100, use_selector=False)
    for rule in ("loss5", "loss0"):
        gain = ev["exoskeleton"][rule].answered / ev["no_cache"][rule].answered
        assert gain == pytest.approx(1.0, abs=0.02)


def test_skew_gain_and_look_aside_at_equal_capacity(small_scale):
    m = StaticModel(small_scale, 0.99, top=20_000)
    for k in (0, 10, 100, 1000, 10_000):
        ev = m.evaluate(k, use_selector=False)
        for rule in ("loss5", "loss0"):
            exo = ev["exoskeleton"][rule].answered
            assert ev["look_aside"][rule].answered <= exo * (1 + 1e-9)
            assert ev["read_through"][rule].answered <= exo * (1 + 1e-9)
            assert exo <= ev["ideal"][rule].answered * (1 + 1e-9) or rule == "loss5"
    ev = m.evaluate(100, use_selector=False)
    assert ev["exoskeleton"]["loss0"].answered > 2 * ev["no_cache"]["loss0"].answered
    assert set(SYSTEMS) <= set(ev)
