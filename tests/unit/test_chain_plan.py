"""The chain planners (exo_controller.chain_plan): known cases, the known-bad (removing a chain's
last node is refused), and property tests over random event sequences on small clusters: every
chain keeps a node, a new head is preceded by the cache nodes learning it (PushHeads) and then a
cache reset, the cache nodes' heads always end as the table's, rule moves follow the push that
makes their target act, and replaying a plan or its event changes nothing."""
import random

import pytest

from exo_controller import chain_plan as cp
from exo_controller.chain_plan import (MoveRules, PlanError, PushHeads, PushTable, ResetCacheNodes, SlotChain,
                                       Wait, WaitPendingZero)
from exo_common.partitions import chain_table

INC = {"d0": 10, "d1": 11, "d2": 12, "d3": 13}


def table3():
    # slot 0: d0 -> d1 -> d2, slot 1: d1 -> d2 -> d0, slot 2: d2 -> d0 -> d1
    return cp.initial_table([["d0", "d1", "d2"], ["d1", "d2", "d0"], ["d2", "d0", "d1"]],
                            {n: INC[n] for n in ("d0", "d1", "d2")})


def kinds(plan):
    return [type(s).__name__ for s in plan.steps]


def test_initial_table_reads_at_the_tail():
    t = table3()
    assert t.version == 1 and t.slots[0] == SlotChain(("d0", "d1", "d2"), (), "d2")
    t.check()


def test_head_down_resets_caches_then_pushes_then_moves_rules():
    plan = cp.node_down(table3(), "d0")
    assert kinds(plan) == ["PushHeads", "ResetCacheNodes", "PushTable", "MoveRules", "MoveRules"]
    assert plan.steps[0] == PushHeads(2, ("d1", "d1", "d2"))  # the cache nodes learn the new head first
    assert plan.steps[1] == ResetCacheNodes((0,))
    plan = cp.Plan(plan.table, plan.steps[1:], plan.why)  # the rest as before heads were pushed
    t = plan.table
    assert t.version == 2 and "d0" not in t.members
    assert t.slots[0] == SlotChain(("d1", "d2"), (), "d2")      # head -> next is head
    assert t.slots[1] == SlotChain(("d1", "d2"), (), "d2")      # tail -> predecessor reads
    assert t.slots[2] == SlotChain(("d2", "d1"), (), "d1")      # middle spliced: nothing moves
    assert plan.steps[1] == PushTable(t, ("d0",))
    assert plan.steps[2:] == (MoveRules(0, None, "d1"), MoveRules(1, "d2", None))


def test_tail_down_needs_no_reset():
    t = cp.initial_table([["d0", "d1"]], {"d0": 1, "d1": 2})
    plan = cp.node_down(t, "d1")
    assert kinds(plan) == ["PushTable", "MoveRules"] and plan.steps[1] == MoveRules(0, "d0", None)


def test_removing_the_last_node_of_a_chain_is_refused():
    """Known-bad: a plan that leaves a slot with no node must not be produced."""
    t = cp.initial_table([["d0", "d1"], ["d1"]], {"d0": 1, "d1": 2})
    with pytest.raises(PlanError, match=r"slot 1: 'd1' is the last node"):
        cp.node_down(t, "d1")
    with pytest.raises(PlanError, match="slot 1"):
        cp.remove(t, "d1")
    # and the table check itself rejects such a table
    bad = cp.ChainTable(2, (SlotChain(("d0",), (), "d0"), SlotChain((), (), "")), {"d0": 1})
    with pytest.raises(PlanError, match="slot 1: no node"):
        bad.check()


def test_checker_rejects_bad_tables():
    with pytest.raises(PlanError, match="slot 0: read server 'd3'"):
        cp.ChainTable(1, (SlotChain(("d0",), (), "d3"),), {"d0": 1, "d3": 2}).check()
    with pytest.raises(PlanError, match="twice"):
        cp.ChainTable(1, (SlotChain(("d0",), ("d0",), "d0"),), {"d0": 1}).check()
    with pytest.raises(PlanError, match="no incarnation"):
        cp.ChainTable(1, (SlotChain(("d0", "d1"), (), "d1"),), {"d0": 1}).check()


