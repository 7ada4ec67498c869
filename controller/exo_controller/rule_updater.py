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
* Statics (flush, Ruleset 1, ARP, Ruleset 3) go first after every (re)connect. The flush empties
  Ruleset 2 as well, so `installed` restarts empty and every desired rule is simply back in the
  add queue, hottest first and within C, right behind the statics.
* Rate: a sliding window (at most floor(R), at least 1, sends in any half-open 1 s window) is the
  hard guarantee; a token bucket with a burst of max(1, R/10) paces it, so a backlog leaves as a
  steady stream of small batches instead of R flow-mods at the start of every second.
* A switch refusal of an add (OFPFMFC_TABLE_FULL from OVS flow_limit, like a full hardware table)
  drops that hash from the desired book, otherwise it would be retried forever; any waiter is told.
"""
from __future__ import annotations

import math
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

from .flows import (ADD, DELETE_STRICT, HASH_MASK, CacheRule, CacheRuleBook, FlowMod, cache_flowmod,
                    flush_flowmod, static_flowmods)

STATIC, ADD_RULE, DEL_RULE = "static", "add", "delete"


@dataclass(frozen=True)
class _Item:
    kind: str                   # STATIC, ADD_RULE or DEL_RULE
    khash: Optional[int] = None
    port: Optional[int] = None  # ADD_RULE: the port it installs
    seq: int = 0                # queue position to restore if the batch fails
    new: bool = False           # ADD_RULE of a hash not installed (takes a slot of C)


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

    @property
    def error(self) -> str:
        return "; ".join(f"{r.key_hash:#012x}@{r.cache_node}: {why}" for r, why in self.rejected)


class RuleUpdater:
    """Desired vs installed Ruleset 2, the add/delete queues, statics, and the rate limiter."""

    def __init__(self, ports: Mapping[str, int], capacity: int, rate: float,
                 statics: Sequence[FlowMod] = (), burst: Optional[float] = None):
        self.capacity = capacity
        self.rate = float(rate)
        self.window_cap = max(1, math.floor(self.rate))
        self.burst = max(1.0, self.rate / 10) if burst is None else max(1.0, float(burst))
        self._ports = dict(ports)
        self._statics_template = [flush_flowmod(), *statics]
        self.book = CacheRuleBook(self._ports, capacity)   # desired
        self.installed: dict[int, int] = {}                # hash -> port, barrier-confirmed
        self._loads: dict[int, float] = {}
        self._adds: dict[int, int] = {}                    # hash -> seq (FIFO tie-break)
        self._dels: dict[int, int] = {}                    # hash -> seq (insertion order = FIFO)
        self._inflight: dict[int, _Item] = {}              # hash -> its flow-mod in flight
        self._new_inflight = 0                             # ADD_RULE items with new=True in flight
        self._statics: deque[FlowMod] = deque()
        self._statics_inflight = 0
        self._batch: Optional[Batch] = None
        self._epoch = 0
        self._seq = 0
        self.connected = False
        self._tickets: "weakref.WeakSet[Ticket]" = weakref.WeakSet()
        # rate limiter
        self._sends: deque[float] = deque()                # send times within the last 1 s
        self._tokens = self.burst
        self._tokens_at: Optional[float] = None
        self.flow_mods_sent = 0
        self.flow_mods_refused = 0
        self.max_per_s = 0
        # Largest Ruleset 2 the switch may have held: installed plus new adds in flight (the
        # switch may apply them before their barrier reply reaches us).
        self.ruleset2_peak = 0

    @classmethod
    def from_config(cls, cfg) -> "RuleUpdater":
        sw = cfg.switch
        return cls({c.name: c.switch_port for c in cfg.cache_nodes}, sw.cache_rule_capacity,
                   sw.rule_update_rate, static_flowmods(cfg))

    # ------------------------------------------------------------------ requests

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

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
        if want is None and have is not None:
            self._dels.setdefault(h, self._next_seq())
        else:
            self._dels.pop(h, None)

    def _track(self, res, rules: list[CacheRule]) -> UpdateResult:
        bad = {id(r) for r, _ in res.rejected}
        hashes = frozenset(r.key_hash & HASH_MASK for r in rules if id(r) not in bad)
        ticket = Ticket(hashes)
        self._tickets.add(ticket)
        for h in hashes:
            self._reconcile(h)
        return UpdateResult(res.accepted, list(res.rejected), ticket)

    def add(self, rules: Iterable[CacheRule], loads: Optional[Iterable[float]] = None) -> UpdateResult:
        """Add references to the desired book; `loads` (parallel to rules) orders the add queue."""
        rules = list(rules)
        loads = list(loads) if loads is not None else [0.0] * len(rules)
        if len(loads) != len(rules):
            raise ValueError(f"{len(loads)} loads for {len(rules)} rules")
        res = self.book.add(rules)
        bad = {id(r) for r, _ in res.rejected}
        for r, load in zip(rules, loads):
            h = r.key_hash & HASH_MASK
            if id(r) not in bad:
                self._loads[h] = max(self._loads.get(h, 0.0), float(load or 0.0))
        return self._track(res, rules)

    def remove(self, rules: Iterable[CacheRule]) -> UpdateResult:
        rules = list(rules)
        return self._track(self.book.remove(rules), rules)

    def pending(self, h: int) -> bool:
        h &= HASH_MASK
        return h in self._adds or h in self._dels or h in self._inflight

    def settled(self, ticket: Ticket) -> bool:
        """True once none of the ticket's hashes is queued or in flight (see ticket.errors)."""
        return not any(self.pending(h) for h in ticket.hashes)

    # ------------------------------------------------------------------ switch connection

    def switch_connected(self) -> None:
        """A (re)connected switch: flush and statics first; every desired rule is re-added."""
        self._epoch += 1
        self._abandon_batch()
        self.connected = True
        self._statics = deque(self._statics_template)
        old = set(self.installed) | set(self._dels)
        self.installed = {}
        self._dels.clear()
        for h in old | set(self._adds) | set(self.book.hashes()):
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
        items = [it for it in batch.items if it.kind != STATIC]
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
        """Connected and every static flow-mod barrier-confirmed."""
        return self.connected and not self._statics and not self._statics_inflight

    # ------------------------------------------------------------------ rate limiter

    def _refill(self, now: float) -> None:
        if self._tokens_at is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._tokens_at) * self.rate)
        self._tokens_at = now
        while self._sends and self._sends[0] + 1.0 <= now:
            self._sends.popleft()

    def budget(self, now: float) -> int:
        self._refill(now)
        return max(0, min(math.floor(self._tokens + 1e-9), self.window_cap - len(self._sends)))

    def _sent(self, now: float, n: int) -> None:
        self._tokens -= n
        self._sends.extend([now] * n)
        self.flow_mods_sent += n
        self.max_per_s = max(self.max_per_s, len(self._sends))

    def _room(self) -> bool:
        return len(self.installed) + self._new_inflight < self.capacity

    def has_work(self) -> bool:
        """next_batch would send something, given budget."""
        if not self.connected or self._batch is not None:
            return False
        if self._statics or self._dels:
            return True
        return bool(self._adds) and (self._room() or any(h in self.installed for h in self._adds))

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
        excess = len(self._sends) - self.window_cap
        if excess >= 0:
            t = max(t, self._sends[excess] + 1.0)
        return t

    # ------------------------------------------------------------------ Algorithm 1

    def next_batch(self, now: float) -> Batch:
        """Up to budget flow-mods: statics, then adds while they fit in C, else deletes."""
        if not self.has_work():
            return Batch(epoch=self._epoch)
        budget = self.budget(now)
        batch = Batch(epoch=self._epoch)
        while self._statics and len(batch) < budget:
            fm = self._statics.popleft()
            batch.mods.append(fm)
            batch.items.append(_Item(STATIC))
        if len(batch) < budget and (self._adds or self._dels):
            adds = sorted(self._adds, key=lambda h: (-self._loads.get(h, 0.0), self._adds[h]))
            dels = iter(list(self._dels))
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
                    self.ruleset2_peak = max(self.ruleset2_peak, len(self.installed) + self._new_inflight)
                    fm = cache_flowmod(h, port, ADD)
                else:
                    h = next(dels, None)
                    if h is None:
                        break
                    it = _Item(DEL_RULE, h, None, self._dels.pop(h))
                    fm = cache_flowmod(h, None, DELETE_STRICT)
                self._inflight[h] = it
                batch.mods.append(fm)
                batch.items.append(it)
        if batch.mods:
            self._statics_inflight = sum(1 for it in batch.items if it.kind == STATIC)
            self._batch = batch
            self._sent(now, len(batch))
        return batch

    def batch_done(self, batch: Batch, errors: Optional[Mapping[int, str]] = None) -> None:
        """The barrier after `batch` came back; errors maps a mod's index in the batch to the
        switch's error text. A stale batch (from before a reconnect) is ignored."""
        if batch is not self._batch or batch.epoch != self._epoch:
            return
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

    def batch_failed(self, batch: Batch) -> None:
        """No barrier reply (timeout or disconnect): everything in the batch goes back."""
        if batch is not self._batch or batch.epoch != self._epoch:
            return
        statics = [fm for fm, it in zip(batch.mods, batch.items) if it.kind == STATIC]
        self._abandon_batch()
        self._statics.extendleft(reversed(statics))

    def _refused(self, h: int, why: str) -> None:
        owner = self.book.owner(h)
        self.book.restore({h: None})
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
            "rule_updates_last_1s": len(self._sends),
            "rule_updates_per_s_max": self.max_per_s,
            "flow_mods_sent": self.flow_mods_sent,
            "flow_mods_in_flight": len(self._batch) if self._batch else 0,
            "flow_mods_refused": self.flow_mods_refused,
            "static_pending": len(self._statics) + self._statics_inflight,
        }
