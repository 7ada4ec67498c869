"""exo_topo.takeover's flush check (used by test_controller_failover.py and the chaos fault
kill_master_controller): a flow that is gone, or whose duration went down, was flushed."""
from exo_topo.takeover import flushed


def test_kept_flows_only_grow_older():
    before = {"t1 p10 ,dl_dst=aa 0xe1": 5.0, "t1 p10 ,dl_dst=ba 0xe3": 5.0}
    assert flushed(before, {k: v + 0.5 for k, v in before.items()}) == ([], [])
    # A new flow after the takeover is no flush.
    assert flushed(before, {**{k: v + 0.5 for k, v in before.items()}, "t1 p5 , 0xe2": 0.1}) == ([], [])


def test_a_deleted_or_reinstalled_flow_is_flushed():
    before = {"a": 5.0, "b": 5.0, "c": 5.0}
    gone, reset = flushed(before, {"a": 5.5, "c": 0.2})  # b deleted, c deleted and added again
    assert gone == ["b"] and reset == ["c"]