def test_join_then_catch_up_hands_over_in_two_pushes():
    t = cp.node_down(table3(), "d0").table
    plan = cp.node_joined(t, "d3", 99, rf=3)
    assert kinds(plan) == ["PushTable"]  # a learner changes no head and no rule
    t = plan.table
    assert all(s.learners == ("d3",) for s in t.slots) and t.members["d3"] == 99
    hand = cp.caught_up(t, "d3", [0, 2, 7])  # 7 is not a slot; skipped
    assert kinds(hand) == ["PushTable", "WaitPendingZero", "WaitPendingZero", "Wait", "PushTable",
                           "MoveRules", "MoveRules"]
    quiet = hand.steps[0].table
    assert quiet.slots[0].read_server == "" and quiet.slots[2].read_server == "" and quiet.slots[1].read_server == "d2"
    assert hand.steps[1:4] == (WaitPendingZero("d2"), WaitPendingZero("d1"), Wait(cp.HANDOVER_MIN_S))
    final = hand.table
    assert final.version == t.version + 2
    assert final.slots[0] == SlotChain(("d1", "d2", "d3"), (), "d3") and final.slots[1].learners == ("d3",)
    assert hand.steps[5:] == (MoveRules(0, "d3", None), MoveRules(2, "d3", None))
    assert cp.caught_up(final, "d3", [0, 2]).empty


def test_restarted_node_is_removed_then_joins_as_a_learner():
    t = cp.initial_table([["d0", "d1"], ["d1", "d0"]], {"d0": 1, "d1": 2})
    plan = cp.node_joined(t, "d0", 5, rf=2)
    assert kinds(plan) == ["PushHeads", "ResetCacheNodes", "PushTable", "MoveRules", "MoveRules", "PushTable"]
    assert plan.steps[0] == PushHeads(2, ("d1", "d1"))
    assert plan.table.slots[0] == SlotChain(("d1",), ("d0",), "d1") and plan.table.members["d0"] == 5
    assert plan.table.version == 3
    assert cp.node_joined(plan.table, "d0", 5, rf=2).empty


def test_refill_picks_the_least_loaded_candidate():
    t = cp.initial_table([["d0"], ["d0"], ["d0"], ["d0"]], {"d0": 1})
    plan = cp.refill(t, {"d1": 2, "d2": 3}, rf=2)
    assert [s.learners for s in plan.table.slots] == [("d1",), ("d2",), ("d1",), ("d2",)]


def test_messages_round_trip():
    from exoproto import control_pb2 as pb
    t = cp.node_joined(table3(), "d3", 7, rf=4).table
    assert cp.from_msg(cp.to_msg(t, pb)) == t


# ---------------------------------------------------------------------- properties


class World:
    """What the steps did: the table each node last accepted, the cache reset count, the rules."""

    def __init__(self, table):
        self.accepted = {n: table for n in table.recipients()}
        self.pushed = table
        self.resets = 0
        self.rules = {i: (s.read_server, s.head) for i, s in enumerate(table.slots)}
        self.reset_since_push: set[int] = set()
        # the heads the cache nodes route by (adoption sent the table's), and what they held when
        # last reset
        self.cache_heads = (table.version, tuple(s.head for s in table.slots))
        self.heads_at_reset = self.cache_heads[1]

    def run(self, steps, check=True):
        for step in steps:
            if isinstance(step, PushHeads):
                if step.version >= self.cache_heads[0]:  # a cache node refuses an older version
                    self.cache_heads = (step.version, step.heads)
            elif isinstance(step, ResetCacheNodes):
                self.resets += 1
                self.reset_since_push |= set(step.slots)
                self.heads_at_reset = self.cache_heads[1]
            elif isinstance(step, PushTable):
                new = step.table
                if check:
                    for i, (a, b) in enumerate(zip(self.pushed.slots, new.slots)):
                        if a.head != b.head:
                            assert i in self.reset_since_push, f"slot {i}: new head pushed without a cache reset"
                            assert self.heads_at_reset[i] == b.head, \
                                f"slot {i}: cache nodes reset (and pushed the table) before they learnt head {b.head!r}"
                    assert new.version >= self.pushed.version
                for n in new.recipients() + list(step.removed):
                    old = self.accepted.get(n)
                    if old is None or old.version <= new.version:
                        self.accepted[n] = new
                self.pushed = new
                self.reset_since_push = set()
            elif isinstance(step, MoveRules):
                s = self.pushed.slots[step.slot]
                if check:
                    assert step.head is None or step.head == s.head, "write rule moved before the push"
                    assert step.read_server is None or step.read_server == s.read_server, "read rule moved early"
                read, head = self.rules[step.slot]
                self.rules[step.slot] = (step.read_server or read, step.head or head)

    def snapshot(self):
        return ({n: t.version for n, t in self.accepted.items()}, self.pushed, dict(self.rules), self.cache_heads)


def _random_events(rng, table, nodes, rf, n):
    """Events a running cluster sees: failures, restarts, joins, catch-ups, removals, adds."""
    incs = dict(table.members)
    for _ in range(n):
        kind = rng.choice(["down", "join", "caught_up", "caught_up", "remove", "add", "restart"])
        node = rng.choice(nodes)
        if kind in ("down", "remove"):
            yield kind, node, None
        elif kind == "restart":
            incs[node] = rng.getrandbits(64)
            yield "join", node, incs[node]
        elif kind in ("join", "add"):
            incs.setdefault(node, rng.getrandbits(64))
            yield kind, node, incs[node]
        else:
            yield "caught_up", node, None


