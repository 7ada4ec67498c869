"""The chain layout (exo_common.partitions.chain_table) and its checker (check_chains):
the properties of docs/design/replication.md, 2.1, and the known-bad tables the checker must
refuse."""
from collections import Counter

import pytest

from exo_common.partitions import chain_table, check_chains, partition_table

NAMES = [f"db{i}" for i in range(7)]


@pytest.mark.parametrize("rf", [1, 2, 3, 5, 7, 9])
@pytest.mark.parametrize("max_load", [0.0, 1.0, 1.25])
def test_chains_have_min_rf_n_distinct_members_headed_by_the_owner(rf, max_load):
    heads = partition_table(NAMES, 8, 16, max_load)
    table = chain_table(NAMES, 8, 16, max_load, rf)
    assert len(table) == 256
    for slot, chain in enumerate(table):
        assert len(chain) == min(rf, len(NAMES)), (slot, chain)
        assert len(set(chain)) == len(chain), (slot, chain)
        assert set(chain) <= set(NAMES)
        assert chain[0] == heads[slot]
    check_chains(table, heads, rf, NAMES)


@pytest.mark.parametrize("max_load", [0.0, 1.0])
def test_rf_one_is_todays_table(max_load):
    for bits in (1, 8, 12):
        heads = partition_table(NAMES, bits, 64, max_load)
        assert chain_table(NAMES, bits, 64, max_load) == [[h] for h in heads]
        assert chain_table(NAMES, bits, 64, max_load, rf=1) == [[h] for h in heads]


def test_deterministic():
    assert chain_table(NAMES, 8, 64, 1.0, 3) == chain_table(list(NAMES), 8, 64, 1.0, 3)
    # Independent of the order the names are listed in (the ring is sorted by point).
    assert chain_table(NAMES, 8, 64, 0.0, 3) == chain_table(NAMES[::-1], 8, 64, 0.0, 3)


def test_middles_and_tail_follow_the_ring():
    """Without the cap, a chain is the first rf distinct nodes clockwise from the slot's start."""
    from exo_common.partitions import HASH_BITS, ring_points
    points = ring_points(NAMES, 8)
    table = chain_table(NAMES, 6, 8, 0.0, 3)
    for slot, chain in enumerate(table):
        start = slot << (HASH_BITS - 6)
        walk = [n for p, n in points if p >= start] + [n for p, n in points if p < start]
        expected = list(dict.fromkeys(walk))[:3]
        assert chain == expected, slot


@pytest.mark.parametrize("rf", [2, 3])
def test_removing_a_node_changes_only_its_chains(rf):
    """max_load 0: consistent hashing moves nothing that did not involve the removed node."""
    before = chain_table(NAMES, 8, 64, 0.0, rf)
    for gone in NAMES:
        after = chain_table([n for n in NAMES if n != gone], 8, 64, 0.0, rf)
        changed = [s for s in range(256) if before[s] != after[s]]
        assert changed and all(gone in before[s] for s in changed), gone
        assert all(gone not in chain for chain in after)


@pytest.mark.parametrize("n, bits, heads_max, tails_max, tails_min, fm_mean, fm_max", [
    (4, 8, 64, 73, 53, 128, 137),
    (4, 4, 4, 4, 4, 8, 8),
    (32, 8, 8, 8, 8, 16, 16),
    (1024, 12, 4, 4, 4, 8, 8),
])
def test_the_design_notes_figures_with_the_tail_cap(n, bits, heads_max, tails_max, tails_min, fm_mean, fm_max):
    """The table of 2.1 and the flow-mod counts of 2.3 (rf 3, vnodes 64, max_load 1): tail
    balance is read balance, and heads + tails of a node is the flow-mods its failure costs."""
    names = [f"db{i}" for i in range(n)]
    table = chain_table(names, bits, 64, 1.0, 3)
    heads, tails = Counter(c[0] for c in table), Counter(c[-1] for c in table)
    assert max(heads.values()) == heads_max
    assert (max(tails.values()), min(tails[x] for x in names)) == (tails_max, tails_min)
    per_node = [heads[x] + tails[x] for x in names]
    assert (round(sum(per_node) / n), max(per_node)) == (fm_mean, fm_max)


def test_rf_above_the_node_count_gives_every_node():
    table = chain_table(["a", "b"], 4, 8, 0.0, 3)
    assert all(sorted(c) == ["a", "b"] for c in table)
    assert chain_table(["a"], 4, 8, 1.0, 3) == [["a"]] * 16


def test_bad_arguments():
    with pytest.raises(ValueError, match="rf must be >= 1"):
        chain_table(NAMES, 4, 8, 0.0, 0)
    with pytest.raises(ValueError, match="at least one db node"):
        chain_table([], 4, 8, 0.0, 2)


# ---- check_chains: the known-bad tables ----

GOOD = [["db0", "db1"], ["db1", "db2"], ["db2", "db0"], ["db0", "db2"]]
HEADS = ["db0", "db1", "db2", "db0"]
MEMBERS = ["db0", "db1", "db2"]


def test_check_chains_accepts_a_good_table():
    check_chains(GOOD, HEADS, 2, MEMBERS)
    check_chains(GOOD, HEADS, 3)  # shorter than the factor is fine (a chain that lost a member)
    check_chains([[h] for h in HEADS], HEADS, 1, MEMBERS)


@pytest.mark.parametrize("table, factor, message", [
    ([["db0", "db1"], ["db1", "db1"], ["db2", "db0"], ["db0", "db2"]], 2, r"chains\[1\]: repeats db node 'db1'"),
    ([["db0", "db1"], ["db1", "db2"], [], ["db0", "db2"]], 2, r"chains\[2\]: empty"),
    ([["db0", "db1"], ["db2", "db1"], ["db2", "db0"], ["db0", "db2"]], 2,
     r"chains\[1\]\[0\]: head 'db2', but partitions\[1\] is 'db1'"),
    ([["db0", "db1"], ["db1", "db2"], ["db2", "db0"], ["db0", "db2", "db1"]], 2,
     r"chains\[3\]: 3 nodes, more than replication.factor 2"),
    (GOOD, 1, r"chains\[0\]: 2 nodes, more than replication.factor 1"),
    (GOOD[:3], 2, r"chains: 3 entries, partitions has 4"),
    ([["db0", "db1"], ["db1", "db9"], ["db2", "db0"], ["db0", "db2"]], 2, r"chains\[1\]\[1\]: 'db9' is not a member"),
])
def test_check_chains_refuses_known_bad_tables(table, factor, message):
    with pytest.raises(ValueError, match=message):
        check_chains(table, HEADS, factor, MEMBERS)


def test_check_chains_refuses_a_spare():
    with pytest.raises(ValueError, match=r"chains\[0\]\[1\]: 'db1' is not a member db node"):
        check_chains(GOOD, HEADS, 2, ["db0", "db2"])
