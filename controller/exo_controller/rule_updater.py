"""The rate-limited rule updater (docs/cache-fill.md section 3, "our Algorithm 1"). Pure logic.

Why a separate, pure module: a real switch takes only R flow-mods per second (50 on the thesis's
Pica8) and holds only C Ruleset 2 rules, while cache nodes change their hot sets in bursts. So
requests must not turn into flow-mods one to one. They change the *desired* rule book at once
and the switch catches up at rate R. Keeping the decisions here (no os-ken, no threads, time
passed in as `now`) lets the unit tests run hours of simulated churn against a fake clock; the
os-ken app only sends what `next_batch` returns and reports back what the barrier confirmed.

Choices worth knowing:
* The queues are not logs of requests but the difference between the desired book and the
  barrier-confirmed `installed` view. So a remove followed by a re-add before the delete is sent
  costs nothing, and a batch lost to a timeout or disconnect is retried by putting it back.
* A hash has at most one flow-mod in flight; while it is in flight it is in neither queue.
  Whatever the book wants after the barrier is queued again then.
* Capacity: an add of a hash the switch does not hold is sent only while
  installed + such adds in flight < C. Unlike the listing in docs/cache-fill.md we do not count
  deletes of the same batch as room: OpenFlow orders flow-mods only across barriers, so a switch
  may apply a batch's adds before its deletes. Deletes still drain one per add once installed
  reaches C, just batch by batch. An add that only moves a held hash to another port always fits.
* Statics (flush, the meters and table 0's ingress checks of ingress.py, Ruleset 1, ARP) go
  first after a (re)connect whose table is not ours (switch_connected(None)); every one,
  meter-mods included, counts against R like any flow-mod. A batch of statics ends where
  ingress.needs_barrier says so (the meters must be in before the flows that use them). The
  flush empties Rulesets 2 and 3 as well, so both installed views restart empty: every Ruleset 3
  rule is queued right behind the statics (so a flushed switch gets exactly the flows it got when
  Ruleset 3 was a static), and every desired Ruleset 2 rule is back in the add queue, hottest
  first and within C, behind them. A table whose statics are ours is kept (see below).
* Ruleset 3 (docs/design/replication.md, 2.3) is desired state like Ruleset 2: the
  flows.PartitionBook says which db node port each slot's rule(s) output to, `partitions_installed`
  what the switch confirmed (cookie index -> port). A difference is a CHAIN item: one ADD with the
  rule's match and priority, which replaces its action. CHAIN items leave after withdrawals and
  statics and before every Ruleset 2 add or delete (a wrong Ruleset 3 rule costs a whole slot's
  availability, a missing Ruleset 2 rule only a cache hit), FIFO, and count against R like every
  flow-mod. move_slot and set_chains change the book (a db node failed or joined); the app waits
  with chain_pending. A refused CHAIN add is sent again (the slot cannot be dropped).
* Rate: a sliding window (at most floor(R), at least 1, sends in any half-open 1 s window) is the
  hard guarantee; a token bucket with a burst of max(1, R/10) paces it, so a backlog leaves as a
  steady stream of small batches instead of R flow-mods at the start of every second. What must
  hold is the switch's view, and a flow-mod reaches the switch some time between the decision to
  send it (next_batch's `now`) and its barrier reply (batch_done's `now`), after a delay that
  varies with load (os-ken's send thread, TCP, the switch's read: delay_ms_* in
  exo_topo.switch_audit; 31 ms was seen in `make demo` on 2 busy cores). So a flow-mod stays in
  the window until 1 s (+ 1 ms, CLOCK_RESOLUTION_S) after its barrier reply. That is exact: only
  one batch is in flight, so when a batch is decided every earlier one is confirmed; a flow-mod
  confirmed more than 1 s before the new batch was decided reached the switch more than 1 s
  before anything of the new batch can, and every one that could share a 1 s switch-side window
  with the new batch is counted. Cost: a backlog drains at R / (1.001 + barrier round trip).
  Callers that do not pass the barrier time (unit tests of other parts) get the older rule,
  hand-over time + SEND_GUARD_S. A batch whose barrier timed out counts until 1 s +
  SEND_GUARD_S after the timeout (its flow-mods may still be on the way; a disconnect drops them).
* A switch refusal of an add (OFPFMFC_TABLE_FULL from OVS flow_limit, like a full hardware table)
  drops that hash from the desired book, otherwise it would be retried forever; any waiter is told.
* Withdrawal of a cache node declared DOWN (liveness.py): `withdraw(node)` drops all its
  references from the book, cancels its queued adds, and queues ONE flow-mod (non-strict DELETE
  of Ruleset 2 with out_port = the node's port) that goes before anything else (statics
  included) and counts against R like any flow-mod. Its hashes leave `installed` when the
  barrier confirms it, and `pop_withdrawn()` then names the node (the app tells the db nodes to
  forget it). While a node is out of the cluster its adds are rejected and its removes are
  no-ops; no add to its port is sent while a withdrawal of that port is queued or in flight.
* Controller restart: `switch_connected(table, partitions)` with the switch's own Ruleset 2
  (hash -> port) and Ruleset 3 (cookie index -> port; flows.plan_table) keeps the switch's flows
  instead of flushing; a Ruleset 3 rule that points elsewhere than the book is queued, not
  flushed. A freshly started controller's book is empty: `expect_sync(nodes)` then `sync_node(node, hashes)` rebuild it from what each
  cache node holds (CacheNode.ListKeys). Until every expected node is synced (or withdrawn) no
  DELETE of an installed-but-undesired rule is sent: the rule may belong to a node not yet
  synced. Adds (and moves) may go. Hashes a node added or removed itself before its sync are
  left as its requests made them (they are newer than, or reflected in, its ListKeys); a hash
  taken from ListKeys absorbs one later AddCacheRules of the same (hash, node), because a cache
  node resends an add that failed while the controller was down.
  With controller.etcd a new master instead loads the book etcd holds (load_book; book_store.py)
  before adopting the switch, and sync_node then reconciles it (book_sync_corrections), and
  seed_window enters the old master's last second into the rate window (ratewin_store.py).
* Metrics are lifetime figures (since the controller started, the start-up programming of
  Rulesets 1 and 3 included). A run's own figures (Ruleset 2 flow-mods inside a time window)
  come from the timestamped journal the app keeps (rule_journal.py); `ruleset2_may_hold` is the
  size it records.
* FAULT_NO_RATE_LIMIT is a known-bad controller for tests only: it sends every queued change at
  once, so the switch-side audit (exo_topo.switch_audit) can be shown to catch a broken limiter.
"""
from __future__ import annotations

