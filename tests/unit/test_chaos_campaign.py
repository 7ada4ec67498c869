"""The chaos campaign's pure parts: its keys, its mutants, its exit status, the workers' ticks."""
from pathlib import Path

import pytest

from exo_chaos import campaign, worker
from exo_common.partitions import slot_of
from exoskeleton import wire
from exoskeleton.keyhash import key_hash


def cfg():
    return campaign.build_config(Path("/tmp/exo/unit-chaos"), 6667)


def test_keys_are_split_evenly_over_the_db_nodes():
    c = cfg()
    ids = campaign.key_ids(c)
    assert len(ids) == campaign.N_KEYS == len(set(ids))
    owners = [c.partitions()[slot_of(key_hash(worker.chaos_key(i)), c.switch.partition_bits)]
              for i in ids]
    assert sorted(owners) == sorted([d.name for d in c.db_nodes] * (campaign.N_KEYS // 2))


def test_mutants_run_on_every_node_of_their_kind_and_unknown_ones_are_refused():
    c = cfg()
    assert campaign.node_faults(c, None) == {}
    assert campaign.node_faults(c, "skip-prepare") == {"db0": "skip-prepare", "db1": "skip-prepare"}
    assert campaign.node_faults(c, "serve-stale") == {"cache0": "serve-stale", "cache1": "serve-stale"}
    with pytest.raises(ValueError, match="unknown mutant"):
        campaign.node_faults(c, "skip-commit")
    with pytest.raises(SystemExit):
        campaign.main(["--mutant", "skip-commit"])


def result(violations=0, lost=0, undecided=0, mutant=None):
    return {"linearizability_violations": violations, "lost_acked_writes": lost,
            "checker": {"budget_exceeded": undecided}, "mutant": mutant}


def test_exit_status_fails_on_undecided_keys_and_on_an_escaped_mutant():
    assert campaign.exit_status(result()) == 0
    assert campaign.exit_status(result(violations=1)) == 1
    assert campaign.exit_status(result(lost=1)) == 1
    assert campaign.exit_status(result(undecided=1)) == 3
    assert campaign.exit_status(result(violations=3, mutant="serve-stale")) == 0
    assert campaign.exit_status(result(mutant="serve-stale")) == 1
    assert campaign.exit_status(result(violations=3, undecided=1, mutant="serve-stale")) == 3


def test_two_controllers_are_a_failover_group_and_add_kill_master_controller():
    c = campaign.build_config(Path("/tmp/exo/unit-chaos"), 6678, controllers=2)
    assert [(i.name, i.openflow_port) for i in c.controller.instances] == [("c1", 6678), ("c2", 6778)]
    assert len({i.grpc for i in c.controller.instances}) == 2 and c.controller.etcd
    assert not cfg().controller.instances  # the default stays one controller
    with pytest.raises(ValueError, match="controllers"):
        campaign.build_config(Path("/tmp/exo/unit-chaos"), 6678, controllers=0)
    kinds = [f.kind for f in campaign.schedule(2, quick=True, controllers=2)]
    assert kinds.count("kill_master_controller") == 2 and kinds.count("kill_ctl") == 2
    assert "kill_master_controller" not in [f.kind for f in campaign.schedule(2, quick=True)]


def test_exit_status_fails_on_a_slow_or_missing_takeover_and_on_a_flushed_flow():
    def with_takeover(**ev):
        return {**result(), "events": [{"kind": "kill_master_controller", "flows_flushed": 0,
                                        "switch_tables_flushed": 0, **ev}]}
    assert campaign.exit_status(with_takeover(takeover_s=0.3)) == 0
    assert campaign.exit_status(with_takeover(takeover_s=campaign.TAKEOVER_LIMIT_S)) == 1
    assert campaign.exit_status(with_takeover(takeover_s=None)) == 1
    assert campaign.exit_status(with_takeover(takeover_s=0.3, flows_flushed=2)) == 1
    assert campaign.exit_status(with_takeover(takeover_s=0.3, switch_tables_flushed=1)) == 1


def test_workers_share_one_tick_grid():
    ms = 1_000_000
    assert worker.next_tick(10_005 * ms, 20 * ms) == 10_020 * ms
    assert worker.next_tick(10_020 * ms, 20 * ms) == 10_040 * ms  # strictly after
    assert worker.next_tick(7_333 * ms, 500 * ms) == 7_500 * ms


def test_mix_draws_the_shares_and_unique_values():
    m = worker.Mix("client0", [b"a", b"b"], get_share=0.5, delete_share=0.1, seed=3)
    reqs = [m.next() for _ in range(4000)]
    ops = [r.op for r in reqs]
    assert 0.45 < ops.count(wire.OP_GET) / 4000 < 0.55
    assert 0.07 < ops.count(wire.OP_DELETE) / 4000 < 0.13
    puts = [r.value for r in reqs if r.op == wire.OP_PUT]
    assert len(puts) == len(set(puts)) and all(v.startswith(b"client0:") for v in puts)
