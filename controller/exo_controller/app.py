"""The thin os-ken app (OpenFlow 1.3): sends the flow-mods that rule_updater.py decides.

Threads: os-ken runs the event handlers on one event-loop thread; gRPC worker threads call
add_cache_rules / remove_cache_rules / list_flows / stats; one sender thread (`exo-rule-sender`)
sends every flow-mod. `self._lock` (with `self._cond` on it) serialises everything that touches
the updater, the datapath handle, xid allocation and the waiter tables. Datapath.send_msg is
thread-safe in the native hub (it only serialises the message and puts the bytes on a
queue.Queue drained by the datapath's send thread); its xid counter is not atomic, so we only
call it under our lock (os-ken's own echo loop may still race it, which at worst duplicates an
echo xid: harmless, we match replies by type and xid).

Why one sender thread: the switch takes at most R flow-mods in any second
(switch.rule_update_rate), and that must hold for everything we send, the static rules of a
(re)connect included. So requests only change the updater's desired rules, and the sender
alone turns them into batches (RuleUpdater.next_batch), each followed by a barrier. It waits
for the barrier *outside* the lock, so the event-loop thread that delivers the reply is never
blocked, and gRPC callers that wait for confirmation (Condition on the lock) never hold it.

A caller that stops waiting (timeout, disconnect) does not roll anything back: its change stays
in the desired rules and reaches the switch later (after a reconnect, with the re-programming).
Rolling back would race the sender and, for refcounted rules, could not be retried safely.

Switch (re)connect: nothing is sent until the sender thread has read the switch's table back
(multipart flow stats; it cannot be the os-ken thread, which delivers the reply). If table 0,
Ruleset 1 and ARP on the switch are exactly ours and its Rulesets 2 and 3 well-formed, the flows
stay and the switch's Rulesets 2 and 3 are taken as installed (flows.plan_table): a Ruleset 3
rule that points elsewhere is repointed, never flushed. Otherwise flush and program from
scratch. So a restarted controller does not disturb a switch that kept forwarding (fail mode
secure). Ruleset 3 follows the chain table (apply_chains, move_slot; flows.PartitionBook).

Journal (rule_journal.py, optional): every Ruleset 2 flow-mod with its xid, written as it is
handed to the connection, and the most Ruleset 2 rules the switch may hold after every change,
so a harness can take a run's own figures and match them against the switch's record.

Cache node liveness (monitor.py, liveness.py): the monitor calls withdraw_cache_node,
rejoin_cache_node and sync_cache_node; the app tells it about port changes and, after the lock
is released, about withdrawals the switch confirmed.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from . import ingress
from .flows import RULESET_INGRESS, RULESETS, CacheRule, FlowMod, TablePlan, cookie_filter, plan_table, static_mods
from .ofp_translate import FlowInfo, error_text, from_stats, meter_drops, meter_from_config, to_ofp
from .rule_journal import Ruleset2Journal
from .rule_updater import Batch, RuleUpdater, UpdateResult
from .leadership import MASTER, SLAVE, Leadership, Resign, RevokeLeader, SendRoleRequest, StartAdopting, StopSending

LOG = logging.getLogger("exo_controller")
DEFAULT_WAIT = 60.0  # longest a caller waits for its rules to be confirmed
TABLE_READ_ATTEMPTS = 3  # flow-stats reads of a newly connected switch before flushing it anyway


class SwitchError(RuntimeError):
    """The switch answered a request with an OpenFlow error."""


class SwitchNotConnected(SwitchError):
    pass


class SwitchTimeout(SwitchError):
    pass


class StateNotStored(SwitchError):
    """With controller.etcd: the desired state could not be written to etcd (book_store.py,
    ratewin_store.py), so the change was not made (etcd unreachable, or no longer master)."""


@dataclass
class _Waiter:
    """One outstanding barrier or multipart request."""
    done: threading.Event = field(default_factory=threading.Event)
    stats: list = field(default_factory=list)
    failure: Optional[str] = None  # error reply to the request itself, or disconnect
    disconnected: bool = False
    mod_errors: dict[int, str] = field(default_factory=dict)  # index in the batch -> switch error
    mod_xids: list[int] = field(default_factory=list)


@dataclass
class RulesOutcome:
    accepted: int
    rejected: int
    error: str = ""
    full_key_hashes: list[int] = field(default_factory=list)  # of rejected: Ruleset 2 was full; may be resent


@dataclass
class ChainOutcome:
    """What apply_chains / move_slot did: Ruleset 3 rules repointed (one flow-mod each), whether
    the switch has confirmed them all, and why not."""
    rules_changed: int
    confirmed: bool
    note: str = ""


class ExoControllerApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofp.OFP_VERSION]

    def __init__(self, *args, exo_config=None, barrier_timeout: float = 2.0, clock=time.monotonic,
                 monitor_factory=None, journal: Optional[Ruleset2Journal] = None, fault: Optional[str] = None,
                 ingress_poll_s: Optional[float] = None,
                 tls_handshake_refused: Optional[Callable[[], int]] = None, **kwargs):
        """monitor_factory(app) -> monitor.ClusterMonitor (main.py passes one over gRPC). None:
        no cache node liveness (unit tests of the switch side); every node then counts as synced.
        journal: where to record Ruleset 2 (None: nowhere). fault: a known-bad mode for tests
        (rule_updater.FAULTS), never for a deployment. ingress_poll_s: how often to read table 0's
        drop counts and the meters' drops back into Stats (ingress.counters); None: never.
        tls_handshake_refused: reads the count of TLS handshakes gRPC refused
        (grpc_handshake_counter.py) for Stats; None: 0 (insecure_dev_mode, unit tests)."""
        # Failover (leadership.py; failover.py carries out its etcd actions): None is one
        # controller without etcd, which adopts every connection at once as before.
        self.leadership: Leadership = kwargs.pop("leadership", None) or Leadership("controller", single=True)
        self.failover = None  # set by main.py when controller.etcd is configured
        # The desired state in etcd (failover.Failover sets them; None without controller.etcd):
        # the Ruleset 2 book (book_store.py) and the rate-window record (ratewin_store.py).
        self.book_store = None
        self.ratewin_store = None
        self._role_at_wall: Optional[float] = None  # time.time() of the last StartAdopting
        self._standby_writes = kwargs.pop("standby_writes", False)  # TESTS ONLY: the IS_SLAVE known-bad
        super().__init__(*args, **kwargs)
        if exo_config is None:
            raise ValueError("ExoControllerApp needs exo_config= (start it with exo_controller.main)")
        self.cfg = exo_config
        self.dpid = exo_config.switch.dpid
        self.barrier_timeout = barrier_timeout
        self.clock = clock
        self.updater = RuleUpdater.from_config(exo_config, fault=fault)
        self.journal = journal
        if journal is not None:
            journal.start(exo_config.switch.rule_update_rate, exo_config.switch.cache_rule_capacity, fault)
        # meters + every static flow (tables 0 and 1); its Ruleset 3 only gives plan_table the layout
        self._statics = static_mods(exo_config)
        self._cache_ports = {c.switch_port for c in exo_config.cache_nodes}
        self._db_ports = {d.name: d.switch_port for d in exo_config.db_nodes}
        self._table_pending = None  # the datapath whose table the sender must read first
        self._table_attempts = 0
        self.counters: collections.Counter[str] = collections.Counter()
        # Refusals (docs/security.md) are reported from the start, 0 included: a reader compares them.
        self.counters.update({"rpc_refused": 0, "openflow_refused": 0, "tls_handshake_refused": 0})
        self._tls_handshake_refused = tls_handshake_refused
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._dp = None
        self._ever_connected = False
        self._disconnects = 0
        self._stopping = False
        self._waiters: dict[int, _Waiter] = {}     # xid of barrier / stats request -> waiter
        self._mod_xids: dict[int, tuple[_Waiter, int, FlowMod]] = {}  # flow-mod xid -> (barrier waiter, index, mod)
        self.connected = threading.Event()  # set once the static rules are barrier-confirmed
        self.monitor = None
        self.chains = None  # chain_exec.ChainExecutor at replication.factor > 1 (main.py sets it)
        if monitor_factory is not None:
            # A fresh controller's book is empty: rebuild it from the cache nodes before deleting.
            self.updater.expect_sync(c.name for c in exo_config.cache_nodes)
            self.monitor = monitor_factory(self)
        self._ingress: dict[str, float] = {}  # the last read of table 0's counters (ingress.counters)
        self._sender = threading.Thread(target=self._send_loop, daemon=True, name="exo-rule-sender")
        self._sender.start()
        if ingress_poll_s:
            threading.Thread(target=self._ingress_poll_loop, args=(ingress_poll_s,), daemon=True,
                             name="exo-ingress-poll").start()
        # With failover the heartbeats start when this instance first becomes master: a standby's
        # liveness view could only go stale (it cannot withdraw rules), and a new master starts
        # like a restarted controller: every cache node UP and unsynced (replication.md, 5.4).
        self._monitor_started = False
        if self.monitor is not None and self.leadership.single:
            self._monitor_started = True
            self.monitor.start()

    @property
    def book(self):
        """The desired Ruleset 2 (refcounted CacheRuleBook)."""
        return self.updater.book

    def stop(self):
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self.monitor is not None:
            self.monitor.stop()
        if self.chains is not None:
            self.chains.stop()
        if self.journal is not None:
            with self._lock:
                self.journal.close()
        super().stop()

    # ------------------------------------------------------------------ sending (lock held)

    def _require_dp(self):
        if self._dp is None:
            raise SwitchNotConnected(f"switch dpid {self.dpid:#x} is not connected to the controller")
        return self._dp

    def _send(self, dp, msg, register=None) -> int:
        """Give msg an xid, let `register(xid)` record it (before any reply can arrive), send."""
        xid = dp.set_xid(msg)
        if register is not None:
            register(xid)
        if not dp.send_msg(msg):
            raise SwitchNotConnected(f"switch dpid {self.dpid:#x} is disconnecting")
        return xid

    def _send_mods_and_barrier(self, dp, mods: Iterable[FlowMod],
                               kinds: Optional[list[Optional[str]]] = None) -> _Waiter:
        """kinds (RuleUpdater.ruleset2_kinds): which mods the journal records."""
        waiter = _Waiter()

        def reg_mod(i, fm):
            def reg(xid):
                self._mod_xids[xid] = (waiter, i, fm)
                waiter.mod_xids.append(xid)
            return reg

        def reg_barrier(xid):
            self._waiters[xid] = waiter

        try:
            for i, fm in enumerate(mods):
                xid = self._send(dp, to_ofp(dp, fm), reg_mod(i, fm))
                if self.journal is not None and kinds is not None and kinds[i] is not None:
                    self.journal.sent(fm, kinds[i], xid)
            self._send(dp, parser.OFPBarrierRequest(dp), reg_barrier)
        except SwitchNotConnected:
            self._forget(waiter)
            raise
        return waiter

    def _forget(self, waiter: _Waiter) -> None:
        for xid in waiter.mod_xids:
            self._mod_xids.pop(xid, None)
        for xid in [x for x, w in self._waiters.items() if w is waiter]:
            del self._waiters[xid]

    # ------------------------------------------------------------------ the sender thread

    def _send_loop(self) -> None:
        while not self._stopping:
            try:
                self._send_one()
            except SwitchNotConnected as err:
                LOG.warning("rule sender: %s; the batch goes back to the queue", err)
            except StateNotStored as err:
                LOG.warning("rule sender: %s; the batch goes back to the queue", err)
                time.sleep(0.1)
            except Exception:  # noqa: BLE001 - a dead sender would silently stop every rule update
                LOG.exception("rule sender failed; retrying")
                time.sleep(0.1)

    def _send_one(self) -> None:
        """Wait for a due batch, send it with a barrier, wait for the barrier, report back.
        A newly connected switch's table is read first (_adopt_table)."""
        with self._cond:
            while True:
                if self._stopping:
                    return
                now = self.clock()
                dp = self._dp if self.leadership.is_master() else None  # a standby never writes
                if dp is not None and self._table_pending is dp:
                    break
                wake = self.updater.next_wakeup(now) if dp is not None else None
                if wake is not None and wake <= now:
                    batch = self.updater.next_batch(now)
                    if batch.mods:
                        break
                self._cond.wait(None if wake is None else max(0.001, wake - now))
            if self._table_pending is dp:
                batch = None
            else:
                self._record_batch(batch)  # with etcd: (decided_at, n) before it leaves (ratewin_store.py)
                try:
                    waiter = self._send_mods_and_barrier(dp, batch.mods, self.updater.ruleset2_kinds(batch))
                except Exception:
                    self.updater.batch_failed(batch, self.clock())
                    if self.journal is not None:
                        self.journal.abandoned()
                    self._journal_size()
                    raise
                self.updater.mark_sent(batch, self.clock())
                self._journal_size()
        if batch is None:
            self._adopt_table(dp)
            return
        ok = waiter.done.wait(self.barrier_timeout)
        with self._cond:
            self._forget(waiter)
            self._finish(dp, batch, waiter, ok)
            self._journal_size()
            self._cond.notify_all()
            withdrawn = self.updater.pop_withdrawn()
        # Outside our lock: the monitor takes its own lock, then ours (monitor.py).
        for node in withdrawn:
            LOG.debug("cache node %s: withdrawal of its Ruleset 2 rules confirmed by the switch", node)
            if self.monitor is not None:
                self.monitor.withdrawn(node)

    def _adopt_table(self, dp) -> None:
        """Read the newly connected switch's table (sender thread, no lock held while waiting),
        then keep it or flush it (flows.plan_table) and start sending."""
        flows, meters, why = None, None, ""
        try:
            flows = self._flow_stats(dp, 0, 0)
            if any(isinstance(m, ingress.MeterMod) for m in self._statics):
                meters = [meter_from_config(m) for m in self._multipart(dp, parser.OFPMeterConfigStatsRequest(dp))]
        except SwitchError as err:
            flows, why = None, str(err)
        with self._cond:
            if self._dp is not dp or self._table_pending is not dp:
                return  # disconnected or replaced meanwhile
            if not self._load_desired_state():
                return  # etcd did not answer: the sender tries the adoption again
            if flows is None:
                self._table_attempts += 1
                self._count("table_read_failures")
                if self._table_attempts < TABLE_READ_ATTEMPTS:
                    LOG.warning("switch dpid %#x: reading its flow table failed (%s); trying again", self.dpid, why)
                    return
                plan = TablePlan(False, why=f"its flow table could not be read ({why})")
            else:
                plan = plan_table(flows, self._statics, self._cache_ports, self.cfg.switch.cache_match, meters,
                                  self._db_ports.values())
            self._table_pending = None
            if plan.adopt:
                self.updater.switch_connected(plan.installed, plan.partitions,
                                              keep_partitions=self.chains is not None)
                if self.chains is not None:
                    self.chains.reapply_rules()  # the live chain table over the switch's rules
            else:
                self.updater.switch_connected(None)
            self._journal_size()
            if plan.adopt:
                self._count("switch_tables_kept")
                m = self.updater.metrics(self.clock())
                LOG.info("switch dpid %#x: its static flows are ours; keeping its flows (%d Ruleset 2 rules "
                         "adopted, %d desired; %d adds and %d deletes queued%s; %d Ruleset 3 rules adopted, %d "
                         "to (re)send)", self.dpid, len(plan.installed),
                         len(self.updater.book), m["rule_adds_queued"], m["rule_deletes_queued"],
                         "" if self.updater.synced else ", deletes held until every cache node is synced",
                         len(plan.partitions), m["static_pending"])
            else:
                self._count("switch_tables_flushed")
                LOG.info("switch dpid %#x: flushing and programming it from scratch: %s", self.dpid,
                         plan.why or "its table is not ours")
            self._check_programmed(dp)
            self._cond.notify_all()

    def _finish(self, dp, batch: Batch, waiter: _Waiter, ok: bool) -> None:
        if not ok or waiter.failure:
            why = waiter.failure or f"no barrier reply within {self.barrier_timeout:g}s"
            if not waiter.disconnected:
                LOG.error("switch dpid %#x: %d flow-mods not confirmed (%s); will resend", self.dpid,
                          len(batch), why)
                self._count("batches_failed")
            self.updater.batch_failed(batch, self.clock())
            self._record_batch_end(False)
            if self.journal is not None:
                self.journal.abandoned()
            return
        if self.journal is not None:
            self.journal.confirmed()
        for i, why in sorted(waiter.mod_errors.items()):
            LOG.error("switch refused %s: %s", batch.mods[i], why)
        self.updater.batch_done(batch, waiter.mod_errors, self.clock())
        self._record_batch_end(True)
        if self.updater.book_dirty:  # a refused add left the book
            self._store_book_quietly("a refused add")
        self._check_programmed(dp)

    # ------------------------------------------------------------------ desired state in etcd

    def attach_stores(self, book_store, ratewin_store) -> None:
        """failover.Failover, with controller.etcd: keep the book and the rate window there."""
        with self._lock:
            self.book_store, self.ratewin_store = book_store, ratewin_store
            self.updater.book_tracking = True

    def _load_desired_state(self) -> bool:
        """Lock held, a new master adopting the switch (docs/design/replication.md, 5.4 step 2):
        the book from etcd (exact refcounts at once) and the rate window seeded from the record
        of the old master's last second. False when etcd did not answer. Without etcd: True."""
        if self.book_store is None:
            return True
        try:
            self._ensure_book()
            self._seed_rate_window()
        except (StateNotStored, ValueError) as err:
            self._count("desired_state_load_failures")
            LOG.error("switch dpid %#x: cannot adopt yet: %s", self.dpid, err)
            time.sleep(0.1)  # lock held briefly: nothing may be sent before this succeeds anyway
            return False
        return True

    def _ensure_book(self) -> None:
        """Lock held. Load etcd's book once per election term (before the first change of it)."""
        from .book_store import BookStoreError
        gen = self.leadership.generation
        if self.book_store is None or self.book_store.loaded_generation == gen:
            return
        try:
            refs = self.book_store.load(gen)
        except BookStoreError as err:
            raise StateNotStored(str(err)) from err
        self.updater.load_book(refs)
        LOG.info("Ruleset 2 book loaded from etcd: %d rules, %d references", len(refs),
                 sum(sum(n.values()) for n in refs.values()))

    def _ensure_book_quietly(self, what: str) -> None:
        """Lock held. Before a change nobody waits on (a sync, a withdrawal): load etcd's book if
        not yet; if etcd does not answer, the change is made to the book in memory (a later load
        replaces it: the rare loss is what ListKeys reconciliation exists for)."""
        try:
            self._ensure_book()
        except StateNotStored as err:
            self._count("desired_state_load_failures")
            LOG.warning("%s before the Ruleset 2 book was loaded from etcd: %s", what, err)

    def _seed_rate_window(self) -> None:
        """Lock held. The old master's flow-mods count against R here too (ratewin_store.py)."""
        from exo_common.etcd import EtcdError
        from .ratewin_store import seed_leave_times
        now_wall, now = time.time(), self.clock()
        role_at = self._role_at_wall if self._role_at_wall is not None else now_wall
        try:
            record = self.ratewin_store.load()
        except EtcdError as err:
            raise StateNotStored(f"reading the rate-window record: {err}") from err
        leave = seed_leave_times(record, role_at, self.updater.window_cap)
        self.updater.seed_window(now + (t - now_wall) for t in leave)
        self.ratewin_store.reset(record, now_wall)
        LOG.info("rate window seeded with %d flow-mods of the previous master (%s)", len(leave),
                 "no record: a full window" if record is None else f"{len(record)} batches recorded")

    def _store_book(self) -> None:
        """Lock held. Write the book's changed hashes to etcd; StateNotStored if that failed."""
        from .book_store import BookStoreError
        if self.book_store is None:
            self.updater.book_dirty.clear()
            return
        self._ensure_book()
        try:
            self.book_store.write(self.updater.book, self.updater.book_dirty)
        except BookStoreError as err:
            self._count("book_store_failures")
            raise StateNotStored(str(err)) from err
        self.updater.book_dirty.clear()

    def _store_book_quietly(self, what: str) -> None:
        """For changes nobody waits on (a refusal, a sync, a withdrawal): a failed write stays
        dirty and goes with the next one."""
        try:
            self._store_book()
        except StateNotStored as err:
            LOG.warning("Ruleset 2 book after %s not written to etcd yet: %s", what, err)

    def _record_batch(self, batch: Batch) -> None:
        """Lock held, sender thread: before `batch` leaves, record it (ratewin_store.py)."""
        from .ratewin_store import RateWindowStoreError
        if self.ratewin_store is None:
            return
        try:
            self.ratewin_store.decided(time.time(), len(batch))
        except RateWindowStoreError as err:
            self._count("ratewin_store_failures")
            self.updater.batch_failed(batch)
            raise StateNotStored(str(err)) from err

    def _record_batch_end(self, confirmed: bool) -> None:
        from .ratewin_store import RateWindowStoreError
        if self.ratewin_store is None:
            return
        try:
            self.ratewin_store.finished(time.time(), confirmed)
        except RateWindowStoreError as err:
            # The record keeps the batch unconfirmed: a new master counts it until its role_at + 1 s.
            self._count("ratewin_store_failures")
            LOG.warning("%s", err)

    def _journal_size(self) -> None:
        if self.journal is not None:
            self.journal.size(self.updater.ruleset2_may_hold)

    def _check_programmed(self, dp) -> None:
        if self._dp is dp and self.updater.programmed and not self.connected.is_set():
            LOG.info("switch dpid %#x programmed (Ruleset 1+ARP, Ruleset 3 x%d; %d Ruleset 2 rules desired, "
                     "%d installed)", self.dpid, len(self.updater.partitions.indices()), len(self.updater.book),
                     len(self.updater.installed))
            self.connected.set()

    # ------------------------------------------------------------------ switch events

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _switch_features(self, ev):
        dp = ev.msg.datapath
        if dp.id != self.dpid:
            LOG.warning("ignoring switch dpid %#x (configured dpid is %#x)", dp.id, self.dpid)
            return
        with self._cond:
            if self._dp is not None and self._dp is not dp:
                LOG.warning("switch dpid %#x reconnected; replacing the old connection", dp.id)
                self._fail_all("switch reconnected")
                self._disconnects += 1
            self._dp = dp
            self._ever_connected = True
            self.connected.clear()
            # Nothing goes out until the sender has read the switch's table: it keeps the flows
            # if the statics are ours, else flushes; then the difference to the desired rules,
            # all paced at switch.rule_update_rate. With failover, the connection is made SLAVE
            # first and the table is read only once the switch confirmed us MASTER (leadership.py).
            self.updater.switch_disconnected()
            self._table_pending = None
            self._apply_leadership(self.leadership.switch_connected(self.clock()))
            self._cond.notify_all()
        LOG.info("switch dpid %#x connected from %s: reading its flow table (%d Ruleset 2 rules desired)",
                 dp.id, dp.address, len(self.updater.book))
        self._count("switch_connects")

    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev):
        if ev.state == DEAD_DISPATCHER:
            with self._cond:
                if ev.datapath is self._dp:
                    LOG.warning("switch dpid %#x disconnected", self.dpid)
                    self._dp = None
                    self._table_pending = None
                    self.connected.clear()
                    self._count("switch_disconnects")
                    self._disconnects += 1
                    self._fail_all("switch disconnected")
                    self.updater.switch_disconnected()
                    self._apply_leadership(self.leadership.switch_disconnected(self.clock()))
                    self._cond.notify_all()

    def _fail_all(self, why: str) -> None:
        for w in list(self._waiters.values()):
            w.failure = why
            w.disconnected = True
            w.done.set()
        self._waiters.clear()
        self._mod_xids.clear()

    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _barrier_reply(self, ev):
        with self._lock:
            waiter = self._waiters.pop(ev.msg.xid, None)
        if waiter is not None:
            waiter.done.set()

    @set_ev_cls(ofp_event.EventOFPMeterConfigStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _meter_config_reply(self, ev):
        self._flow_stats_reply(ev)  # a multipart reply like any other (ingress.py's meters)

    @set_ev_cls(ofp_event.EventOFPMeterStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _meter_stats_reply(self, ev):
        self._flow_stats_reply(ev)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _flow_stats_reply(self, ev):
        """Any multipart reply: its parts go to the waiter of its xid (_multipart)."""
        msg = ev.msg
        with self._lock:
            waiter = self._waiters.get(msg.xid)
            if waiter is None:
                return
            waiter.stats.extend(msg.body)
            if not msg.flags & ofp.OFPMPF_REPLY_MORE:
                del self._waiters[msg.xid]
                waiter.done.set()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        msg = ev.msg
        text = error_text(msg)
        self._count("ofp_errors")
        self._count(f"ofp_error {text}")
        if msg.type == ofp.OFPET_ROLE_REQUEST_FAILED and msg.code == ofp.OFPRRFC_STALE:
            self.leadership_event("role_stale")
        elif msg.type == ofp.OFPET_BAD_REQUEST and msg.code == ofp.OFPBRC_IS_SLAVE:
            self.leadership_event("demoted", f"the switch refused a modify-state message: {text}")
        with self._lock:
            owner = self._mod_xids.pop(msg.xid, None)
            if owner is not None:
                waiter, index, fm = owner
                waiter.mod_errors[index] = text
                LOG.error("switch error %s for flow-mod %s", text, fm)
                return
            waiter = self._waiters.pop(msg.xid, None)
        if waiter is not None:
            waiter.failure = f"switch error {text}"
            waiter.done.set()
        LOG.error("switch error %s (xid %#x)", text, msg.xid)

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        msg = ev.msg
        reason = {ofp.OFPPR_ADD: "added", ofp.OFPPR_DELETE: "deleted", ofp.OFPPR_MODIFY: "modified"}.get(
            msg.reason, str(msg.reason))
        desc = msg.desc
        link_down = bool(desc.state & ofp.OFPPS_LINK_DOWN)
        admin_down = bool(desc.config & ofp.OFPPC_PORT_DOWN)
        self._count(f"port_{reason}")
        LOG.info("port %s (%s) %s: link %s", desc.port_no, desc.name.decode(errors="replace")
                 if isinstance(desc.name, bytes) else desc.name, reason, "down" if link_down else "up")
        if self.monitor is not None:
            down = msg.reason == ofp.OFPPR_DELETE or link_down or admin_down
            why = "deleted" if msg.reason == ofp.OFPPR_DELETE else (
                "link down" if link_down else "administratively down" if admin_down else "up")
            self.monitor.port_status(desc.port_no, down, why)
        if self.chains is not None:  # a db node's port (chain_exec.py); others are ignored there
            down = msg.reason == ofp.OFPPR_DELETE or link_down or admin_down
            self.chains.port_status(desc.port_no, down, reason)

    # ------------------------------------------------------------------ failover (leadership.py)

    @set_ev_cls(ofp_event.EventOFPRoleReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _role_reply(self, ev):
        msg = ev.msg
        role = {ofp.OFPCR_ROLE_MASTER: MASTER, ofp.OFPCR_ROLE_SLAVE: SLAVE}.get(msg.role, "equal")
        LOG.info("switch dpid %#x: role %s confirmed (generation %d)", self.dpid, role, msg.generation_id)
        with self._lock:
            if msg.datapath is not self._dp:
                return
        self.leadership_event("role_reply", role, msg.generation_id)
        if role == SLAVE and self._standby_writes and not self.leadership.elected:
            self._send_standby_flow_mod(msg.datapath)

    def _send_standby_flow_mod(self, dp) -> None:
        """TESTS ONLY (--standby-writes): a SLAVE sends one harmless flow-mod (a delete of a cookie
        nobody uses), which the switch must refuse with IS_SLAVE (counted as ofp_error)."""
        mod = parser.OFPFlowMod(dp, cookie=0xE5E5_0000_0000_0000, cookie_mask=0xFFFF_FFFF_FFFF_FFFF,
                                table_id=ofp.OFPTT_ALL, command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
                                out_group=ofp.OFPG_ANY, match=parser.OFPMatch())
        LOG.warning("TESTS ONLY: standby sends a flow-mod; the switch must refuse it (IS_SLAVE)")
        with self._lock:
            try:
                self._send(dp, mod)
            except SwitchNotConnected:
                pass

    def leadership_event(self, event: str, *args) -> None:
        """Feed one event to the leadership state machine and carry out its actions (any thread)."""
        with self._cond:
            self._apply_leadership(getattr(self.leadership, event)(*args))

    def _apply_leadership(self, actions: list) -> None:
        """Lock held. OpenFlow actions happen here; etcd ones go to the failover thread."""
        etcd = []
        for a in actions:
            dp = self._dp
            if isinstance(a, SendRoleRequest):
                if dp is None:
                    continue
                role = ofp.OFPCR_ROLE_MASTER if a.role == MASTER else ofp.OFPCR_ROLE_SLAVE
                LOG.info("switch dpid %#x: ROLE_REQUEST(%s, generation %d)", self.dpid, a.role, a.generation)
                try:
                    self._send(dp, parser.OFPRoleRequest(dp, role, a.generation))
                except SwitchNotConnected as err:
                    LOG.warning("role request not sent: %s", err)
            elif isinstance(a, StartAdopting):
                if dp is None:
                    continue
                self._role_at_wall = time.time()  # the old master's flow-mods are refused from here on
                if not self.leadership.single:
                    self._count("role_master_confirmed")
                    LOG.info("switch dpid %#x: we are MASTER (generation %d); reading its flow table",
                             self.dpid, self.leadership.generation)
                self.updater.switch_disconnected()
                self.connected.clear()
                self._table_pending = dp
                self._table_attempts = 0
                if self.monitor is not None and not self._monitor_started:
                    self._monitor_started = True  # started outside our lock (the monitor's comes first)
                    threading.Thread(target=self.monitor.start, daemon=True, name="exo-monitor-start").start()
            elif isinstance(a, StopSending):
                LOG.warning("switch dpid %#x: no more flow-mods from this instance: %s", self.dpid, a.why)
                self._table_pending = None
                self.connected.clear()
                self.updater.switch_disconnected()
            elif isinstance(a, (Resign, RevokeLeader)):
                etcd.append(a)
        self._cond.notify_all()
        if etcd and self.failover is not None:
            self.failover.submit(etcd)

    def accepts_rule_changes(self) -> bool:
        """Rule changes are taken by the master only (a single controller always is one)."""
        with self._lock:
            return self.leadership.single or self.leadership.elected

    def master_name(self) -> str:
        with self._lock:
            return self.leadership.master_name() or "unknown (election in progress)"

    # ------------------------------------------------------------------ API for the monitor

    def withdraw_cache_node(self, node: str) -> None:
        """`node` was declared DOWN: drop its rules from the book and withdraw them from the switch
        with one flow-mod ahead of everything else; its adds are rejected until it rejoins."""
        with self._cond:
            self._ensure_book_quietly(f"withdrawing {node}")
            held = self.updater.withdraw(node)
            if self.book_store is not None:
                from .book_store import BookStoreError
                try:
                    self.book_store.drop_node(node)
                except (BookStoreError, StateNotStored) as err:
                    self._count("book_store_failures")
                    LOG.warning("cache node %s: its Ruleset 2 book in etcd not dropped: %s", node, err)
            LOG.warning("cache node %s: %d Ruleset 2 rules dropped from the desired book; its withdrawal "
                        "goes to the switch first", node, len(held))
            self._cond.notify_all()

    def rejoin_cache_node(self, node: str) -> None:
        with self._cond:
            self.updater.rejoin(node)
            self._cond.notify_all()

    def sync_cache_node(self, node: str, hashes: list[int]) -> int:
        """Rebuild `node`'s part of the book from the keys it holds (a freshly started controller)."""
        with self._cond:
            self._ensure_book_quietly(f"syncing {node}")  # the sync reconciles etcd's book, so that comes first
            added = self.updater.sync_node(node, hashes)
            if self.updater.book_dirty:
                self._store_book_quietly(f"the sync of {node}")
            LOG.info("cache node %s synced: it holds %d keys, %d Ruleset 2 references added", node,
                     len(hashes), added)
            if self.updater.synced:
                LOG.info("every cache node synced (or withdrawn): deletes of rules nobody wants may go "
                         "(%d queued)", self.updater.metrics(self.clock())["rule_deletes_queued"])
            self._cond.notify_all()
            return added

    # ------------------------------------------------------------------ API for chain changes

    def apply_chains(self, chains: list[list[str]], wait: bool = False,
                     timeout: Optional[float] = None) -> "ChainOutcome":
        """A new chain table (slot -> [head, ..., tail] of db node names; docs/design/replication.md,
        4.2-4.4): each slot's read rule to its tail, its write rule to its head. Only the Ruleset 3
        rules whose port changed are queued, ahead of every Ruleset 2 change. A bad table
        (ValueError naming chains[i]) changes nothing. wait: block until the switch confirmed them
        (or a disconnect, or `timeout`, default 60 s)."""
        with self._cond:
            changed = self.updater.set_chains(chains, self._db_ports)
            return self._wait_chains(changed, wait, timeout)

    def move_slot(self, slot: int, read_server: Optional[str] = None, head: Optional[str] = None,
                  wait: bool = False, timeout: Optional[float] = None) -> "ChainOutcome":
        """Point one slot's read rule at db node `read_server` and/or its write rule at `head`
        (None: leave it); e.g. the read rule of a slot whose new member has caught up (4.4)."""
        ports = {}
        for what, name in (("read_port", read_server), ("write_port", head)):
            if name is not None:
                if name not in self._db_ports:
                    raise ValueError(f"{name!r} is not a db node (known: {', '.join(sorted(self._db_ports))})")
                ports[what] = self._db_ports[name]
        with self._cond:
            changed = self.updater.move_slot(slot, **ports)
            return self._wait_chains(changed, wait, timeout)

    def wait_chains(self, timeout: float) -> bool:
        """Block until no Ruleset 3 rule is queued or in flight (the chain executor's moves of one
        plan, queued with wait=False); False after `timeout` or while the switch is not connected."""
        with self._cond:
            deadline = self.clock() + timeout
            while self.updater.chain_pending():
                left = deadline - self.clock()
                if left <= 0 or self._dp is None:
                    return False
                self._cond.wait(min(left, 0.5))
            return True

    def _wait_chains(self, changed: list[int], wait: bool, timeout: Optional[float]) -> "ChainOutcome":
        """Lock held. Wake the sender; with `wait`, block until none of `changed` is pending."""
        self._cond.notify_all()
        if changed:
            LOG.info("Ruleset 3: %d rules to repoint (cookie indices %s)", len(changed),
                     ", ".join(f"{i:#x}" for i in changed[:8]) + (" ..." if len(changed) > 8 else ""))
        note = ""
        if wait and changed:
            note = self._wait_confirmed(lambda: not self.updater.chain_pending(changed), timeout)
        return ChainOutcome(len(changed), not self.updater.chain_pending(changed), note)

    def _wait_confirmed(self, done, timeout: Optional[float]) -> str:
        """Lock held. Block until done() (the switch confirmed), the switch disconnects, or
        `timeout` (default DEFAULT_WAIT) passes; "" when done, else why the wait ended."""
        if self._dp is None:
            return "switch not connected; queued until it reconnects"
        timeout = DEFAULT_WAIT if timeout is None else timeout
        deadline = self.clock() + timeout
        disconnects = self._disconnects
        while not done():
            left = deadline - self.clock()
            if self._disconnects != disconnects:
                return "switch disconnected before confirming; queued until it reconnects"
            if left <= 0:
                return f"not confirmed by the switch within {timeout:.3g}s; still queued"
            self._cond.wait(left)
        return ""

    # ------------------------------------------------------------------ API for the gRPC service

    def add_cache_rules(self, rules: Iterable[CacheRule], loads: Optional[Iterable[float]] = None,
                        wait: bool = True, timeout: Optional[float] = None) -> RulesOutcome:
        """Add rules (loads: requests/s per rule, hottest go first). wait=False returns once queued."""
        rules = list(rules)
        return self._update(lambda: self.updater.add(rules, loads), rules, wait, timeout)

    def remove_cache_rules(self, rules: Iterable[CacheRule], wait: bool = True,
                           timeout: Optional[float] = None) -> RulesOutcome:
        rules = list(rules)
        return self._update(lambda: self.updater.remove(rules), rules, wait, timeout)

    def _update(self, apply, rules: list[CacheRule], wait: bool, timeout: Optional[float]) -> RulesOutcome:
        """Change the desired rules, wake the sender, and (wait) block until the changes are
        barrier-confirmed or refused, the switch disconnects, or `timeout` (default 60 s) passes."""
        if not rules:
            return RulesOutcome(0, 0)
        with self._cond:
            if self._dp is None and not self._ever_connected:
                raise SwitchNotConnected(f"switch dpid {self.dpid:#x} is not connected to the controller")
            checkpoint = None
            if self.book_store is not None:
                self._ensure_book()  # before the change: it is made to etcd's book
                checkpoint = self.updater.checkpoint(rules)
            res = apply()
            if checkpoint is not None:
                # Written before the sender (it needs our lock) can act on it and before the caller
                # is answered; if etcd refused it, the change is undone (book_store.py).
                try:
                    self._store_book()
                except StateNotStored:
                    self.updater.rollback(checkpoint)
                    self._store_book_quietly("a rollback")
                    raise
            self._cond.notify_all()
            note = self._wait_confirmed(lambda: self.updater.settled(res.ticket), timeout) if wait else ""
            return self._outcome(res, rules, wait, note)

    def _outcome(self, res: UpdateResult, rules: list[CacheRule], waited: bool, note: str) -> RulesOutcome:
        """accepted: changes queued (no wait) or confirmed; rejected: refused by the book or the
        switch. With wait, a change still pending when the wait ended is in neither count, so a
        caller can tell "not yet on the switch" (accepted + rejected < len(rules)) from a refusal."""
        failed = res.ticket.errors if res.ticket else {}
        bad = {id(r) for r, _ in res.rejected}
        hashes = [self.updater.book.rule_hash(r.key_hash) for r in rules if id(r) not in bad]
        refused = sum(1 for h in hashes if h in failed)
        unconfirmed = sum(1 for h in hashes if waited and h not in failed and self.updater.pending(h))
        errors = [e for e in (res.error, *(f"{h:#012x}: {why}" for h, why in failed.items()), note) if e]
        accepted, rejected = res.accepted - refused - unconfirmed, len(res.rejected) + refused
        self._count("cache_rules_accepted", accepted)
        self._count("cache_rules_rejected", rejected)
        return RulesOutcome(accepted, rejected, "; ".join(errors), [r.key_hash for r in res.full])

    def _count(self, name: str, n: int = 1) -> None:
        """Event counters are bumped from the os-ken thread, the sender and gRPC threads, and
        read by stats(): one lock for all (a new key while stats() iterates would break it)."""
        with self._lock:
            self.counters[name] += n

    def count(self, name: str, n: int = 1) -> None:
        """For the gRPC service's caller checks (rpc_refused, exo_common/authz.py)."""
        self._count(name, n)

    def openflow_refused(self, address, why: str) -> None:
        """An OpenFlow peer that is not the switch was turned away before it got a datapath
        (openflow_tls.py): TLS failed, or its certificate is not named `switch`."""
        self._count("openflow_refused")
        LOG.warning("refused OpenFlow peer %s: %s", address, why)

    def stats(self) -> dict[str, float]:
        """Updater metrics (docs/cache-fill.md section 3), cache node liveness (liveness.py) and
        the app's event counters."""
        # The monitor's lock is taken before ours, never inside it (monitor.py).
        liveness = self.monitor.metrics() if self.monitor is not None else {}
        if self.chains is not None:  # its lock, like the monitor's, is never taken inside ours
            liveness.update(self.chains.metrics())
        tls_refused = self._tls_handshake_refused() if self._tls_handshake_refused is not None else None
        with self._lock:
            out = {k: float(v) for k, v in self.counters.items()}
            out.update(liveness)
            out.update(self.updater.metrics(self.clock()))
            out.update(self._ingress)
            if tls_refused is not None:
                out["tls_handshake_refused"] = float(tls_refused)
            out["switch_connected"] = float(self._dp is not None)
            out["switch_programmed"] = float(self.connected.is_set())
            out["controller_master"] = float(self.leadership.is_master())
            out["controller_generation"] = float(self.leadership.generation or 0)
            return out

    def list_flows(self, ruleset: int = 0) -> list[FlowInfo]:
        """Read the flow table back from the switch. ruleset 0 = every flow (foreign ones too);
        4 = table 0's ingress checks (ingress.py), whose drop rules' packet counts are refusals."""
        if ruleset not in (0, *RULESETS):
            raise ValueError(f"ruleset must be 0, 1, 2, 3 or 4, not {ruleset}")
        cookie, mask = cookie_filter(ruleset) if ruleset else (0, 0)
        with self._lock:
            dp = self._require_dp()
        flows = self._flow_stats(dp, cookie, mask)
        flows.sort(key=lambda f: (-f.priority, f.ruleset, f.eth_dst, f.cookie))
        return flows

    def _flow_stats(self, dp, cookie: int, mask: int) -> list[FlowInfo]:
        """One multipart flow-stats request to `dp` (every table); waits outside the lock."""
        req = parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                         cookie, mask, parser.OFPMatch())
        return [from_stats(s) for s in self._multipart(dp, req)]

    def ingress_counters(self) -> dict[str, float]:
        """Read table 0's drop counts and the meters' drops from the switch now (ingress.counters)
        and keep them for stats()."""
        with self._lock:
            dp = self._require_dp()
        cookie, mask = cookie_filter(RULESET_INGRESS)
        flows = self._flow_stats(dp, cookie, mask)
        drops = {}
        if self.cfg.switch.client_meter_pps and self.cfg.clients:
            drops = meter_drops(self._multipart(dp, parser.OFPMeterStatsRequest(dp)))
        out = ingress.counters(self.cfg, flows, drops)
        with self._lock:
            self._ingress = out
        return out

    def _ingress_poll_loop(self, period: float) -> None:
        while not self._stopping:
            time.sleep(period)
            if not self.connected.is_set():
                continue
            try:
                self.ingress_counters()
            except SwitchError as err:
                LOG.debug("reading table 0's counters failed: %s", err)
            except Exception:  # noqa: BLE001 - a dead poller would freeze the counters silently
                LOG.exception("reading table 0's counters failed")

    def _multipart(self, dp, req) -> list:
        """Send one multipart request to `dp` and return the bodies of every part of its reply;
        waits outside the lock."""
        with self._lock:
            if self._dp is not dp:
                raise SwitchNotConnected(f"switch dpid {self.dpid:#x} is not connected to the controller")
            waiter = _Waiter()
            xid = self._send(dp, req, lambda x: self._waiters.__setitem__(x, waiter))
        ok = waiter.done.wait(self.barrier_timeout)
        with self._lock:
            self._waiters.pop(xid, None)
        if not ok:
            raise SwitchTimeout(f"no reply to {type(req).__name__} within {self.barrier_timeout:g}s")
        if waiter.failure:
            raise (SwitchNotConnected if waiter.disconnected else SwitchError)(waiter.failure)
        return waiter.stats

    def is_connected(self) -> bool:
        with self._lock:
            return self._dp is not None
