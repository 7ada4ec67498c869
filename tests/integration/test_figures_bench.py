"""The Chapter 4 bench on Mininet: emulated wimpies in one exo-emulator, a rate-capped cache
node, exo-loadgen in the client host (experiments/exo_figures). A short version of what
`make figures` runs, asserting what the figures rely on:

  * every emulated db node answers, and none serves more than its limit (the rest is dropped
    and counted as rate_limited, which the generator sees as loss);
  * the cache node serves the prefilled hottest keys: the share answered from cache is the
    Zipf share of those keys;
  * the throughput search ends on a run that meets the 5% loss rule.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from exo_figures import bench_cluster, keys
from exo_testbed.ideal import top_share
from exo_figures.runner import Workload, measure
from exo_testbed.scale import Scale
from exo_figures.throughput import find_throughput
from exo_topo.cluster import EmulatedCluster

pytestmark = pytest.mark.mininet

RUN = Path("/tmp/exo/test/figures_bench")
SCALE = Scale(db_nodes=8, node_rps=200.0, cache_to_db=1.0, keys=1_000_000)
CACHED = 100


@pytest.fixture(scope="module")
def bench():
    shutil.rmtree(RUN, ignore_errors=True)
    cfg = bench_cluster.figure_config(RUN, SCALE, cache_entries=CACHED, dynamic=False, openflow_port=6669)
    with EmulatedCluster(cfg, RUN, start_timeout=120) as cl:
        yield cl


def test_every_node_capped_at_its_limit(bench):
    dur = 3.0
    m = measure(bench, SCALE, 2.0 * SCALE.db_capacity, dur, Workload(alpha=0, keys=SCALE.keys),
                RUN / "overload.json", label="overload")
    served = m.detail["served_rps"]
    for d in bench.cfg.db_nodes:
        assert served[d.name] > 0.5 * SCALE.node_rps, d.name  # it answers
        # the bucket holds at most 1 ms of traffic plus one burst beyond the limit
        assert served[d.name] <= SCALE.node_rps * 1.05 + 40 / dur, d.name
        assert m.detail["rate_limited"][d.name] > 0, d.name
    assert 0.35 < m.loss < 0.65  # twice the capacity offered: about half is dropped


def test_cache_serves_the_hottest_keys(bench):
    held = bench_cluster.prefill(bench, keys.hottest(bench, CACHED, n_keys=SCALE.keys))
    assert held == CACHED
    m = measure(bench, SCALE, 0.5 * SCALE.db_capacity, 3.0, Workload(alpha=0.99, keys=SCALE.keys),
                RUN / "cached.json", label="cached")
    want = top_share(CACHED, SCALE.keys, 0.99)
    assert abs(m.detail["from_cache"] - want) < 0.05, (m.detail["from_cache"], want)
    assert m.detail["served_rps"]["cache0"] > 0
    assert m.loss < 0.05


def test_throughput_search_meets_the_loss_rule(bench):
    n = [0]

    def run(rate):
        n[0] += 1
        return measure(bench, SCALE, rate, 2.0, Workload(alpha=0.99, keys=SCALE.keys),
                       RUN / f"search{n[0]}.json", label="search")

    s = find_throughput(run, probe_rate=0.5 * SCALE.db_capacity, max_loss=0.05, runs=4)
    assert s.met_loss_rule, [(r.offered_rps, r.loss) for r in s.runs]
    assert s.throughput_rps > 0.7 * SCALE.db_capacity  # the cache takes the hot keys' load
