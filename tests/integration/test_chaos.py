"""The short chaos campaign (`make chaos` runs the long one): one round of every fault kind on a
real Mininet cluster; every key's history must be linearizable (every key decided) and no
acknowledged write lost, with at least 20% of the operations concurrent with another client's
write to their key. Writes results/chaos-quick.json. (test_chaos_mutants.py: the same checker
catches the mutant builds.)"""
from pathlib import Path

import pytest

from exo_chaos.campaign import N_KEYS, print_table, run_campaign

pytestmark = pytest.mark.mininet

OUT = Path(__file__).resolve().parents[2] / "results" / "chaos-quick.json"
FIELDS = ("ops", "histories_checked", "linearizability_violations", "lost_acked_writes",
          "unknown_outcomes", "recovery_s", "client_errors_after_retry", "overlap_share",
          "recovery_from_inject_s", "dip_depth", "dip_length_s")
KINDS = {"link_loss", "dup_reorder", "kill_cache", "kill_db", "kill_ctl"}


def test_short_chaos_campaign_is_linearizable_and_loses_nothing():
    r = run_campaign(OUT, repeats=1, quick=True, openflow_port=6668,
                     run_dir=Path("/tmp/exo/test/chaos"))
    print_table(r)
    assert all(f in r for f in FIELDS)
    assert r["histories_checked"] == N_KEYS and r["ops"] > 5000
    assert r["linearizability_violations"] == 0, r["checker"]
    assert r["lost_acked_writes"] == 0, r["lost_acked_writes_detail"]
    assert r["checker"]["budget_exceeded"] == 0
    assert r["exit_status"] == 0
    assert r["overlap_share"] >= 0.2
    assert r["keys_seen_cached_in_warmup"] == N_KEYS
    for field in ("recovery_s", "recovery_from_inject_s", "dip_depth", "dip_length_s"):
        assert set(r[field]) == KINDS, field
    # The cache node's keys were served by db nodes after its rules were withdrawn.
    kill = next(e for e in r["events"] if e["kind"] == "kill_cache")
    assert kill["withdrawn_s"] is not None and kill["withdrawn_s"] < 2.0


def test_replicated_round_is_linearizable_and_chains_converge():
    """Replication factor 3 (three db nodes, every slot on all of them): the chain write path
    and the switch's two rules per slot (writes to the head, GETs to the tail) under link faults,
    a cache node kill, and the membership faults: a db node killed with its disk and replaced
    on an empty one (failover, then rejoin through learner, copy and hand-over), another removed
    and added back (docs/chaos.md). Writes results/chaos-rf3-quick.json."""
    from exo_chaos.campaign import membership_faults
    from exo_chaos.faults import Fault
    faults = [Fault("link_loss", "client links", hold_s=3.0, settle_s=3.0),
              Fault("dup_reorder", "client links", hold_s=3.0, settle_s=3.0),
              Fault("kill_cache", "cache0", hold_s=3.0, settle_s=4.0),
              *membership_faults("db0", "db1", settle=3.0)]
    r = run_campaign(OUT.with_name("chaos-rf3-quick.json"), repeats=0, quick=True,
                     openflow_port=6677, run_dir=Path("/tmp/exo/test/chaos-rf3"), faults=faults,
                     replication=3)
    print_table(r)
    assert r["replication_factor"] == 3
    assert r["histories_checked"] == N_KEYS and r["ops"] > 3000
    assert r["linearizability_violations"] == 0, r["checker"]
    assert r["lost_acked_writes"] == 0, r["lost_acked_writes_detail"]
    assert r["checker"]["budget_exceeded"] == 0
    assert r["chain_convergence"]["converged"], r["chain_convergence"]
    assert r["chain_convergence"]["slots_checked"] == 16
    # Every membership fault completed, and is measured by the same throughput rule as the others.
    assert {"kill_db_disk", "remove_node", "add_node"} <= set(r["recovery_s"]), r["recovery_s"]
    facts = {e["kind"]: e for e in r["events"]}
    for kind, names in (("kill_db_disk", ("failover_s", "rejoin_s")), ("remove_node", ("removed_s",)),
                        ("add_node", ("caught_up_s",))):
        for name in names:
            assert facts[kind][name] is not None, (kind, name, facts[kind])
    # The replacement on the empty disk is back in every slot (three nodes: every chain has all).
    assert facts["kill_db_disk"]["slots_after"] == 16 and facts["add_node"]["slots_after"] == 16
    # The switch's own view of slot 0: the read rule to the tail, the write rule to the head.
    rules = r["ruleset3_slot0"]
    read = [f for f in rules["dump_flows"] if "dl_dst=aa:" in f]
    write = [f for f in rules["dump_flows"] if "dl_dst=ba:" in f]
    assert len(read) == 1 and f"output:{rules['tail_port']}" in read[0], rules
    assert len(write) == 1 and f"output:{rules['head_port']}" in write[0], rules
    assert r["exit_status"] == 0