import heapq
import math
import weakref
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

from .flows import (ADD, DELETE_STRICT, CacheRule, CacheRuleBook, FlowMod, PartitionBook, flush_flowmod,
                    static_mods, withdraw_flowmod)
from .ingress import needs_barrier

STATIC, ADD_RULE, DEL_RULE, WITHDRAW = "static", "add", "delete", "withdraw"
CHAIN = "chain"  # a Ruleset 3 rule to (re)point: PartitionBook, module docstring "Ruleset 3"

# Fault switch for tests (main.py --fault): the rate limiter is off; batches are capped only so
# one batch stays a sane size. Never set in a real deployment.
FAULT_NO_RATE_LIMIT = "no-rate-limit"
FAULTS = (FAULT_NO_RATE_LIMIT,)
_UNLIMITED_BATCH = 10_000

# How much longer than 1 s a send stays in the rate window when its barrier time is not known
# (module docstring, "Rate"): a batch that timed out, or a caller that does not pass `now`.
SEND_GUARD_S = 0.02
# A confirmed flow-mod stays in the window 1 s plus this: the switch-side audit's clock
# (ovs-ofctl --timestamp) has whole milliseconds, and a send 1.0000 s after a barrier reply may
# print 0.9997 s after it. With 1 ms more, "at most R in any second" is checkable from outside.
CLOCK_RESOLUTION_S = 0.001


def out_of_cluster(node: str) -> str:
    """Why an AddCacheRules of a node declared DOWN (or still rejoining) is rejected."""
    return f"cache node {node} is out of the cluster until it rejoins"


@dataclass(frozen=True)
class _Item:
    kind: str                   # STATIC, CHAIN, ADD_RULE, DEL_RULE or WITHDRAW
    khash: Optional[int] = None  # ADD_RULE, DEL_RULE: the rule hash; CHAIN: the Ruleset 3 cookie index
    port: Optional[int] = None  # ADD_RULE, CHAIN: the port it installs; WITHDRAW: the port it clears
    seq: int = 0                # queue position to restore if the batch fails
    new: bool = False           # ADD_RULE of a hash not installed (takes a slot of C)
    node: Optional[str] = None  # WITHDRAW: the cache node


@dataclass
class Batch:
    """Flow-mods to send, then one barrier. Hand it back to batch_done or batch_failed."""
    mods: list[FlowMod] = field(default_factory=list)
    items: list[_Item] = field(default_factory=list)
    epoch: int = 0

    def __len__(self) -> int:
        return len(self.mods)


@dataclass(eq=False)
class Ticket:
    """What a waiting caller watches: its hashes, and the switch refusals that hit them."""
    hashes: frozenset
    errors: dict = field(default_factory=dict)  # hash -> why it failed


@dataclass
class UpdateResult:
    """Per-request outcome, like flows.BookResult (accepted, rejected, error) plus a Ticket."""
    accepted: int = 0
    rejected: list[tuple[CacheRule, str]] = field(default_factory=list)
    ticket: Optional[Ticket] = None
    full: list[CacheRule] = field(default_factory=list)  # of rejected: book at capacity (flows.BookResult)

    @property
    def error(self) -> str:
        return "; ".join(f"{r.key_hash:#012x}@{r.cache_node}: {why}" for r, why in self.rejected)


