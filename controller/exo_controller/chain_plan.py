"""The live chain table and the planners that change it (docs/design/replication.md, 4.2-4.5). Pure.

A planner takes the table and one event and returns a Plan: the next table and the ordered
steps that carry it out. The executor (chain_exec.py) does the I/O; nothing here talks to a node
or the switch, so every ordering rule below is unit-tested (tests/unit/test_chain_plan.py).

Table semantics (what exo-db-node acts on once SetChains accepted it), per slot:
* `nodes[0]` is the head: it takes the slot's writes and coordinates the two-phase commit;
  each node passes writes to the next;
* `learners` come after the last node: they get every write (synchronously) while they copy
  the slot from the read server, and serve no GET;
* `read_server` answers the slot's GETs; "" = nobody (a hand-over in progress: GETs BUSY).

The ordering rules every plan follows:
1. `ResetCacheNodes` comes before the push of any table that names a new head for some slot:
   a cache node may hold entries the old head marked and pending writes with its txids; once the
   new head takes an uncached write of such a key, the cache node would serve the old value.
   `PushHeads` (CacheNode.SetHeads) comes right before it: after the Reset a cache node fetches
   again, and it must ask the new head (not the old one, which still acts as head until the push
   and would mark the key for a node whose entry the new head never learns of), and accept the
   new head's Prepare/Commit once the push made it head.
2. `MoveRules` comes after the push that makes the rule's target act on its new role (a write
   reaching a head that does not know it is one only costs a resend, but it is wasted).
3. A slot is never left with no node: such a plan is refused (PlanError names the slot).
4. Replaying a plan, or planning an event that already happened, changes nothing: removing a
   node the table does not name, or joining a node every short slot already has, is an empty plan.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Optional, Union


class PlanError(ValueError):
    """The event cannot be carried out (the message names the slot or node)."""


@dataclass(frozen=True)
class SlotChain:
    nodes: tuple[str, ...]
    learners: tuple[str, ...] = ()
    read_server: str = ""

    @property
    def head(self) -> str:
        return self.nodes[0] if self.nodes else ""

    def names(self) -> tuple[str, ...]:
        return self.nodes + self.learners


@dataclass(frozen=True)
class ChainTable:
    version: int
    slots: tuple[SlotChain, ...]
    members: Mapping[str, int] = field(default_factory=dict)  # node -> incarnation (live members)

    def nodes_named(self) -> set[str]:
        return {n for s in self.slots for n in s.names()}

    def recipients(self) -> list[str]:
        """Who gets this table pushed: every member (a member with no slot must still learn it
        has no role) and every node a slot names, sorted."""
        return sorted(set(self.members) | self.nodes_named())

    def check(self) -> None:
        """Raise PlanError when the table breaks an invariant (names the slot)."""
        for i, s in enumerate(self.slots):
            if not s.nodes:
                raise PlanError(f"slot {i}: no node left in its chain")
            names = s.names()
            if len(set(names)) != len(names):
                raise PlanError(f"slot {i}: a node appears twice in {list(names)}")
            if s.read_server and s.read_server not in s.nodes:
                raise PlanError(f"slot {i}: read server {s.read_server!r} is not one of its nodes {list(s.nodes)}")
            for n in names:
                if n not in self.members:
                    raise PlanError(f"slot {i}: {n!r} has no incarnation in the table's members")


# ---------------------------------------------------------------------- steps


@dataclass(frozen=True)
class PushHeads:
    """CacheNode.SetHeads(version, heads) on every cache node not DOWN: each slot's head, from
    the table of `version` (the cache nodes route Fetch/Evict and check Prepare by it)."""
    version: int
    heads: tuple[str, ...]  # slot order


@dataclass(frozen=True)
class ResetCacheNodes:
    """CacheNode.Reset on every cache node (drops everything: blunt, but one RPC each)."""
    slots: tuple[int, ...]  # the slots whose head changes (for the log)


@dataclass(frozen=True)
class PushTable:
    """DbNode.SetChains(table) to every live recipient, and to `removed` so they stop acting.
    `learners_last`: nodes that become a learner of some slot in this table; they get it after
    every other recipient (and LEARNER_SETTLE_S later), so the read server they copy from has
    switched to the table, and finished the writes it began under the old one, before they ask
    for its snapshot (a write applied after the snapshot under the old table would reach neither
    the copy nor the learner's stream)."""
    table: ChainTable
    removed: tuple[str, ...] = ()
    learners_last: tuple[str, ...] = ()


@dataclass(frozen=True)
class MoveRules:
    """Ruleset 3: the slot's read rule to `read_server`'s port, its write rule to `head`'s
    (None: leave that rule where it is)."""
    slot: int
    read_server: Optional[str]
    head: Optional[str]


@dataclass(frozen=True)
class WaitPendingZero:
    """Until `node`'s ChainStatus.pending is 0 (every write it applied is acknowledged downstream)."""
    node: str


@dataclass(frozen=True)
class Wait:
    seconds: float


Step = Union[PushHeads, ResetCacheNodes, PushTable, MoveRules, WaitPendingZero, Wait]


@dataclass(frozen=True)
class Plan:
    table: ChainTable           # the table once every step ran
    steps: tuple[Step, ...] = ()
    why: str = ""

    @property
    def empty(self) -> bool:
        return not self.steps


HANDOVER_MIN_S = 1.0  # the least a slot stays without a read server in a hand-over
HANDOVER_MOVE_S = 0.5  # the switch's rule budget one hand-over's read-rule moves may take


def handover_group(rule_update_rate: float) -> int:
    """How many caught-up slots one hand-over takes. A slot's GETs are BUSY from its quiet push
    until its read rule has moved to the new reader, and moves go at the switch's R: 256 slots
    at R = 50 take 5 s, longer than clients retry a BUSY (2 s, client-lib dispatch.BUSY_BUDGET_S).
    In groups whose moves take about HANDOVER_MOVE_S, each slot is BUSY for about
    HANDOVER_MIN_S + HANDOVER_MOVE_S, and the groups follow one another."""
    return max(1, int(rule_update_rate * HANDOVER_MOVE_S))
LEARNER_SETTLE_S = 0.2  # between a table's push to the other nodes and to its new learners


# ---------------------------------------------------------------------- building tables


def initial_table(chains: list[list[str]], incarnations: Mapping[str, int]) -> ChainTable:
    """Version 1 from the config's chains (cfg.chains()): all nodes are members, the tail reads."""
    slots = tuple(SlotChain(tuple(c), (), c[-1]) for c in chains)
    return ChainTable(1, slots, dict(incarnations))


def _transition(old: ChainTable, new_slots: list[SlotChain], members: Mapping[str, int],
                removed: tuple[str, ...], why: str) -> Plan:
    """The steps from `old` to a table with `new_slots`/`members` (version + 1), in the order of
    the module's rules: reset (if a head changes), push, rule moves. No change: empty plan."""
    if tuple(new_slots) == old.slots and dict(members) == dict(old.members):
        return Plan(old, (), why)
    table = ChainTable(old.version + 1, tuple(new_slots), dict(members))
    table.check()
    steps: list[Step] = []
    heads_changed = tuple(i for i, (a, b) in enumerate(zip(old.slots, table.slots)) if a.head != b.head)
    if heads_changed:
        steps.append(heads_step(table))
        steps.append(ResetCacheNodes(heads_changed))
    new_learners = sorted({n for a, b in zip(old.slots, table.slots) for n in b.learners if n not in a.learners})
    steps.append(PushTable(table, removed, tuple(new_learners)))
    steps.extend(_moves(old, table))
    return Plan(table, tuple(steps), why)


def _moves(old: ChainTable, new: ChainTable) -> list[MoveRules]:
    out = []
    for i, (a, b) in enumerate(zip(old.slots, new.slots)):
        read = b.read_server if b.read_server and b.read_server != a.read_server else None
        head = b.head if b.head != a.head else None
        if read is not None or head is not None:
            out.append(MoveRules(i, read, head))
    return out


def heads_step(table: ChainTable) -> PushHeads:
    """The SetHeads push of `table`'s heads (also what a master sends at adoption and to a cache
    node that comes back)."""
    return PushHeads(table.version, tuple(s.head for s in table.slots))


def heads_due(states: Mapping[str, str], sent: Mapping[str, int], version: int) -> list[str]:
    """The cache nodes to send heads `version` now, sorted: every one not "down" in `states`
    (node -> liveness state) that has not accepted that version from us (`sent`: node -> the
    version it last accepted). The caller forgets `sent` of a node it sees down, so one that
    comes back (maybe restarted with the config's heads) gets them again."""
    return sorted(n for n, st in states.items() if st != "down" and sent.get(n) != version)


def rule_moves(table: ChainTable) -> list[MoveRules]:
    """Every slot's rules as `table` wants them (read rule left alone for read_server ""): what a
    master that adopted a table sends (the rule updater queues only what differs on the switch)."""
    return [MoveRules(i, s.read_server or None, s.head) for i, s in enumerate(table.slots)]


# ---------------------------------------------------------------------- planners


def _without(table: ChainTable, node: str) -> list[SlotChain]:
    """Every slot with `node` dropped; a slot whose read server was `node` (or that had none)
    gets its new last node. PlanError when a slot would have no node."""
    out = []
    for i, s in enumerate(table.slots):
        if node not in s.names():
            out.append(s)
            continue
        nodes = tuple(n for n in s.nodes if n != node)
        if not nodes:
            raise PlanError(f"slot {i}: {node!r} is the last node of its chain; removing it would leave "
                            f"the slot with no copy of its data (learners {list(s.learners)} have not caught up)")
        learners = tuple(n for n in s.learners if n != node)
        read = s.read_server if s.read_server in nodes else nodes[-1]
        out.append(SlotChain(nodes, learners, read))
    return out


def node_down(table: ChainTable, node: str) -> Plan:
    """`node` failed (or restarted: its old incarnation failed): drop it everywhere (head -> the
    next node is head; tail -> its predecessor; middle -> splice; learner -> dropped)."""
    if node not in table.nodes_named() and node not in table.members:
        return Plan(table, (), f"{node} is not in the table")
    members = {n: inc for n, inc in table.members.items() if n != node}
    return _transition(table, _without(table, node), members, (node,), f"{node} down")


def remove(table: ChainTable, node: str) -> Plan:
    """`exo node remove NAME`: the same table change as a failure (the node is told, too)."""
    plan = node_down(table, node)
    return replace(plan, why=f"{node} removed")


def refill(table: ChainTable, candidates: Mapping[str, int], rf: int, why: str = "") -> Plan:
    """Append a learner to every slot with fewer than `rf` nodes + learners, from `candidates`
    (live nodes with their incarnations): the least loaded one the slot lacks. Candidates that
    are not yet members become members with the given incarnation."""
    members = dict(table.members)
    for n, inc in candidates.items():
        if n in members and members[n] != inc:
            raise PlanError(f"{n!r}: incarnation {inc:#x} differs from the table's {members[n]:#x}; "
                            "plan its old incarnation's node_down first")
        members[n] = inc
    load = {n: 0 for n in candidates}
    for s in table.slots:
        for n in s.names():
            if n in load:
                load[n] += 1
    slots = []
    for s in table.slots:
        learners = list(s.learners)
        while len(s.nodes) + len(learners) < rf:
            options = [n for n in sorted(candidates) if n not in s.nodes and n not in learners]
            if not options:
                break
            pick = min(options, key=lambda n: (load[n], n))
            load[pick] += 1
            learners.append(pick)
        slots.append(replace(s, learners=tuple(learners)))
    return _transition(table, slots, members, (), why or "refill")


def node_joined(table: ChainTable, node: str, incarnation: int, rf: int) -> Plan:
    """A new node, or a new incarnation of one (its old incarnation is removed first): it becomes
    a member and a learner of every slot short of `rf` that lacks it."""
    first = Plan(table)
    if node in table.members and table.members[node] != incarnation:
        first = node_down(table, node)
    second = refill(first.table, {node: incarnation}, rf, f"{node} joined")
    return Plan(second.table, first.steps + second.steps, f"{node} joined (incarnation {incarnation:#x})")


def add(table: ChainTable, node: str, incarnation: int, rf: int) -> Plan:
    """`exo node add NAME`: the same as a node joining."""
    return node_joined(table, node, incarnation, rf)


def caught_up(table: ChainTable, node: str, slots: Iterable[int]) -> Plan:
    """`node` finished copying `slots` as their learner: hand each over in two pushes.
    1. read_server "" for those slots (the old read server stops answering GETs; the read rule
       stays where it is); 2. wait until the old read servers have nothing pending (the learner has
       every write they applied) and at least HANDOVER_MIN_S passed; 3. `node` moves from the
       learners to the end of the nodes and reads; its read rule moves. Slots where `node` is not
       a learner (any more) are skipped."""
    wanted = sorted({s for s in slots if 0 <= s < len(table.slots) and node in table.slots[s].learners})
    if not wanted:
        return Plan(table, (), f"{node}: nothing to hand over")
    quiet = list(table.slots)
    final = list(table.slots)
    old_readers = []
    for i in wanted:
        s = table.slots[i]
        if s.read_server and s.read_server not in old_readers:
            old_readers.append(s.read_server)
        quiet[i] = replace(s, read_server="")
        final[i] = SlotChain(s.nodes + (node,), tuple(n for n in s.learners if n != node), node)
    first = _transition(table, quiet, table.members, (), f"{node} caught up: slots {wanted} stop reading")
    second = _transition(first.table, final, table.members, (), f"{node} caught up: reads slots {wanted}")
    waits: list[Step] = [WaitPendingZero(n) for n in old_readers] + [Wait(HANDOVER_MIN_S)]
    return Plan(second.table, first.steps + tuple(waits) + second.steps,
                f"{node} takes over slots {wanted}")


def restore_readers(table: ChainTable) -> Plan:
    """Every slot left without a read server (a hand-over that stopped halfway: its old read
    server failed or never drained) reads at its last node again; the learner's caught_up will
    start the hand-over anew."""
    slots = [s if s.read_server else replace(s, read_server=s.nodes[-1]) for s in table.slots]
    return _transition(table, slots, table.members, (), "read servers restored")


# ---------------------------------------------------------------------- messages


def to_msg(table: ChainTable, pb):
    """ChainTable -> exoproto ChainTableMsg (`pb` is control_pb2)."""
    return pb.ChainTableMsg(
        version=table.version,
        slots=[pb.SlotChain(nodes=list(s.nodes), learners=list(s.learners), read_server=s.read_server)
               for s in table.slots],
        members=[pb.NodeIncarnation(node=n, incarnation=inc) for n, inc in sorted(table.members.items())])


def from_msg(msg) -> ChainTable:
    """ChainTableMsg -> ChainTable."""
    return ChainTable(msg.version,
                      tuple(SlotChain(tuple(s.nodes), tuple(s.learners), s.read_server) for s in msg.slots),
                      {m.node: m.incarnation for m in msg.members})


def describe(table: ChainTable) -> str:
    """One line per slot, for logs."""
    lines = [f"chain table v{table.version}"]
    for i, s in enumerate(table.slots):
        extra = f" + learners {','.join(s.learners)}" if s.learners else ""
        lines.append(f"  slot {i}: {' -> '.join(s.nodes)}{extra}; reads {s.read_server or '(nobody)'}")
    return "\n".join(lines)


def counts(table: ChainTable) -> dict[str, float]:
    """Stats figures of a table."""
    heads: dict[str, int] = {}
    for s in table.slots:
        heads[s.head] = heads.get(s.head, 0) + 1
    return {
        "chain_table_version": float(table.version),
        "learners_catching_up": float(sum(len(s.learners) for s in table.slots)),
        "slots_without_reader": float(sum(1 for s in table.slots if not s.read_server)),
        "chain_nodes_min": float(min((len(s.nodes) for s in table.slots), default=0)),
    }
