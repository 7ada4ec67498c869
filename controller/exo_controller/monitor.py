"""The thin layer around liveness.py: the heartbeat thread and the gRPC calls to cache and db nodes.

Every `controller.heartbeat_interval_ms` one CacheNode.Stats per cache node (deadline: the same
interval; a node with a heartbeat still in flight is skipped). Results, switch port changes
(from the os-ken app) and withdrawal confirmations (from the rule sender) go into the pure
Liveness state machine; the actions it returns are carried out here:

    WITHDRAW  -> app.withdraw_cache_node(node)       (the updater queues the one DELETE flow-mod)
    FORGET    -> DbNode.ForgetCacheNode(node) on one db node (retried by Liveness.due)
    RESET     -> CacheNode.Reset on the node
    REJOINED  -> app.rejoin_cache_node(node)         (its adds are accepted again)
    SYNC      -> CacheNode.ListKeys, keys hashed (exoskeleton.keyhash), app.sync_cache_node

RPCs run on a small thread pool, so a slow db node never delays a heartbeat. Locking: one lock
(`_lock`) serialises Liveness and the app calls its actions make, so a transition and its effect
on the rule updater are atomic with respect to other transitions. The order is always monitor
lock, then app lock: the app calls in here (withdrawn, port_status, metrics) never while it
holds its own lock.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional, Protocol

from .liveness import FORGET, FORGET_RETRY_S, REJOINED, RESET, SYNC, WITHDRAW, Action, Liveness

LOG = logging.getLogger("exo_controller.monitor")

RPC_TIMEOUT = 2.0        # seconds for ForgetCacheNode and Reset
LIST_KEYS_TIMEOUT = 5.0  # seconds for ListKeys (a full cache node lists thousands of keys)

# gRPC's default reconnect backoff grows to 120 s: a cache node that restarted would then look
# dead for up to two minutes. Keep retrying the connection at least every half second.
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]


class Peers(Protocol):
    """The calls the monitor makes; each raises on failure (GrpcPeers, or a fake in tests)."""

    def cache_stats(self, node: str, timeout: float) -> None: ...
    def list_keys(self, node: str, timeout: float) -> list[bytes]: ...
    def reset(self, node: str, timeout: float) -> int: ...
    def forget(self, db: str, cache_node: str, timeout: float) -> tuple[int, int]: ...
    def close(self) -> None: ...


def describe(err: BaseException) -> str:
    code = getattr(err, "code", None)
    if callable(code):
        try:
            return f"{code().name}: {err.details()}"  # grpc.RpcError
        except Exception:  # noqa: BLE001 - fall through to str()
            pass
    return str(err) or type(err).__name__


class GrpcPeers:
    """Peers over the gRPC addresses of the cluster config (cache_nodes[].grpc, db_nodes[].grpc),
    with mutual TLS as `controller` (exo_common/tls.py; plaintext in insecure_dev_mode): each
    channel checks that the server's certificate is the node's (for a db node hosted by a wimpy
    emulator, the emulator's)."""

    def __init__(self, cfg):
        from exo_common import tls
        self._cfg = cfg
        self._cache = {c.name: c.grpc for c in cfg.cache_nodes}
        self._db = {d.name: d.grpc for d in cfg.db_nodes}
        self._channels: dict = {}
        self._lock = threading.Lock()
        tls.channel_credentials(cfg, "controller")  # a missing certificate fails here, not per heartbeat

    def _channel(self, node: str, addr: str):
        from exo_common import tls
        with self._lock:
            ch = self._channels.get(addr)
            if ch is None:
                ch = self._channels[addr] = tls.secure_channel(
                    self._cfg, "controller", addr, tls.server_cert_name(self._cfg, node), CHANNEL_OPTIONS)
            return ch

    def _cache_stub(self, node: str):
        from exoproto import control_pb2_grpc
        return control_pb2_grpc.CacheNodeStub(self._channel(node, self._cache[node]))

    def cache_stats(self, node: str, timeout: float) -> None:
        from exoproto import control_pb2
        self._cache_stub(node).Stats(control_pb2.StatsRequest(), timeout=timeout)

    def list_keys(self, node: str, timeout: float) -> list[bytes]:
        from exoproto import control_pb2
        return list(self._cache_stub(node).ListKeys(control_pb2.StatsRequest(), timeout=timeout).keys)

    def reset(self, node: str, timeout: float) -> int:
        from exoproto import control_pb2
        rep = self._cache_stub(node).Reset(control_pb2.StatsRequest(), timeout=timeout)
        if rep.error:
            raise RuntimeError(rep.error)
        return rep.done

    def forget(self, db: str, cache_node: str, timeout: float) -> tuple[int, int]:
        from exoproto import control_pb2, control_pb2_grpc
        stub = control_pb2_grpc.DbNodeStub(self._channel(db, self._db[db]))
        rep = stub.ForgetCacheNode(control_pb2.ForgetCacheNodeRequest(cache_node=cache_node), timeout=timeout)
        return rep.keys_dropped, rep.txns_dropped

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for ch in channels:
            ch.close()


def _default_key_hash(key: bytes) -> int:
    from exoskeleton.keyhash import key_hash
    return key_hash(key)


class ClusterMonitor:
    """Heartbeats, port changes and withdrawal confirmations in; app calls and RPCs out.

    `app` needs withdraw_cache_node(node), rejoin_cache_node(node) and
    sync_cache_node(node, hashes) -> int (see app.ExoControllerApp). `executor` runs the RPCs
    (default: a thread pool); tests pass one that runs them inline and call poll()/run_due()
    with a fake clock instead of start().
    """

    def __init__(self, cfg, app, peers: Peers, clock: Callable[[], float] = time.monotonic,
                 executor=None, need_sync: bool = True, key_hash: Callable[[bytes], int] = _default_key_hash):
        self.app = app
        self.peers = peers
        self.clock = clock
        self.interval = cfg.controller.heartbeat_interval_ms / 1000.0
        self.nodes = [c.name for c in cfg.cache_nodes]
        self.liveness = Liveness.from_config(cfg, need_sync)
        self.key_hash = key_hash
        self._lock = threading.RLock()
        self._hb_inflight: set[str] = set()
        workers = 4 + 2 * len(self.nodes) + len(self.nodes) * len(cfg.db_nodes)
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(max_workers=workers, thread_name_prefix="exo-peer")
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # ------------------------------------------------------------------ thread

    def start(self) -> "ClusterMonitor":
        self._thread = threading.Thread(target=self._loop, daemon=True, name="exo-heartbeat")
        self._thread.start()
        LOG.info("watching %d cache nodes: a heartbeat every %gs, DOWN after %d misses", len(self.nodes),
                 self.interval, self.liveness.threshold)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2.0)
        if self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)
        try:
            self.peers.close()
        except Exception:  # noqa: BLE001 - closing on the way out
            LOG.debug("closing peers failed", exc_info=True)

    def _loop(self) -> None:
        next_hb = self.clock()
        while not self._stop.is_set():
            try:
                now = self.clock()
                if now >= next_hb:
                    self.poll()
                    next_hb = max(next_hb + self.interval, now)
                self.run_due()
                with self._lock:
                    due = self.liveness.next_due()
                wake = next_hb if due is None else min(next_hb, max(due, self.clock() + FORGET_RETRY_S / 10))
            except Exception:  # noqa: BLE001 - a dead heartbeat thread would hide every failure
                LOG.exception("heartbeat loop failed; going on")
                wake = self.clock() + self.interval
            self._stop.wait(max(0.001, wake - self.clock()))

    def _submit(self, fn, *args) -> None:
        try:
            self._executor.submit(fn, *args)
        except RuntimeError:  # executor shut down: we are stopping
            LOG.debug("not submitting %s: stopping", getattr(fn, "__name__", fn))

    # ------------------------------------------------------------------ one round (also for tests)

    def poll(self) -> None:
        """Send a heartbeat to every node that has none in flight."""
        with self._lock:
            nodes = [n for n in self.nodes if n not in self._hb_inflight]
            self._hb_inflight.update(nodes)
        for node in nodes:
            self._submit(self._heartbeat, node)

    def run_due(self) -> None:
        with self._lock:
            self._act(self.liveness.due(self.clock()))

    # ------------------------------------------------------------------ events from the app

    def withdrawn(self, node: str) -> None:
        """The switch confirmed the flow-mod that withdrew `node` (called by the rule sender)."""
        with self._lock:
            self._act(self.liveness.withdrawn(node, self.clock()))

    def port_status(self, port: int, down: bool, why: str = "") -> None:
        """An OFPPortStatus (called from the os-ken event thread)."""
        with self._lock:
            self._act(self.liveness.port_status(port, down, self.clock(), why))

    def metrics(self) -> dict[str, float]:
        with self._lock:
            return self.liveness.metrics()

    def states(self) -> dict[str, str]:
        with self._lock:
            return self.liveness.states()

    # ------------------------------------------------------------------ actions

    def _act(self, actions: list[Action]) -> None:
        """Carry out Liveness actions; called with self._lock held."""
        for a in actions:
            if a.kind == WITHDRAW:
                self.app.withdraw_cache_node(a.node)
            elif a.kind == REJOINED:
                self.app.rejoin_cache_node(a.node)
            elif a.kind == FORGET:
                self._submit(self._forget, a)
            elif a.kind == RESET:
                self._submit(self._reset, a)
            elif a.kind == SYNC:
                self._submit(self._sync, a)
            else:
                raise AssertionError(f"unknown action {a}")

    def _heartbeat(self, node: str) -> None:
        try:
            self.peers.cache_stats(node, self.interval)
            ok = True
        except Exception:  # noqa: BLE001 - any failure is a missed heartbeat
            ok = False
        with self._lock:
            self._hb_inflight.discard(node)
            self._act(self.liveness.heartbeat(node, ok, self.clock()))

    def _forget(self, a: Action) -> None:
        try:
            keys, txns = self.peers.forget(a.db, a.node, RPC_TIMEOUT)
            ok, err = True, ""
            LOG.info("db node %s forgot cache node %s: %d keys, %d unresolved transactions dropped",
                     a.db, a.node, keys, txns)
        except Exception as e:  # noqa: BLE001 - retried
            ok, err = False, describe(e)
        with self._lock:
            self._act(self.liveness.forget_result(a.node, a.db, a.gen, ok, self.clock(), err))

    def _reset(self, a: Action) -> None:
        try:
            dropped = self.peers.reset(a.node, RPC_TIMEOUT)
            ok, err = True, ""
            LOG.info("cache node %s reset: %d entries dropped", a.node, dropped)
        except Exception as e:  # noqa: BLE001 - retried on the next heartbeat
            ok, err = False, describe(e)
        with self._lock:
            self._act(self.liveness.reset_result(a.node, a.gen, ok, self.clock(), err))

    def _sync(self, a: Action) -> None:
        try:
            hashes = [self.key_hash(k) for k in self.peers.list_keys(a.node, LIST_KEYS_TIMEOUT)]
            ok, err = True, ""
        except Exception as e:  # noqa: BLE001 - retried on the next heartbeat
            hashes, ok, err = [], False, describe(e)
        with self._lock:
            if ok and self.liveness.sync_valid(a.node, a.gen):
                self.app.sync_cache_node(a.node, hashes)
            self.liveness.sync_result(a.node, a.gen, ok, self.clock(), err)
