"""The campaign's membership faults (exo_chaos.membership, docs/chaos.md): in the schedule only
at replication > 1, refused at replication 1, and a run whose membership change never completed
fails (known-bad events)."""
import pytest

from exo_chaos import campaign
from exo_chaos.faults import Fault


def test_replicated_rounds_gain_the_membership_faults_in_order():
    kinds = [f.kind for f in campaign.schedule(1, quick=True, controllers=2, replication=3)]
    assert kinds == ["link_loss", "dup_reorder", "kill_cache", "kill_db", "kill_db_disk", "remove_node",
                     "add_node", "kill_ctl", "kill_master_controller"]
    rounds = campaign.schedule(3, quick=True, replication=3)
    for r in range(3):  # kill_db, kill_db_disk and remove/add each take another node
        one = [f for f in rounds if f.kind in ("kill_db", "kill_db_disk", "remove_node")][3 * r:3 * r + 3]
        assert len({f.target for f in one}) == 3
    removes = [f.target for f in rounds if f.kind == "remove_node"]
    assert removes == [f.target for f in rounds if f.kind == "add_node"]  # the removed one comes back
    assert not {"kill_db_disk", "remove_node", "add_node"} & {f.kind for f in campaign.schedule(1, quick=True)}


def test_membership_faults_need_replication(tmp_path):
    with pytest.raises(ValueError, match="need --replication"):
        campaign.run_campaign(tmp_path / "x.json", faults=[Fault("remove_node", "db0")], replication=1,
                              run_dir=tmp_path / "run")


def _result(**ev):
    return {"checker": {"budget_exceeded": 0}, "linearizability_violations": 0, "lost_acked_writes": 0,
            "chain_convergence": {"converged": True}, "events": [ev]}


def test_a_membership_change_that_never_completed_fails_the_run():
    ok = dict(kind="kill_db_disk", target="db0", failover_s=0.6, rejoin_s=1.5)
    assert campaign.exit_status(_result(**ok)) == 0
    assert campaign.exit_status(_result(**{**ok, "rejoin_s": None})) == 1
    assert campaign.membership_failures(_result(**{**ok, "failover_s": None})) == ["kill_db_disk db0: no failover_s"]
    assert campaign.exit_status(_result(kind="remove_node", target="db1", removed_s=None)) == 1
    assert campaign.exit_status(_result(kind="add_node", target="db1", caught_up_s=None)) == 1
    assert campaign.exit_status(_result(kind="add_node", target="db1", caught_up_s=1.2)) == 0
    diverged = {**_result(**ok), "chain_convergence": {"converged": False}}
    assert campaign.exit_status(diverged) == 1
