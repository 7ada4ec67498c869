"""The thin os-ken app (OpenFlow 1.3): sends the FlowMods that flows.py computes.

Threads: os-ken runs this app's event handlers on one event-loop thread; gRPC calls
add_cache_rules / remove_cache_rules / list_flows from its worker threads. `self._lock`
serialises everything that touches the rule book, the datapath handle, xid allocation and
the waiter tables. Datapath.send_msg is thread-safe in the native hub (it only serialises the
message and puts the bytes on a queue.Queue drained by the datapath's send thread); its xid
counter is not atomic, so we only call it under our lock (os-ken's own echo loop may still
race it, which at worst duplicates an echo xid: harmless, we match replies by type and xid).

A gRPC caller waits for the barrier reply *outside* the lock, so the event-loop thread (which
delivers that reply) is never blocked by a waiting caller.
"""
from __future__ import annotations

import collections
import logging
import threading
from dataclasses import dataclass, field
from typing import Iterable, Optional

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from .flows import HASH_MASK, CacheRule, CacheRuleBook, FlowMod, cookie_filter, flush_flowmod, static_flowmods
from .ofp_translate import FlowInfo, error_text, from_stats, to_ofp

LOG = logging.getLogger("exo_controller")


class SwitchError(RuntimeError):
    """The switch answered a request with an OpenFlow error."""


class SwitchNotConnected(SwitchError):
    pass


class SwitchTimeout(SwitchError):
    pass


@dataclass
class _Waiter:
    """One outstanding barrier or multipart request."""
    done: threading.Event = field(default_factory=threading.Event)
    stats: list = field(default_factory=list)
    failure: Optional[str] = None  # error reply to the request itself, or disconnect
    disconnected: bool = False
    mod_errors: list[tuple[FlowMod, str]] = field(default_factory=list)  # errors for flow-mods before it
    mod_xids: list[int] = field(default_factory=list)


@dataclass
class RulesOutcome:
    accepted: int
    rejected: int
    error: str = ""


class ExoControllerApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofp.OFP_VERSION]

    def __init__(self, *args, exo_config=None, barrier_timeout: float = 2.0, **kwargs):
        super().__init__(*args, **kwargs)
        if exo_config is None:
            raise ValueError("ExoControllerApp needs exo_config= (start it with exo_controller.main)")
        self.cfg = exo_config
        self.dpid = exo_config.switch.dpid
        self.barrier_timeout = barrier_timeout
        self.book = CacheRuleBook.from_config(exo_config)
        self.counters: collections.Counter[str] = collections.Counter()
        self._lock = threading.RLock()
        self._dp = None
        self._waiters: dict[int, _Waiter] = {}     # xid of barrier / stats request -> waiter
        self._mod_xids: dict[int, tuple[_Waiter, FlowMod]] = {}  # xid of a flow-mod -> (its barrier's waiter, mod)
        self.connected = threading.Event()  # set once the switch is programmed (first barrier reply)

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

    def _send_mods_and_barrier(self, dp, mods: Iterable[FlowMod]) -> _Waiter:
        waiter = _Waiter()

        def reg_mod(fm):
            def reg(xid):
                self._mod_xids[xid] = (waiter, fm)
                waiter.mod_xids.append(xid)
            return reg

        def reg_barrier(xid):
            self._waiters[xid] = waiter

        try:
            for fm in mods:
                self._send(dp, to_ofp(dp, fm), reg_mod(fm))
                self.counters["flow_mods_sent"] += 1
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

    # ------------------------------------------------------------------ switch events

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _switch_features(self, ev):
        dp = ev.msg.datapath
        if dp.id != self.dpid:
            LOG.warning("ignoring switch dpid %#x (configured dpid is %#x)", dp.id, self.dpid)
            return
        with self._lock:
            if self._dp is not None and self._dp is not dp:
                LOG.warning("switch dpid %#x reconnected; replacing the old connection", dp.id)
                self._fail_all("switch reconnected")
            self._dp = dp
            self.connected.clear()
            mods = [flush_flowmod(), *static_flowmods(self.cfg), *self.book.all_flowmods()]
            waiter = self._send_mods_and_barrier(dp, mods)
        LOG.info("switch dpid %#x connected from %s: sent %d flow-mods (flush, Ruleset 1+ARP, Ruleset 3 x%d, "
                 "Ruleset 2 x%d)", dp.id, dp.address, len(mods), 1 << self.cfg.switch.partition_bits,
                 len(self.book))
        self.counters["switch_connects"] += 1
        # Don't wait here: the barrier reply arrives on this very thread. Log it when it comes.
        threading.Thread(target=self._await_programming, args=(dp, waiter), daemon=True,
                         name="exo-program-wait").start()

    def _await_programming(self, dp, waiter: _Waiter) -> None:
        ok = waiter.done.wait(max(self.barrier_timeout, 10.0))
        with self._lock:
            self._forget(waiter)
        if not ok:
            LOG.error("switch dpid %#x: no barrier reply after programming", dp.id)
        elif waiter.failure:
            LOG.error("switch dpid %#x: programming failed: %s", dp.id, waiter.failure)
        else:
            for fm, why in waiter.mod_errors:
                LOG.error("switch rejected %s: %s", fm, why)
            LOG.info("switch dpid %#x programmed (%d errors)", dp.id, len(waiter.mod_errors))
            self.connected.set()

    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev):
        if ev.state == DEAD_DISPATCHER:
            with self._lock:
                if ev.datapath is self._dp:
                    LOG.warning("switch dpid %#x disconnected", self.dpid)
                    self._dp = None
                    self.connected.clear()
                    self.counters["switch_disconnects"] += 1
                    self._fail_all("switch disconnected")

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

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _flow_stats_reply(self, ev):
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
        self.counters["ofp_errors"] += 1
        self.counters[f"ofp_error {text}"] += 1
        with self._lock:
            owner = self._mod_xids.pop(msg.xid, None)
            if owner is not None:
                waiter, fm = owner
                waiter.mod_errors.append((fm, text))
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
        self.counters[f"port_{reason}"] += 1
        LOG.info("port %s (%s) %s: link %s", desc.port_no, desc.name.decode(errors="replace")
                 if isinstance(desc.name, bytes) else desc.name, reason, "down" if link_down else "up")

    # ------------------------------------------------------------------ API for the gRPC service

    def add_cache_rules(self, rules: Iterable[CacheRule]) -> RulesOutcome:
        return self._update(self.book.add, list(rules))

    def remove_cache_rules(self, rules: Iterable[CacheRule]) -> RulesOutcome:
        return self._update(self.book.remove, list(rules))

    def _update(self, op, rules: list[CacheRule]) -> RulesOutcome:
        """Apply to the book, send, wait for the barrier. On timeout/disconnect the book is rolled
        back (so a retry does not double a refcount) and undo flow-mods are sent best-effort."""
        if not rules:
            return RulesOutcome(0, 0)
        with self._lock:
            dp = self._require_dp()
            snap = self.book.snapshot(r.key_hash for r in rules)
            res = op(rules)
            try:
                waiter = self._send_mods_and_barrier(dp, res.flowmods)
            except SwitchNotConnected:
                self.book.restore(snap)
                raise
        ok = waiter.done.wait(self.barrier_timeout)
        with self._lock:
            self._forget(waiter)
            if not ok or waiter.failure:
                why = waiter.failure or f"no barrier reply within {self.barrier_timeout:g}s"
                self._undo(dp, self.book.restore(snap))
                self.counters["updates_rolled_back"] += 1
                return RulesOutcome(0, len(rules), f"{why}; nothing applied (rolled back)")
            rejected = len(res.rejected)
            errors = [res.error] if res.rejected else []
            if waiter.mod_errors:
                bad = {fm.eth_dst & HASH_MASK for fm, _ in waiter.mod_errors if fm.eth_dst is not None}
                self._undo(dp, self.book.restore({h: snap[h] for h in bad}))
                rejected_names = {r for r, _ in res.rejected}
                failed = [r for r in rules if (r.key_hash & HASH_MASK) in bad and r not in rejected_names]
                rejected += len(failed)
                errors += [f"{fm.eth_dst & HASH_MASK:#012x}: switch error {why}" for fm, why in waiter.mod_errors]
                res.accepted -= len(failed)
        self.counters["cache_rules_accepted"] += res.accepted
        self.counters["cache_rules_rejected"] += rejected
        return RulesOutcome(res.accepted, rejected, "; ".join(errors))

    def _undo(self, dp, mods: list[FlowMod]) -> None:
        if not mods or self._dp is not dp:
            return  # disconnected: the book is re-installed on reconnect
        try:
            w = self._send_mods_and_barrier(dp, mods)
            self._forget(w)  # best-effort, not waited for
        except SwitchNotConnected:
            pass

    def list_flows(self, ruleset: int = 0) -> list[FlowInfo]:
        """Read the flow table back from the switch. ruleset 0 = every flow (foreign ones too)."""
        if ruleset not in (0, 1, 2, 3):
            raise ValueError(f"ruleset must be 0, 1, 2 or 3, not {ruleset}")
        cookie, mask = cookie_filter(ruleset) if ruleset else (0, 0)
        with self._lock:
            dp = self._require_dp()
            req = parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                             cookie, mask, parser.OFPMatch())
            waiter = _Waiter()
            xid = self._send(dp, req, lambda x: self._waiters.__setitem__(x, waiter))
        ok = waiter.done.wait(self.barrier_timeout)
        with self._lock:
            self._waiters.pop(xid, None)
        if not ok:
            raise SwitchTimeout(f"no flow-stats reply within {self.barrier_timeout:g}s")
        if waiter.failure:
            raise (SwitchNotConnected if waiter.disconnected else SwitchError)(waiter.failure)
        flows = [from_stats(s) for s in waiter.stats]
        flows.sort(key=lambda f: (-f.priority, f.ruleset, f.eth_dst, f.cookie))
        return flows

    def is_connected(self) -> bool:
        with self._lock:
            return self._dp is not None
