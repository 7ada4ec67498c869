"""The chain executor: db node heartbeats, and the plans of chain_plan.py carried out (the master
only, replication.factor > 1; docs/replication.md, "Failover").

Two threads:
* `exo-db-heartbeat`: every db_liveness.HEARTBEAT_S one DbNode.ChainStatus per db node (spares
  too: `exo node add` needs their incarnation), deadline the same; results go into DbLiveness,
  whose events are queued, and the last reply per node is kept (pending, caught_up).
* `exo-chains`: adopts the live table, then takes one thing at a time: a liveness event, an
  `exo node add|remove` request, a learner that caught up, a slot left without a read server;
  plans it (chain_plan) and runs the plan's steps in order:

    PushHeads        -> CacheNode.SetHeads (each slot's new head) on every cache node not DOWN
                        (retried for a while), right before ResetCacheNodes
    ResetCacheNodes  -> CacheNode.Reset on every cache node not DOWN (retried for a while)
    PushTable        -> DbNode.SetChains to every live node the table names, and to the nodes the
                        plan removed (so they stop acting), each with its incarnation; new
                        learners last (chain_plan.PushTable)
    MoveRules        -> app.move_slot (Ruleset 3), all of a plan's moves then one wait for the switch
    WaitPendingZero  -> until the node's own ChainStatus (asked in the step) reports pending 0
    Wait             -> sleep

Adoption (at start and whenever this instance becomes master): the table is the highest
ChainStatus.table.version among the db nodes that answer; none (a fresh cluster): the config's
chains as version 1 with the incarnations just read. A member of that table that does not answer,
or answers with another incarnation, is taken out first (node_down). Then the table is pushed to
every reachable node and every slot's rules are set from it, and the table's heads are sent to
every cache node (SetHeads).

Cache nodes' heads outside a plan (between events, `_housekeeping`): a cache node not DOWN that
has not accepted the current heads (a failed push, or it was DOWN and came back: it may have
restarted with the config's heads) gets them, in the background (a late push of an old version
is refused by the node, so it cannot undo a newer one); every HEADS_REFRESH_S all of them are sent
again, for a cache node that restarted faster than its heartbeat noticed.

Membership (`exo node add|remove`): starts as the config's member db nodes; a removed node stays
out until it is added again. It lives in this process only (the design keeps it in etcd, step 9b):
a new master starts from the config again.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Optional

from . import chain_plan as cp
from .db_liveness import DOWN, HEARTBEAT_S, NODE_DOWN, NODE_JOINED, UP, DbLiveness, Event
from .monitor import describe

LOG = logging.getLogger("exo_controller.chains")

PUSH_TIMEOUT = 1.0          # one SetChains
PUSH_RETRY_S = 2.0          # a live node's push is retried this long, then the plan goes on
RESET_TIMEOUT = 1.0
RESET_RETRY_S = 2.0
HEADS_TIMEOUT = 1.0         # one CacheNode.SetHeads
HEADS_REFRESH_S = 5.0       # every cache node gets the current heads again this often
PENDING_TIMEOUT_S = 5.0     # WaitPendingZero gives up (the plan stops; restore_readers follows)
HANDOVER_BACKOFF_S = 5.0    # after a hand-over stopped, the learner's next try waits this long
                            # (the slot's GETs are BUSY while one waits: do not loop on it)
RULES_TIMEOUT_S = 30.0      # a plan's rule moves confirmed by the switch
ADOPT_GRACE_S = 5.0         # adoption waits this long after the first answer for the other members


class StepFailed(RuntimeError):
    pass


def _final(why: str) -> bool:
    """A SetHeads failure that a resend cannot change: the cache node holds newer heads (another
    master's), or it is a build without SetHeads (it follows the config's owners)."""
    return "FAILED_PRECONDITION" in why or "UNIMPLEMENTED" in why


@dataclass
class _Op:
    kind: str              # "add" | "remove"
    node: str
    done: Future


class ChainExecutor:
    """`app`: accepts_rule_changes(), move_slot(...), wait_chains(timeout), monitor (cache node
    states, may be None). `peers`: chain_status, set_chains, reset (chain_peers.ChainPeers)."""

    def __init__(self, cfg, app, peers, clock: Callable[[], float] = time.monotonic):
        self.cfg, self.app, self.peers, self.clock = cfg, app, peers, clock
        self.rf = cfg.replication.factor
        self.handover_group = cp.handover_group(cfg.switch.rule_update_rate)  # slots per hand-over
        self.liveness = DbLiveness.from_config(cfg)
        self.db_nodes = [d.name for d in cfg.db_nodes]
        self.cache_nodes = [c.name for c in cfg.cache_nodes]
        self.membership = set(cfg.members())
        self.table: Optional[cp.ChainTable] = None
        self._lock = threading.Lock()
        self._status: dict[str, tuple[float, object]] = {}  # node -> (when, ChainStatusReply)
        self._events: queue.Queue = queue.Queue()
        self._inflight: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=2 * len(self.db_nodes) + len(self.cache_nodes) + 2,
                                        thread_name_prefix="exo-chain-rpc")
        self._stop = threading.Event()
        self._adopted = False
        self._reapply = False  # reapply_rules() was called: see _housekeeping
        self._store = None  # chain_store.EtcdChainStore, made on first use (app.failover set later)
        self.store_saves = 0
        self.store_failures = 0
        self._busy = threading.Event()
        self._handover_after: dict[str, float] = {}  # learner -> no hand-over try before this time
        # Cache nodes' heads (CacheNode.SetHeads): the last heads pushed, and per cache node the
        # version it accepted from us (guarded by _lock: background pushes write it).
        self._heads: Optional[cp.PushHeads] = None
        self._heads_sent: dict[str, int] = {}
        self._heads_inflight: set[str] = set()
        self._heads_refresh_at = 0.0
        # metrics
        self.reconfigurations = 0
        self.plans_refused = 0
        self.plans_aborted = 0
        self.push_failures = 0
        self.cache_resets = 0
        self.cache_reset_failures = 0
        self.handovers = 0
        self.last_failover_s = 0.0
        self.last_handover_s = 0.0
        self.adoptions = 0

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> "ChainExecutor":
        threading.Thread(target=self._heartbeat_loop, daemon=True, name="exo-db-heartbeat").start()
        threading.Thread(target=self._run_loop, daemon=True, name="exo-chains").start()
        LOG.info("chain executor: %d db nodes, replication.factor %d, DOWN after %d missed heartbeats of %gs",
                 len(self.db_nodes), self.rf, self.liveness.threshold, HEARTBEAT_S)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._events.put(None)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _master(self) -> bool:
        return self.app.accepts_rule_changes()

    # ---------------------------------------------------------------- heartbeats

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            if not self._adopted or not self._master():
                continue  # liveness starts with the adopted table (no stale DOWN of a node still starting)
            with self._lock:
                nodes = [n for n in self.db_nodes if n not in self._inflight]
                self._inflight.update(nodes)
            for n in nodes:
                try:
                    self._pool.submit(self._heartbeat, n)
                except RuntimeError:
                    return  # pool shut down: stopping

    def _heartbeat(self, node: str) -> None:
        try:
            rep = self.peers.chain_status(node, HEARTBEAT_S)
            ok, inc = True, rep.incarnation
        except Exception:  # noqa: BLE001 - any failure is a missed heartbeat
            rep, ok, inc = None, False, 0
        now = self.clock()
        with self._lock:
            self._inflight.discard(node)
            if ok:
                self._status[node] = (now, rep)
            events = self.liveness.heartbeat(node, ok, inc, now)
        for e in events:
            self._events.put(e)

    def port_status(self, port: int, down: bool, why: str = "") -> None:
        with self._lock:
            events = self.liveness.port_status(port, down, self.clock(), why)
        for e in events:
            self._events.put(e)

    # ---------------------------------------------------------------- membership (gRPC threads)

    def request(self, kind: str, node: str, timeout: float = 30.0) -> cp.ChainTable:
        """`exo node add|remove NODE`: queued for the executor thread; returns the table after it
        (raises ValueError / RuntimeError with the reason)."""
        if node not in self.db_nodes:
            raise ValueError(f"{node!r} is not a db node of the config (db nodes: {', '.join(self.db_nodes)})")
        op = _Op(kind, node, Future())
        self._events.put(op)
        return op.done.result(timeout)

    def nodes(self) -> list[dict]:
        """Every db node: member, state, incarnation, and its roles in the live table."""
        with self._lock:
            table = self.table
            out = []
            for n in self.db_nodes:
                roles = {"heads": [], "nodes": [], "learners": [], "reads": []}
                for i, s in enumerate(table.slots if table else ()):
                    if s.head == n:
                        roles["heads"].append(i)
                    if n in s.nodes:
                        roles["nodes"].append(i)
                    if n in s.learners:
                        roles["learners"].append(i)
                    if s.read_server == n:
                        roles["reads"].append(i)
                out.append({"name": n, "member": n in self.membership, "state": self.liveness.state(n),
                            "incarnation": self.liveness.incarnation(n), **roles})
            return out

    # ---------------------------------------------------------------- the executor thread

    def _run_loop(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._master():
                    self._adopted = False
                    self._stop.wait(HEARTBEAT_S)
                    continue
                if not self._adopted:
                    self._adopt()
                    continue
                try:
                    item = self._events.get(timeout=HEARTBEAT_S)
                except queue.Empty:
                    item = None
                if item is None:
                    self._housekeeping()
                elif isinstance(item, Event):
                    self._on_event(item)
                elif isinstance(item, _Op):
                    self._on_op(item)
            except Exception:  # noqa: BLE001 - a dead executor would leave every failure unhandled
                if self._stop.is_set():
                    return  # stopping: the RPC pool is shut down under a running plan
                LOG.exception("chain executor failed; going on")
                self._stop.wait(HEARTBEAT_S)

    def _poll_all(self, nodes, timeout: float) -> dict[str, object]:
        futs = {n: self._pool.submit(self.peers.chain_status, n, timeout) for n in nodes}
        out = {}
        for n, f in futs.items():
            try:
                out[n] = f.result()
            except Exception as err:  # noqa: BLE001 - not answering: the caller decides
                LOG.debug("ChainStatus of %s: %s", n, describe(err))
        return out

    def _adopt(self) -> None:
        """Wait until every member answers (a cluster starts its controller before its db nodes),
        or ADOPT_GRACE_S after the first answer when the ones missing can be taken out; then
        adopt, push and set the rules."""
        answers: dict[str, object] = {}
        first = None
        while not self._stop.is_set() and self._master():
            answers.update(self._poll_all([n for n in self.db_nodes if n not in answers], 3 * HEARTBEAT_S))
            if answers and first is None:
                first = self.clock()
            if all(n in answers for n in self.membership):
                break
            if first is not None and self.clock() - first >= ADOPT_GRACE_S:
                try:
                    self._adoptable(answers)
                    break
                except cp.PlanError as err:
                    LOG.warning("adoption: waiting for more db nodes: %s", err)
            self._stop.wait(3 * HEARTBEAT_S)
        else:
            return
        table, how = self._adoptable(answers)
        LOG.warning("chain table %s\n%s", how, cp.describe(table))
        self.table = table
        self.adoptions += 1
        self._push(cp.PushTable(table))  # also saves it in etcd (_save)
        # A cache node may still route by an older master's heads or the config's: send ours
        # (in the background; ones not answering yet get them from _housekeeping).
        with self._lock:
            self._heads, self._heads_sent = cp.heads_step(table), {}
        self._heads_in_background()
        self._moves(cp.rule_moves(table))
        self._adopted = True

    def _adoptable(self, answers: dict[str, object]) -> tuple[cp.ChainTable, str]:
        """The table to adopt from these ChainStatus answers and what etcd holds (the newer
        wins; PlanError: not possible yet)."""
        incs = {n: r.incarnation for n, r in answers.items()}
        best = max(answers.values(), key=lambda r: r.table.version, default=None)
        stored = self._load()
        if stored is not None and stored.version > (best.table.version if best is not None else 0):
            table = stored
            how = f"adopted v{table.version} from etcd"
        elif best is not None and best.table.version > 0:
            table = cp.from_msg(best.table)
            how = f"adopted v{table.version} from {best.node or '?'}"
        else:
            table = cp.initial_table(self.cfg.chains(), {n: incs.get(n, 0) for n in self.membership})
            how = "fresh cluster: the config's chains as v1"
        for n in sorted(table.members):
            if incs.get(n) != table.members[n]:
                table = cp.node_down(table, n).table
                how += f"; {n} taken out ({'restarted' if n in incs else 'not answering'})"
        return cp.restore_readers(table).table, how

    def _on_event(self, e: Event) -> None:
        table = self.table
        if e.kind == NODE_DOWN:
            if e.node not in table.members or (e.incarnation and table.members[e.node] != e.incarnation):
                return
            plan = self._plan(cp.node_down, table, e.node)
            if plan is not None and self._execute(plan):
                self.last_failover_s = self.clock() - e.since
                LOG.warning("db node %s: failover done %.3fs after its first missed heartbeat", e.node,
                            self.last_failover_s)
                self._refill()
        elif e.kind == NODE_JOINED:
            if e.node not in self.membership:
                LOG.info("db node %s answers (incarnation %#x) but is not a member: `exo node add %s` brings it in",
                         e.node, e.incarnation, e.node)
                return
            plan = self._plan(cp.node_joined, table, e.node, e.incarnation, self.rf)
            if plan is not None:
                self._execute(plan)

    def _on_op(self, op: _Op) -> None:
        try:
            if op.kind == "remove":
                self.membership.discard(op.node)
                plan = cp.remove(self.table, op.node)
                self._execute(plan)
                self._refill()
            elif op.kind == "add":
                with self._lock:
                    state, inc = self.liveness.state(op.node), self.liveness.incarnation(op.node)
                if state != UP:
                    raise RuntimeError(f"{op.node} is {state}: it must answer ChainStatus to be added")
                self.membership.add(op.node)
                self._execute(cp.add(self.table, op.node, inc, self.rf))
            else:
                raise ValueError(f"unknown membership operation {op.kind!r}")
            op.done.set_result(self.table)
        except Exception as err:  # noqa: BLE001 - the caller gets the reason
            if op.kind == "remove" and isinstance(err, cp.PlanError):
                self.membership.add(op.node)  # refused: it stays
            op.done.set_exception(err)

    def reapply_rules(self) -> None:
        """The app adopted a switch's Ruleset 3 as it was (a new master, a reconnect): point it
        at the live table again on the executor thread (only what differs is sent)."""
        self._reapply = True

    def _housekeeping(self) -> None:
        """Between events: finish hand-overs whose learner caught up; give slots left without a
        read server their last node back."""
        if self._reapply and self._adopted:
            self._reapply = False
            self._moves(cp.rule_moves(self.table))
        if self._adopted:
            self._heads_in_background()
        plan = cp.restore_readers(self.table)
        if not plan.empty:
            self._execute(plan)
        with self._lock:
            status = dict(self._status)
            up = self.liveness.up()
        for node, (_, rep) in sorted(status.items()):
            if node not in up or up[node] != rep.incarnation:
                continue
            done = [s for s in rep.caught_up if s < len(self.table.slots) and node in self.table.slots[s].learners]
            done = sorted(done)[:self.handover_group]  # the rest in the next rounds (cp.handover_group)
            if done and self.clock() >= self._handover_after.get(node, 0.0):
                started = self.clock()
                if self._execute(cp.caught_up(self.table, node, done)):
                    self.handovers += len(done)
                    self.last_handover_s = self.clock() - started
                else:
                    self._handover_after[node] = self.clock() + HANDOVER_BACKOFF_S
                return

    def _refill(self) -> None:
        with self._lock:
            up = {n: inc for n, inc in self.liveness.up().items() if n in self.membership}
        up = {n: inc for n, inc in up.items() if self.table.members.get(n, inc) == inc}
        plan = self._plan(cp.refill, self.table, up, self.rf)
        if plan is not None:
            self._execute(plan)

    def _plan(self, planner, *args) -> Optional[cp.Plan]:
        try:
            return planner(*args)
        except cp.PlanError as err:
            self.plans_refused += 1
            LOG.error("chain plan refused: %s", err)
            return None

    # ---------------------------------------------------------------- steps

    def _execute(self, plan: cp.Plan) -> bool:
        """Run the steps in order; False if one failed (the table stays at the last push)."""
        if plan.empty:
            return True
        LOG.warning("chain plan (%s): %s", plan.why, ", ".join(type(s).__name__ for s in plan.steps))
        self._busy.set()
        try:
            i = 0
            while i < len(plan.steps):
                if not self._master():
                    # Deposed mid-plan: the new master adopts the highest table the nodes hold and
                    # plans from there; our next push could only race it.
                    raise StepFailed("this instance is no longer the master")
                step = plan.steps[i]
                if isinstance(step, cp.MoveRules):
                    j = i
                    while j < len(plan.steps) and isinstance(plan.steps[j], cp.MoveRules):
                        j += 1
                    self._moves(list(plan.steps[i:j]))
                    i = j
                    continue
                if isinstance(step, cp.PushHeads):
                    self._push_heads(step)
                elif isinstance(step, cp.ResetCacheNodes):
                    self._reset_caches(step)
                elif isinstance(step, cp.PushTable):
                    self._push(step)
                elif isinstance(step, cp.WaitPendingZero):
                    self._wait_pending_zero(step.node)
                elif isinstance(step, cp.Wait):
                    self._stop.wait(step.seconds)
                i += 1
        except StepFailed as err:
            self.plans_aborted += 1
            LOG.error("chain plan (%s) stopped: %s; the table stays at v%d", plan.why, err, self.table.version)
            return False
        finally:
            self._busy.clear()
        self.reconfigurations += 1
        LOG.warning("%s", cp.describe(self.table))
        return True

    def _cache_states(self) -> dict[str, str]:
        """Each cache node's liveness state (monitor.py; "up" without a monitor)."""
        states = self.app.monitor.states() if getattr(self.app, "monitor", None) is not None else {}
        return {c: states.get(c, "up") for c in self.cache_nodes}

    def _push_heads(self, step: cp.PushHeads) -> None:
        """A plan's PushHeads: SetHeads on every cache node not DOWN, retried for RESET_RETRY_S,
        before the plan's Reset and push (chain_plan, rule 1)."""
        with self._lock:
            self._heads = step
        targets = [c for c, st in self._cache_states().items() if st != "down"]
        deadline = self.clock() + RESET_RETRY_S
        while targets:
            futs = {c: self._pool.submit(self._set_heads, c, step) for c in targets}
            failed = [(c, w) for c, f in futs.items() if (w := f.result())]
            targets = [c for c, w in failed if not _final(w)]
            if targets and self.clock() >= deadline:
                LOG.error("cache nodes %s did not take the heads of v%d before the new heads take writes: %s",
                          ", ".join(targets), step.version, "; ".join(f"{c}: {w}" for c, w in failed))
                return
            if targets:
                self._stop.wait(0.1)

    def _set_heads(self, node: str, step: cp.PushHeads, level: int = logging.WARNING) -> str:
        """One SetHeads; "" or why it failed. Records the version the node accepted."""
        try:
            held = self.peers.set_heads(node, step.version, step.heads, HEADS_TIMEOUT)
        except Exception as err:  # noqa: BLE001 - the caller retries or _housekeeping does
            why = describe(err)
            LOG.log(level, "SetHeads v%d to cache node %s failed: %s", step.version, node, why)
            if _final(why):
                with self._lock:  # not again before the refresh
                    self._heads_sent[node] = step.version
            return why
        with self._lock:
            self._heads_sent[node] = held
        return ""

    def _heads_in_background(self) -> None:
        """Send the current heads to the cache nodes that need them (chain_plan.heads_due), without
        waiting: a cache node that does not answer must not hold up the executor."""
        states = self._cache_states()
        now = self.clock()
        with self._lock:
            step = self._heads
            if step is None:
                return
            if now >= self._heads_refresh_at:
                self._heads_refresh_at = now + HEADS_REFRESH_S
                self._heads_sent = {}
            for n, st in states.items():
                if st == "down":
                    self._heads_sent.pop(n, None)  # back later (maybe restarted): send again
            due = [n for n in cp.heads_due(states, self._heads_sent, step.version) if n not in self._heads_inflight]
            self._heads_inflight.update(due)
        for n in due:
            try:
                self._pool.submit(self._set_heads_bg, n, step)
            except RuntimeError:
                return  # pool shut down: stopping

    def _set_heads_bg(self, node: str, step: cp.PushHeads) -> None:
        try:
            self._set_heads(node, step, logging.DEBUG)  # retried every HEARTBEAT_S: do not flood the log
        finally:
            with self._lock:
                self._heads_inflight.discard(node)

    def _reset_caches(self, step: cp.ResetCacheNodes) -> None:
        states = self.app.monitor.states() if getattr(self.app, "monitor", None) is not None else {}
        targets = [c for c in self.cache_nodes if states.get(c, "up") != "down"]
        deadline = self.clock() + RESET_RETRY_S
        while targets:
            futs = {c: self._pool.submit(self.peers.reset, c, RESET_TIMEOUT) for c in targets}
            failed = []
            for c, f in futs.items():
                try:
                    f.result()
                    self.cache_resets += 1
                except Exception as err:  # noqa: BLE001 - retried, then reported
                    failed.append((c, describe(err)))
            targets = [c for c, _ in failed]
            if targets and self.clock() >= deadline:
                self.cache_reset_failures += len(targets)
                LOG.error("cache nodes %s not reset before the new heads of slots %s take writes: %s",
                          ", ".join(targets), list(step.slots), "; ".join(f"{c}: {w}" for c, w in failed))
                return
            if targets:
                self._stop.wait(0.1)

    def _push(self, step: cp.PushTable) -> None:
        """Every live recipient, then (after LEARNER_SETTLE_S) the new learners (PushTable)."""
        table = step.table
        self.table = table
        with self._lock:
            states = {n: self.liveness.state(n) for n in self.db_nodes}
            incs = {n: self.liveness.incarnation(n) for n in self.db_nodes}
        targets = {n: table.members[n] for n in table.recipients() if states.get(n) != DOWN and n in table.members}
        removed = {n: incs[n] for n in step.removed if states.get(n) == UP and incs.get(n)}
        last = {n: inc for n, inc in targets.items() if n in step.learners_last}
        first = {n: inc for n, inc in targets.items() if n not in last}
        self._push_to(table, first, removed)
        if last:
            self._stop.wait(cp.LEARNER_SETTLE_S)
            self._push_to(table, last, {})
        self._save()

    # ---------------------------------------------------------------- etcd (chain_store.py)

    def _etcd(self):
        """The etcd store while this instance runs an election (controller.etcd), else None."""
        fo = getattr(self.app, "failover", None)
        if fo is None:
            return None
        if self._store is None:
            from .chain_store import EtcdChainStore
            self._store = EtcdChainStore(self.cfg, fo)
        return self._store

    def _load(self) -> Optional[cp.ChainTable]:
        """What etcd holds (its membership replaces the config's); None without etcd or on error."""
        store = self._etcd()
        if store is None:
            return None
        try:
            table, members = store.load()
        except Exception as err:  # noqa: BLE001 - etcd down or a bad value: the db nodes still know
            self.store_failures += 1
            LOG.error("chain table from etcd: %s; adopting from the db nodes", describe(err))
            return None
        if members is not None:
            self.membership = members & set(self.db_nodes)
        return table

    def _save(self) -> None:
        store = self._etcd()
        if store is None:
            return
        try:
            ok = store.save(self.table, self.membership)
        except Exception as err:  # noqa: BLE001 - counted; the next push writes it again
            ok = False
            LOG.error("chain table v%d not saved in etcd: %s", self.table.version, describe(err))
        if ok:
            self.store_saves += 1
        else:
            self.store_failures += 1

    def _push_to(self, table: cp.ChainTable, pending: dict[str, int], once: dict[str, int]) -> None:
        """SetChains to `pending` (retried for PUSH_RETRY_S while failing) and `once` (one try)."""
        deadline = self.clock() + PUSH_RETRY_S
        while pending or once:
            futs = {n: self._pool.submit(self.peers.set_chains, n, table, inc, PUSH_TIMEOUT)
                    for n, inc in {**pending, **once}.items()}
            once = {}
            failed = {}
            for n, f in futs.items():
                try:
                    f.result()
                except Exception as err:  # noqa: BLE001 - retried while the node lives
                    self.push_failures += 1
                    LOG.warning("SetChains v%d to %s failed: %s", table.version, n, describe(err))
                    if n in pending:
                        failed[n] = pending[n]
            pending = failed
            if pending and self.clock() >= deadline:
                LOG.error("chain table v%d not accepted by %s; going on (their heartbeat decides)", table.version,
                          ", ".join(sorted(pending)))
                return
            if pending:
                self._stop.wait(0.1)

    def _moves(self, moves: list[cp.MoveRules]) -> None:
        for m in moves:
            self.app.move_slot(m.slot, read_server=m.read_server, head=m.head)
        if moves and not self.app.wait_chains(RULES_TIMEOUT_S):
            LOG.error("Ruleset 3 moves of %d slots not confirmed by the switch within %gs (still queued)",
                      len(moves), RULES_TIMEOUT_S)

    def _wait_pending_zero(self, node: str) -> None:
        """Ask `node` itself (not the last heartbeat: the answer must postdate the push)."""
        start = self.clock()
        last = "no answer"
        while self.clock() - start < PENDING_TIMEOUT_S:
            with self._lock:
                if self.liveness.state(node) == DOWN:
                    raise StepFailed(f"{node} is DOWN while its writes drain")
            try:
                rep = self.peers.chain_status(node, 2 * HEARTBEAT_S)
                if rep.pending == 0:
                    return
                last = f"{rep.pending} pending"
            except Exception as err:  # noqa: BLE001 - retried until the timeout or DOWN
                last = describe(err)
            self._stop.wait(HEARTBEAT_S / 2)
        raise StepFailed(f"{node} still has writes pending after {PENDING_TIMEOUT_S:g}s ({last})")

    # ---------------------------------------------------------------- metrics

    def metrics(self) -> dict[str, float]:
        with self._lock:
            out = self.liveness.metrics(self.membership)
            table = self.table
        out.update(cp.counts(table) if table is not None else {"chain_table_version": 0.0})
        out.update({
            "chain_reconfigurations": float(self.reconfigurations),
            "chain_plans_refused": float(self.plans_refused),
            "chain_plans_aborted": float(self.plans_aborted),
            "chain_push_failures": float(self.push_failures),
            "chain_cache_resets": float(self.cache_resets),
            "chain_cache_reset_failures": float(self.cache_reset_failures),
            "chain_handovers": float(self.handovers),
            "chain_adoptions": float(self.adoptions),
            "chain_store_saves": float(self.store_saves),
            "chain_store_failures": float(self.store_failures),
            "db_members": float(len(self.membership)),
            "last_failover_s": float(self.last_failover_s),
            "last_handover_s": float(self.last_handover_s),
            # Controller.Stats carries whole numbers: these two are the readable ones there
            "last_failover_ms": round(self.last_failover_s * 1000.0, 3),
            "last_handover_ms": round(self.last_handover_s * 1000.0, 3),
        })
        return out