class RuleUpdater:
    """Desired vs installed Ruleset 2, the add/delete queues, statics, and the rate limiter."""

    def __init__(self, ports: Mapping[str, int], capacity: int, rate: float,
                 statics: Sequence[FlowMod] = (), burst: Optional[float] = None,
                 fault: Optional[str] = None, match: str = "ipv4_dst",
                 partitions: Optional[PartitionBook] = None):
        """statics: what a flushed switch gets first, Ruleset 3 not included; partitions: the
        desired Ruleset 3 (None: the updater has none, e.g. unit tests of Ruleset 2 alone)."""
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")
        self.fault = fault
        self.capacity = capacity
        self.rate = float(rate)
        self.window_cap = max(1, math.floor(self.rate))
        self.burst = max(1.0, self.rate / 10) if burst is None else max(1.0, float(burst))
        self._ports = dict(ports)
        self._statics_template = [flush_flowmod(), *statics]
        self.book = CacheRuleBook(self._ports, capacity, match)   # desired
        self.installed: dict[int, int] = {}                # hash -> port, barrier-confirmed
        self._loads: dict[int, float] = {}
        self._adds: dict[int, int] = {}                    # hash -> seq (FIFO tie-break)
        self._dels: dict[int, int] = {}                    # hash -> seq (insertion order = FIFO)
        self._inflight: dict[int, _Item] = {}              # hash -> its flow-mod in flight
        self._new_inflight = 0                             # ADD_RULE items with new=True in flight
        self._statics: deque[FlowMod] = deque()
        self._statics_inflight = 0
        # Ruleset 3 (module docstring, "Ruleset 3"): desired book, barrier-confirmed view
        # (cookie index -> port), the indices to (re)send (index -> seq, FIFO) and those in flight.
        self.partitions = partitions
        self.partitions_installed: dict[int, int] = {}
        self._chains: dict[int, int] = {}
        self._chain_inflight: dict[int, _Item] = {}
        self.ruleset3_refused = 0
        self._batch: Optional[Batch] = None
        self._epoch = 0
        self._seq = 0
        self.connected = False
        self._tickets: "weakref.WeakSet[Ticket]" = weakref.WeakSet()
        # rate limiter
        # When each flow-mod of the last second leaves the rate window (module docstring, "Rate"),
        # in order: the decision time + window_s until its barrier reply sets it to reply + 1 s.
        self._sends: deque[float] = deque()
        self.window_s = 1.0 + SEND_GUARD_S
        self._tokens = self.burst
        self._tokens_at: Optional[float] = None
        self.flow_mods_sent = 0
        self.ruleset2_flow_mods_sent = 0                   # adds, deletes and withdrawals
        self.flow_mods_refused = 0
        self.max_per_s = 0
        # Largest Ruleset 2 the switch may have held: installed plus new adds in flight (the
        # switch may apply them before their barrier reply reaches us).
        self.ruleset2_peak = 0
        # cache node liveness and controller restart (module docstring)
        self._out: set[str] = set()                        # nodes out of the cluster (DOWN, REJOINING)
        self._withdrawals: dict[str, int] = {}             # node -> seq: withdrawal flow-mods queued
        self._withdraw_inflight: set[str] = set()
        self._withdrawn_done: list[str] = []               # barrier-confirmed, for pop_withdrawn()
        self._unsynced: set[str] = set()                   # nodes whose rules are not rebuilt yet
        self._touched: dict[str, set[int]] = {}            # unsynced node -> hashes it asked about
        self._from_sync: Counter = Counter()               # (hash, node) -> refs taken from ListKeys
        # The book in etcd (book_store.py; only with controller.etcd): hashes whose book state
        # changed since the app last wrote it, whether a stored book was loaded (ListKeys sync then
        # reconciles it and counts what it corrected), and that count.
        self.book_tracking = False  # set with an etcd book: only then is book_dirty kept
        self.book_dirty: set[int] = set()
        self.book_loaded = False
        self.book_sync_corrections = 0
        # Flow-mods another controller sent, seeded from the etcd rate-window record
        # (ratewin_store.py): when each leaves the window, sorted, in this updater's clock. Kept
        # apart from _sends, whose newest entries are the batch in flight (_restamp).
        self._seeded: deque[float] = deque()

    @classmethod
    def from_config(cls, cfg, fault: Optional[str] = None) -> "RuleUpdater":
        sw = cfg.switch
        return cls({c.name: c.switch_port for c in cfg.cache_nodes}, sw.cache_rule_capacity,
                   sw.rule_update_rate, static_mods(cfg, ruleset3=False), fault=fault, match=sw.cache_match,
                   partitions=PartitionBook.from_config(cfg))

    # ------------------------------------------------------------------ requests

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _withdrawing(self, port: Optional[int]) -> bool:
        """A withdrawal of `port` is queued or in flight (it will delete every rule to it)."""
        return port is not None and any(
            self._ports[n] == port for n in (*self._withdrawals, *self._withdraw_inflight))

    def _reconcile(self, h: int) -> None:
        """Put h in the queue its desired/installed difference calls for (or none)."""
        owner = self.book.owner(h)
        want = self._ports[owner] if owner is not None else None
        have = self.installed.get(h)
        if want is None:
            self._loads.pop(h, None)
        if h in self._inflight:
            self._adds.pop(h, None)
            self._dels.pop(h, None)
            return
        if want is not None and want != have:
            self._adds.setdefault(h, self._next_seq())
        else:
            self._adds.pop(h, None)
        # A rule to a port being withdrawn needs no delete of its own: the withdrawal takes it.
        if want is None and have is not None and not self._withdrawing(have):
            self._dels.setdefault(h, self._next_seq())
        else:
            self._dels.pop(h, None)

    def _track(self, res, rules: list[CacheRule]) -> UpdateResult:
        bad = {id(r) for r, _ in res.rejected}
        hashes = frozenset(self.book.rule_hash(r.key_hash) for r in rules if id(r) not in bad)
        ticket = Ticket(hashes)
        self._tickets.add(ticket)
        self._dirty(hashes)
        for h in hashes:
            self._reconcile(h)
        return UpdateResult(res.accepted, list(res.rejected), ticket, list(res.full))

    def _note_touched(self, rule: CacheRule) -> None:
        if rule.cache_node in self._unsynced:
            self._touched[rule.cache_node].add(self.book.rule_hash(rule.key_hash))

    def add(self, rules: Iterable[CacheRule], loads: Optional[Iterable[float]] = None) -> UpdateResult:
        """Add references to the desired book; `loads` (parallel to rules) orders the add queue.
        Rules of a node out of the cluster are rejected (out_of_cluster)."""
        rules = list(rules)
        loads = list(loads) if loads is not None else [0.0] * len(rules)
        if len(loads) != len(rules):
            raise ValueError(f"{len(loads)} loads for {len(rules)} rules")
        to_book, absorbed, out = [], 0, []
        for r in rules:
            key = (self.book.rule_hash(r.key_hash), r.cache_node)
            if r.cache_node in self._out:
                out.append((r, out_of_cluster(r.cache_node)))
                continue
            self._note_touched(r)
            if self._from_sync[key] > 0:
                # Already counted from the node's ListKeys: this is the node resending an add
                # that failed while the controller was away, not a second key.
                self._from_sync[key] -= 1
                if not self._from_sync[key]:
                    del self._from_sync[key]
                absorbed += 1
            else:
                to_book.append(r)
        res = self.book.add(to_book)
        res.accepted += absorbed
        res.rejected += out
        bad = {id(r) for r, _ in res.rejected}
        for r, load in zip(rules, loads):
            h = self.book.rule_hash(r.key_hash)
            if id(r) not in bad:
                self._loads[h] = max(self._loads.get(h, 0.0), float(load or 0.0))
        return self._track(res, rules)

    def remove(self, rules: Iterable[CacheRule]) -> UpdateResult:
        """Drop references. Those of a node out of the cluster are accepted as no-ops (its
        references went with its withdrawal)."""
        rules = list(rules)
        to_book, noop = [], 0
        for r in rules:
            if r.cache_node in self._out:
                noop += 1
                continue
            self._note_touched(r)
            key = (self.book.rule_hash(r.key_hash), r.cache_node)
            if self._from_sync[key] > 0:
                self._from_sync[key] -= 1
                if not self._from_sync[key]:
                    del self._from_sync[key]
            to_book.append(r)
        res = self.book.remove(to_book)
        res.accepted += noop
        return self._track(res, rules)

    def pending(self, h: int) -> bool:
        h = self.book.rule_hash(h)
        return (h in self._adds or h in self._dels or h in self._inflight
                or self._withdrawing(self.installed.get(h)))

    # ------------------------------------------------------------------ Ruleset 3

    def _reconcile_chain(self, index: int) -> None:
        """Queue Ruleset 3 rule `index` if the switch does not hold it as the book wants it."""
        if index in self._chain_inflight:
            self._chains.pop(index, None)  # looked at again when its barrier comes back
        elif self.partitions.port(index) != self.partitions_installed.get(index):
            self._chains.setdefault(index, self._next_seq())
        else:
            self._chains.pop(index, None)

    def _need_partitions(self) -> PartitionBook:
        if self.partitions is None:
            raise ValueError("this updater has no Ruleset 3 book (partitions=None)")
        return self.partitions

    def move_slot(self, slot: int, read_port: Optional[int] = None, write_port: Optional[int] = None) -> list[int]:
        """Point `slot`'s read and/or write rule elsewhere (PartitionBook.move); queues one ADD per
        rule that changed (none if the switch already holds it so). Returns the changed indices."""
        changed = self._need_partitions().move(slot, read_port, write_port)
        for index in changed:
            self._reconcile_chain(index)
        return changed

    def set_chains(self, chains: list[list[str]], ports: Mapping[str, int]) -> list[int]:
        """A new chain table (slot -> [head, ..., tail] of db node names; `ports`: db node ->
        switch port): read rules to the tails, write rules to the heads. Only the rules whose port
        changed are queued. A bad table (ValueError naming chains[i]) changes nothing."""
        changed = self._need_partitions().apply_chains(chains, dict(ports))
        for index in changed:
            self._reconcile_chain(index)
        return changed

    def chain_pending(self, indices: Optional[Iterable[int]] = None) -> bool:
        """Some Ruleset 3 rule (of `indices`; None: any) is queued or in flight."""
        if indices is None:
            return bool(self._chains or self._chain_inflight)
        return any(i in self._chains or i in self._chain_inflight for i in indices)

    # ------------------------------------------------------------------ cache node liveness

    @property
    def out_nodes(self) -> frozenset:
        return frozenset(self._out)

    def withdraw(self, node: str) -> list[int]:
        """`node` was declared DOWN: drop every reference it holds (all refcounts), cancel its
        queued adds, reject its adds from now on, and queue the one flow-mod that deletes all its
        Ruleset 2 rules (sent before anything else). Returns the hashes it held in the book."""
        if node not in self._ports:
            raise KeyError(f"unknown cache node {node!r}")
        self._out.add(node)
        self._unsynced.discard(node)
        self._touched.pop(node, None)
        for key in [k for k in self._from_sync if k[1] == node]:
            del self._from_sync[key]
        if node not in self._withdraw_inflight:
            self._withdrawals.setdefault(node, self._next_seq())
        held = self.book.drop_node(node)
        port = self._ports[node]
        for h in set(held) | {h for h, p in self.installed.items() if p == port}:
            self._reconcile(h)
        return held

    def rejoin(self, node: str) -> None:
        """`node` is back (reset, and forgotten by every db node): its adds are accepted again.
        It holds nothing, so there is nothing to sync."""
        if node not in self._ports:
            raise KeyError(f"unknown cache node {node!r}")
        self._out.discard(node)

    def pop_withdrawn(self) -> list[str]:
        """Nodes whose withdrawal flow-mod the switch confirmed since the last call."""
        done, self._withdrawn_done = self._withdrawn_done, []
        return done

    # ------------------------------------------------------------------ rebuilding the book

    def expect_sync(self, nodes: Iterable[str]) -> None:
        """A freshly started controller: these nodes' rules are rebuilt by sync_node; until then
        (or their withdrawal) no installed-but-undesired rule is deleted."""
        for node in nodes:
            if node not in self._ports:
                raise KeyError(f"unknown cache node {node!r}")
            if node not in self._out:
                self._unsynced.add(node)
                self._touched.setdefault(node, set())

    @property
    def synced(self) -> bool:
        return not self._unsynced

    @property
    def unsynced_nodes(self) -> frozenset:
        return frozenset(self._unsynced)

    def sync_node(self, node: str, hashes: Iterable[int]) -> int:
        """One reference per key `node` holds (its ListKeys, hashed), except for hashes the node
        added or removed itself since the controller started. Returns the references added;
        0 if the node is not waiting for a sync (synced already, or withdrawn meanwhile).
        After load_book (the book came from etcd) this reconciles instead: each untouched hash's
        references of `node` become what ListKeys says, fewer ones too, and every reference added
        or dropped counts in book_sync_corrections (0 when etcd's book was exact)."""
        if node not in self._unsynced:
            return 0
        touched = self._touched.pop(node, set())
        self._unsynced.discard(node)
        counts = Counter(self.book.rule_hash(h) for h in hashes)
        if self.book_loaded:
            return self._reconcile_sync(node, counts, touched)
        rules = [CacheRule(h, node) for h, n in counts.items() if h not in touched for _ in range(n)]
        res = self.book.add(rules)
        bad = {id(r) for r, _ in res.rejected}
        for r in rules:
            if id(r) not in bad:
                self._from_sync[(r.key_hash, node)] += 1
        self._dirty(counts)
        for h in counts:
            self._reconcile(h)
        return res.accepted

    def _reconcile_sync(self, node: str, counts: Counter, touched: set[int]) -> int:
        """sync_node over a book loaded from etcd. Returns the references added."""
        mine = {h for h in self.book.hashes() if self.book.refcount(h, node)}
        added = 0
        for h in (set(counts) | mine) - touched:
            have, want = self.book.refcount(h, node), counts.get(h, 0)
            if want > have:
                res = self.book.add([CacheRule(h, node)] * (want - have))
                added += res.accepted
                self.book_sync_corrections += res.accepted
            elif want < have:
                self.book.remove([CacheRule(h, node)] * (have - want))
                self.book_sync_corrections += have - want
            if want:
                self._from_sync[(h, node)] = want
            else:
                self._from_sync.pop((h, node), None)
            if want != have:
                self._dirty((h,))
                self._reconcile(h)
        return added

    def load_book(self, refs: Mapping[int, Mapping[str, int]]) -> None:
        """A new master: the desired book becomes the one stored in etcd (book_store.py; hash ->
        node -> refcount, in add order), exact at once. Each stored reference absorbs one later
        AddCacheRules of its (hash, node), as a ListKeys one does (a cache node resends an add
        whose answer the old master never gave, though etcd may have it). References of nodes
        out of the cluster are dropped (their withdrawal is already queued)."""
        old = set(self.book.hashes())
        snap = {h: OrderedDict((n, c) for n, c in nodes.items() if n in self._ports and n not in self._out and c > 0)
                for h, nodes in refs.items()}
        self.book.restore({h: None for h in old - set(snap)})
        self.book.restore({h: nodes or None for h, nodes in snap.items()})
        self._from_sync = Counter({(h, n): c for h, nodes in snap.items() for n, c in nodes.items()})
        self.book_loaded = True
        self.book_dirty.clear()
        for h in old | set(snap):
            self._reconcile(h)

    def checkpoint(self, rules: Iterable[CacheRule]) -> tuple:
        """What add/remove of `rules` may change, to put back with rollback() (the book could not
        be written to etcd, so the change must not happen)."""
        hashes = {self.book.rule_hash(r.key_hash) for r in rules}
        return (self.book.snapshot(hashes), {k: v for k, v in self._from_sync.items() if k[0] in hashes},
                {n: set(t) for n, t in self._touched.items()}, {h: self._loads[h] for h in hashes if h in self._loads},
                set(self.book_dirty))

    def rollback(self, cp: tuple) -> None:
        book, from_sync, touched, loads, dirty = cp
        self.book.restore(book)
        for k in [k for k in self._from_sync if k[0] in book]:
            del self._from_sync[k]
        self._from_sync.update(from_sync)
        self._touched = touched
        for h in book:
            self._loads.pop(h, None)
        self._loads.update(loads)
        # The hashes put back go to etcd again: a Txn of a write that failed halfway may have
        # changed some of them (the store's mirror knows which; the others cost nothing).
        self.book_dirty = dirty | set(book)
        for h in book:
            self._reconcile(h)

    def _dirty(self, hashes: Iterable[int]) -> None:
        if self.book_tracking:
            self.book_dirty.update(hashes)

    def settled(self, ticket: Ticket) -> bool:
        """True once none of the ticket's hashes is queued or in flight (see ticket.errors)."""
        return not any(self.pending(h) for h in ticket.hashes)

    # ------------------------------------------------------------------ switch connection

    def switch_connected(self, table: Optional[Mapping[int, int]] = None,
                         partitions: Optional[Mapping[int, int]] = None,
                         keep_partitions: bool = False) -> None:
        """A (re)connected switch. table None: its flows are not what we would program (or
        unknown): flush and statics first, then every Ruleset 3 rule and every desired Ruleset 2
        rule is re-added. table: its statics are ours (flows.plan_table); keep them and take its
        Ruleset 2 (hash -> port) and its Ruleset 3 (`partitions`, cookie index -> port; None: not
        known, so every Ruleset 3 rule is sent again) as installed; only the difference to the
        books is sent. A rule to the port of a node out of the cluster gets that node's
        withdrawal again."""
        self._epoch += 1
        self._abandon_batch()
        self.connected = True
        old = set(self.installed) | set(self._dels)
        self._chains.clear()
        if table is None:
            self._statics = deque(self._statics_template)
            self.installed = {}
            self.partitions_installed = {}
        else:
            self._statics = deque()
            self.installed = {self.book.rule_hash(h): port for h, port in table.items()}
            self.partitions_installed = dict(partitions or {})
            if keep_partitions and self.partitions is not None:
                # The chain table lives in the db nodes, not the config: what the switch holds is
                # the best guess until the chain executor has read it (it then moves what differs).
                self.partitions.adopt(self.partitions_installed)
            ports = set(self.installed.values())
            for node in sorted(self._out):
                if self._ports[node] in ports and node not in self._withdrawals:
                    self._withdrawals[node] = self._next_seq()
        self._dels.clear()
        if self.partitions is not None:
            for index in self.partitions.indices():
                self._reconcile_chain(index)
        for h in old | set(self._adds) | set(self.book.hashes()) | set(self.installed):
            self._reconcile(h)

    def switch_disconnected(self) -> None:
        self._epoch += 1
        self._abandon_batch()
        self.connected = False
        self._statics.clear()

    def _abandon_batch(self) -> None:
        """Forget the in-flight batch; its hashes go back to the queues at their old places."""
        batch, self._batch = self._batch, None
        if batch is None:
            return
        self._new_inflight = 0
        self._statics_inflight = 0
        for it in batch.items:
            if it.kind == WITHDRAW:
                self._withdraw_inflight.discard(it.node)
                self._withdrawals[it.node] = it.seq
        self._withdrawals = dict(sorted(self._withdrawals.items(), key=lambda kv: kv[1]))
        chains = [it for it in batch.items if it.kind == CHAIN]
        for it in chains:
            self._chain_inflight.pop(it.khash, None)
        for it in chains:
            self._reconcile_chain(it.khash)
            if it.khash in self._chains:
                self._chains[it.khash] = it.seq
        self._chains = dict(sorted(self._chains.items(), key=lambda kv: kv[1]))
        items = [it for it in batch.items if it.kind in (ADD_RULE, DEL_RULE)]
        for it in items:
            self._inflight.pop(it.khash, None)
        for it in items:
            self._reconcile(it.khash)
            for q in (self._adds, self._dels):
                if it.khash in q:
                    q[it.khash] = it.seq
        self._dels = dict(sorted(self._dels.items(), key=lambda kv: kv[1]))

    @property
    def programmed(self) -> bool:
        """Connected, every static flow-mod barrier-confirmed and Ruleset 3 as the book wants it."""
        return self.connected and not self._statics and not self._statics_inflight and not self.chain_pending()

    # ------------------------------------------------------------------ rate limiter

    def _refill(self, now: float) -> None:
        if self._tokens_at is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._tokens_at) * self.rate)
        self._tokens_at = now
        while self._sends and self._sends[0] <= now:
            self._sends.popleft()
        while self._seeded and self._seeded[0] <= now:
            self._seeded.popleft()

    def _in_window(self) -> int:
        return len(self._sends) + len(self._seeded)

    def seed_window(self, leave_times: Iterable[float]) -> None:
        """Flow-mods another controller (the old master) may have sent: each counts against R
        until its time (this updater's clock; ratewin_store.seed_leave_times). Replaces any earlier
        seed."""
        self._seeded = deque(sorted(leave_times))
        self.max_per_s = max(self.max_per_s, self._in_window())

    def budget(self, now: float) -> int:
        self._refill(now)
        if self.fault == FAULT_NO_RATE_LIMIT:
            return _UNLIMITED_BATCH
        return max(0, min(math.floor(self._tokens + 1e-9), self.window_cap - self._in_window()))

    def _sent(self, now: float, n: int) -> None:
        self._tokens -= n
        self._sends.extend([now + self.window_s] * n)
        self.flow_mods_sent += n
        self.max_per_s = max(self.max_per_s, self._in_window())

    def mark_sent(self, batch: Batch, now: float) -> None:
        """The app finished handing `batch` to the switch connection at `now`: until its barrier
        reply says when it was in, its flow-mods count from then on (they were entered at
        next_batch's earlier `now`)."""
        if batch is not self._batch or not batch.mods:
            return
        self._restamp(len(batch), now + self.window_s)

    def _restamp(self, n: int, leaves_at: float) -> None:
        """The newest n window entries (the batch in flight: one at a time) leave at `leaves_at`.
        Entries stay sorted: every earlier batch was confirmed before this one was decided."""
        n = min(n, len(self._sends))
        for _ in range(n):
            self._sends.pop()
        self._sends.extend([leaves_at] * n)

    def _room(self) -> bool:
        return self.ruleset2_may_hold < self.capacity

    @property
    def ruleset2_may_hold(self) -> int:
        """The most Ruleset 2 rules the switch may hold now: installed plus new adds in flight
        (the switch may apply them before their barrier reply reaches us)."""
        return len(self.installed) + self._new_inflight

    def _unblocked_adds(self) -> Iterable[int]:
        """Queued adds, except those to a port whose withdrawal is pending."""
        blocked = {self._ports[n] for n in (*self._withdrawals, *self._withdraw_inflight)}
        if not blocked:
            return self._adds
        return [h for h in self._adds if self._ports[self.book.owner(h)] not in blocked]

    def has_work(self) -> bool:
        """next_batch would send something, given budget."""
        if not self.connected or self._batch is not None:
            return False
        if self._withdrawals or self._statics or self._chains or (self._dels and self.synced):
            return True
        adds = self._unblocked_adds()
        return bool(adds) and (self._room() or any(h in self.installed for h in adds))

    def next_wakeup(self, now: float) -> Optional[float]:
        """When next_batch can next return something: `now`, a later time, or None (wait for a
        request, a connect or batch_done)."""
        if not self.has_work():
            return None
        if self.budget(now) > 0:
            return now
        t = now
        if self._tokens + 1e-9 < 1:
            t = max(t, now + (1 - self._tokens) / self.rate)
        excess = self._in_window() - self.window_cap
        if excess >= 0:
            t = max(t, next(x for i, x in enumerate(heapq.merge(self._sends, self._seeded)) if i == excess))
        return t

    # ------------------------------------------------------------------ Algorithm 1

    def next_batch(self, now: float) -> Batch:
        """Up to budget flow-mods: withdrawals, statics, Ruleset 3 (CHAIN), then adds while they
        fit in C, else deletes (those only once every cache node is synced)."""
        if not self.has_work():
            return Batch(epoch=self._epoch)
        budget = self.budget(now)
        batch = Batch(epoch=self._epoch)
        while self._withdrawals and len(batch) < budget:
            node = next(iter(self._withdrawals))
            port = self._ports[node]
            batch.mods.append(withdraw_flowmod(port))
            batch.items.append(_Item(WITHDRAW, port=port, seq=self._withdrawals.pop(node), node=node))
            self._withdraw_inflight.add(node)
        fenced = False  # the batch must end here (ingress.needs_barrier): the rest after its barrier
        while self._statics and len(batch) < budget:
            if batch.mods and needs_barrier(batch.mods[-1], self._statics[0]):
                fenced = True  # e.g. the meters before the flows that use them
                break
            fm = self._statics.popleft()
            batch.mods.append(fm)
            batch.items.append(_Item(STATIC))
        # Ruleset 3 before Ruleset 2: a wrong rule here costs a whole slot's availability.
        while not fenced and self._chains and len(batch) < budget:
            index = next(iter(self._chains))
            port = self.partitions.port(index)
            it = _Item(CHAIN, index, port, self._chains.pop(index))
            self._chain_inflight[index] = it
            batch.mods.append(self.partitions.flowmod(index, port))
            batch.items.append(it)
        if not fenced and len(batch) < budget and (self._adds or self._dels):
            adds = sorted(self._unblocked_adds(), key=lambda h: (-self._loads.get(h, 0.0), self._adds[h]))
            dels = iter(list(self._dels) if self.synced else [])
            ai = 0
            while len(batch) < budget:
                room = self._room()
                while ai < len(adds) and not room and adds[ai] not in self.installed:
                    ai += 1  # a new hash that does not fit; moves of held hashes still do
                if ai < len(adds):
                    h = adds[ai]
                    ai += 1
                    owner = self.book.owner(h)
                    port = self._ports[owner]
                    it = _Item(ADD_RULE, h, port, self._adds.pop(h), h not in self.installed)
                    self._new_inflight += it.new
                    self.ruleset2_peak = max(self.ruleset2_peak, self.ruleset2_may_hold)
                    fm = self.book.flowmod(h, port, ADD)
                else:
                    h = next(dels, None)
                    if h is None:
                        break
                    it = _Item(DEL_RULE, h, None, self._dels.pop(h))
                    fm = self.book.flowmod(h, None, DELETE_STRICT)
                self._inflight[h] = it
                batch.mods.append(fm)
                batch.items.append(it)
        if batch.mods:
            self._statics_inflight = sum(1 for it in batch.items if it.kind == STATIC)
            self.ruleset2_flow_mods_sent += sum(1 for it in batch.items if it.kind in (ADD_RULE, DEL_RULE, WITHDRAW))
            self._batch = batch
            self._sent(now, len(batch))
        return batch

    @staticmethod
    def ruleset2_kinds(batch: Batch) -> list[Optional[str]]:
        """Per flow-mod of `batch`: "add", "delete" or "withdraw" for a Ruleset 2 change, None for
        a static (flush, Ruleset 1, ARP) or a Ruleset 3 rule. What the app's journal records."""
        return [None if it.kind in (STATIC, CHAIN) else it.kind for it in batch.items]

    def batch_done(self, batch: Batch, errors: Optional[Mapping[int, str]] = None,
                   now: Optional[float] = None) -> None:
        """The barrier after `batch` came back at `now`; errors maps a mod's index in the batch to
        the switch's error text. A stale batch (from before a reconnect) is ignored. With `now`,
        the batch leaves the rate window 1 s (+ CLOCK_RESOLUTION_S) after it (module docstring, "Rate")."""
        if batch is not self._batch or batch.epoch != self._epoch:
            return
        if now is not None:
            self._restamp(len(batch), now + 1.0 + CLOCK_RESOLUTION_S)
        errors = errors or {}
        self._batch = None
        self._new_inflight = 0
        self._statics_inflight = 0
        for i, it in enumerate(batch.items):
            why = errors.get(i)
            if why is not None:
                self.flow_mods_refused += 1
            if it.kind == STATIC:
                continue
            if it.kind == CHAIN:
                self._chain_inflight.pop(it.khash, None)
                if why is None:
                    self.partitions_installed[it.khash] = it.port
                else:
                    # What the switch holds is unknown; the book cannot drop a slot, so it is sent
                    # again (paced like everything else).
                    self.ruleset3_refused += 1
                    self.partitions_installed.pop(it.khash, None)
                self._reconcile_chain(it.khash)
                continue
            if it.kind == WITHDRAW:
                self._withdraw_inflight.discard(it.node)
                if why is not None:
                    # The node's rules may still be on the switch: withdraw again (next batch).
                    self._withdrawals.setdefault(it.node, self._next_seq())
                    continue
                gone = [h for h, p in self.installed.items() if p == it.port]
                for h in gone:
                    del self.installed[h]
                for h in gone:
                    self._reconcile(h)
                self._withdrawn_done.append(it.node)
                continue
            h = it.khash
            self._inflight.pop(h, None)
            if it.kind == ADD_RULE:
                if why is None:
                    self.installed[h] = it.port
                else:
                    self._refused(h, why)
            else:
                # A failed delete leaves the switch state unknown; retrying forever would eat R.
                self.installed.pop(h, None)
                if why is not None:
                    self._fail_tickets(h, f"switch refused delete: {why}")
            self._reconcile(h)

    def batch_failed(self, batch: Batch, now: Optional[float] = None) -> None:
        """No barrier reply (timeout or disconnect) by `now`: everything in the batch goes back.
        Its flow-mods may still reach the switch, so they count until now + window_s."""
        if batch is not self._batch or batch.epoch != self._epoch:
            return
        if now is not None:
            self._restamp(len(batch), now + self.window_s)
        statics = [fm for fm, it in zip(batch.mods, batch.items) if it.kind == STATIC]
        self._abandon_batch()
        self._statics.extendleft(reversed(statics))

    def _refused(self, h: int, why: str) -> None:
        owner = self.book.owner(h)
        self.book.restore({h: None})
        self._dirty((h,))
        self._loads.pop(h, None)
        self._fail_tickets(h, f"switch refused add to {owner}: {why}")

    def _fail_tickets(self, h: int, why: str) -> None:
        for t in list(self._tickets):
            if h in t.hashes:
                t.errors[h] = why

    # ------------------------------------------------------------------ metrics

    def metrics(self, now: float) -> dict[str, float]:
        self._refill(now)
        return {
            "rule_adds_queued": len(self._adds),
            "rule_deletes_queued": len(self._dels),
            "ruleset2_desired": len(self.book),
            "ruleset2_installed": len(self.installed),
            "ruleset2_max": self.ruleset2_peak,
            "ruleset2_capacity": self.capacity,
            "rule_updates_last_1s": self._in_window(),
            "rule_updates_per_s_max": self.max_per_s,
            "flow_mods_sent": self.flow_mods_sent,
            "ruleset2_flow_mods_sent": self.ruleset2_flow_mods_sent,
            "fault_no_rate_limit": int(self.fault == FAULT_NO_RATE_LIMIT),
            "flow_mods_in_flight": len(self._batch) if self._batch else 0,
            "flow_mods_refused": self.flow_mods_refused,
            # Ruleset 3 is no static any more, but until its book moves it is what the statics
            # were: every rule of it queued or in flight counts here.
            "static_pending": len(self._statics) + self._statics_inflight + len(self._chains)
            + len(self._chain_inflight),
            "withdrawals_queued": len(self._withdrawals) + len(self._withdraw_inflight),
            "cache_nodes_unsynced": len(self._unsynced),
            "rule_deletes_held": 0 if self.synced else len(self._dels),
            "book_sync_corrections": self.book_sync_corrections,
        }
