"""The chain convergence check of the chaos campaign (experiments/exo_chaos/convergence.py)."""
from exo_chaos.convergence import chain_digests, diverged_slots

CHAINS = [["db0", "db1", "db2"], ["db1", "db2", "db0"]]


def test_equal_digests_converge():
    d = {"db0": {0: (3, 7), 1: (1, 9)}, "db1": {0: (3, 7), 1: (1, 9)}, "db2": {0: (3, 7), 1: (1, 9)}}
    assert diverged_slots(CHAINS, d) == []
    r = chain_digests(CHAINS, lambda m: d[m])
    assert r["converged"] and r["slots_checked"] == 2


def test_a_write_missing_on_one_member_is_caught():  # known-bad: the tail lacks a write of slot 1
    d = {"db0": {0: (3, 7), 1: (2, 5)}, "db1": {0: (3, 7), 1: (2, 5)}, "db2": {0: (3, 7), 1: (1, 9)}}
    bad = diverged_slots(CHAINS, d)
    assert [b["slot"] for b in bad] == [1]
    assert bad[0]["members"]["db2"] == {"keys": 1, "digest": f"{9:016x}"}
    assert not chain_digests(CHAINS, lambda m: d[m])["converged"]


def test_a_member_with_no_key_of_the_slot_counts_as_empty():
    d = {"db0": {0: (1, 4)}, "db1": {}, "db2": {0: (1, 4)}}
    assert [b["slot"] for b in diverged_slots(CHAINS, d)] == [0]