@pytest.mark.parametrize("seed", range(40))
def test_random_event_sequences_keep_the_invariants(seed):
    rng = random.Random(seed)
    n_nodes = rng.choice([3, 4, 5])
    rf = rng.choice([2, 3])
    nodes = [f"d{i}" for i in range(n_nodes)]
    table = cp.initial_table(chain_table(nodes[:max(rf, n_nodes - 1)], rng.choice([2, 3]), 8, rf=rf),
                             {n: i + 1 for i, n in enumerate(nodes)})
    world = World(table)
    planned = refused = 0
    for kind, node, inc in _random_events(rng, table, nodes, rf, 30):
        try:
            if kind == "down":
                plan = cp.node_down(table, node)
            elif kind == "remove":
                plan = cp.remove(table, node)
            elif kind in ("join", "add"):
                plan = (cp.node_joined if kind == "join" else cp.add)(table, node, inc, rf)
            else:
                slots = [i for i, s in enumerate(table.slots) if node in s.learners]
                plan = cp.caught_up(table, node, rng.sample(slots, k=len(slots) // 2 + (1 if slots else 0)))
        except PlanError as err:
            assert "slot" in str(err)
            refused += 1
            continue
        planned += 1
        plan.table.check()  # every chain keeps >= 1 node, readers are nodes, all named are members
        assert all(s.nodes for s in plan.table.slots)
        assert plan.table.version >= table.version and (plan.empty == (plan.table == table))
        world.run(plan.steps)
        after = world.snapshot()
        # replaying the plan from any step changes nothing
        start = rng.randrange(len(plan.steps) + 1)
        world.run(plan.steps[start:], check=False)
        assert world.snapshot() == after
        # and the rules follow the final table wherever it names a reader
        # the cache nodes route by the table's heads
        assert world.cache_heads[1] == tuple(s.head for s in plan.table.slots)
        for i, s in enumerate(plan.table.slots):
            read, head = world.rules[i]
            assert head == s.head
            if s.read_server:
                assert read == s.read_server
        # the same event again is an empty plan
        if kind in ("down", "remove"):
            assert cp.node_down(plan.table, node).empty
        elif kind in ("join", "add"):
            assert cp.node_joined(plan.table, node, inc, rf).empty
        table = plan.table
    assert planned > 0


def test_the_property_checker_rejects_misordered_plans():
    """Known-bad plans: the World checker must catch a push of a new head without a reset, the
    cache nodes' heads missing or sent after the reset or the push, and a rule move ahead of its
    push, or the properties above prove nothing."""
    plan = cp.node_down(table3(), "d0")
    heads, reset, push, *moves = plan.steps
    with pytest.raises(AssertionError, match="without a cache reset"):
        World(table3()).run([heads, push, *moves])
    with pytest.raises(AssertionError, match="before they learnt head 'd1'"):
        World(table3()).run([reset, push, *moves])  # SetHeads missing
    with pytest.raises(AssertionError, match="before they learnt head 'd1'"):
        World(table3()).run([reset, heads, push, *moves])  # SetHeads after the Reset
    with pytest.raises(AssertionError, match="before they learnt head 'd1'"):
        World(table3()).run([reset, push, heads, *moves])  # SetHeads after the push
    with pytest.raises(AssertionError, match="write rule moved before the push"):
        World(table3()).run([heads, reset, *moves, push])


def test_restore_readers_after_a_halted_hand_over():
    t = cp.node_joined(table3(), "d3", 7, rf=4).table
    quiet = cp.caught_up(t, "d3", [1]).steps[0].table
    assert quiet.slots[1].read_server == ""
    plan = cp.restore_readers(quiet)
    assert plan.table.slots[1].read_server == "d0" and kinds(plan) == ["PushTable", "MoveRules"]
    assert cp.restore_readers(plan.table).empty


def test_new_learners_are_told_last():
    t = cp.node_down(table3(), "d0").table
    push = cp.node_joined(t, "d3", 7, rf=3).steps[0]
    assert push.learners_last == ("d3",)
    assert cp.node_down(table3(), "d1").steps[2].learners_last == ()


def test_heads_step_and_which_cache_nodes_get_heads():
    t = cp.node_down(table3(), "d0").table
    assert cp.heads_step(t) == PushHeads(t.version, ("d1", "d1", "d2"))
    states = {"c1": "up", "c2": "down", "c3": "rejoining", "c4": "up"}
    # c1 has this version; c2 is down (nobody to tell); c3 came back; c4 has an older one
    assert cp.heads_due(states, {"c1": 2, "c4": 1}, 2) == ["c3", "c4"]
    assert cp.heads_due(states, {"c1": 2, "c3": 2, "c4": 2}, 2) == []
