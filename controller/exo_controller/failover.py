"""The I/O around leadership.py: the etcd election, the Ping probe of the master, and the etcd
actions the state machine asks for (docs/design/replication.md, 5.2 and 5.4).

Three threads, all daemons:
* `exo-election`: campaign; once won, tell the app (elected_as) and watch the key; once it is
  gone (lease expired, revoked, resigned), tell the app (lost_lease) and campaign again.
* `exo-probe`: every controller.failover_probe_ms, read who leads (one etcd Range), tell the
  app, and, when it is another instance, call its Controller.Ping with a deadline of the same
  length; the outcome (ok / refused / timeout) goes to the state machine. Also the machine's
  clock tick (a master cut off from the switch resigns).
* `exo-etcd-actions`: carries out Resign and RevokeLeader, so that neither the os-ken thread
  nor a caller holding the app's lock ever waits for etcd.

Before any of them starts, start() compares this instance's config digest with the cluster's
(config_digest.py; the first instance stores it) and refuses to campaign on a mismatch
(ConfigMismatch naming the fields; main.py exits with it). It also hands the app the etcd
stores of its desired state: the Ruleset 2 book (book_store.py) and the rate-window record
(ratewin_store.py); the chain table's store is chain_exec.py's (chain_store.py).
"""
from __future__ import annotations

import logging
import queue
import threading
import time

import grpc
from exo_common import tls
from exoproto import control_pb2, control_pb2_grpc

from .etcd_keys import cluster_prefix
from .leadership import PROBE_OK, PROBE_REFUSED, PROBE_TIMEOUT, Leader, Resign, RevokeLeader

LOG = logging.getLogger("exo_controller.failover")
CONFIG_CHECK_WAIT_S = 10.0  # how long start() waits for etcd to answer the config digest check
# What a connection attempt to a process that is gone reports: the port is closed (TCP) or the
# socket file has no listener or is missing (unix). Anything else (a deadline, a reset of a
# live connection) is not proof of death.
REFUSED_MARKERS = ("connection refused", "no such file")


def classify(err: grpc.RpcError) -> str:
    """A failed Ping: PROBE_REFUSED when the master's process is certainly gone, else PROBE_TIMEOUT."""
    code = err.code() if hasattr(err, "code") else None
    text = (err.details() if hasattr(err, "details") else str(err)) or ""
    if code == grpc.StatusCode.UNAVAILABLE and any(m in text.lower() for m in REFUSED_MARKERS):
        return PROBE_REFUSED
    return PROBE_TIMEOUT


def election_prefix(cfg) -> str:
    return f"{cluster_prefix(cfg)}/leader"


class Failover:
    def __init__(self, cfg, app, client, name: str):
        """cfg: the whole config (every instance's address); app: ExoControllerApp (its
        leadership_event, count, attach_stores); client: exo_common.etcd.EtcdClient; name: this
        instance."""
        from exo_common.etcd import Election
        from .book_store import EtcdBookStore
        from .ratewin_store import EtcdRateWindowStore
        self.cfg, self.app, self.client, self.name = cfg, app, client, name
        self.probe_s = cfg.controller.failover_probe_ms / 1000.0
        self.election = Election(client, election_prefix(cfg), name, cfg.controller.lease_ttl_s)
        self._actions: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._channels: dict[str, control_pb2_grpc.ControllerStub] = {}
        attach = getattr(app, "attach_stores", None)  # None: a test's stand-in app
        if attach is not None:
            attach(EtcdBookStore(cfg, self, [c.name for c in cfg.cache_nodes]), EtcdRateWindowStore(cfg, self))

    def check_config(self, wait_s: float = CONFIG_CHECK_WAIT_S) -> bool:
        """Store our config digest if the cluster has none (True), else compare it: ConfigMismatch
        naming what differs. While etcd does not answer it tries again for up to wait_s seconds."""
        from exo_common.etcd import EtcdError
        from .config_digest import check_or_store
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return check_or_store(self.client, self.cfg)
            except EtcdError as err:
                if time.monotonic() >= deadline:
                    raise
                LOG.warning("config digest: etcd does not answer (%s); trying again", err)
                time.sleep(0.5)

    def start(self) -> None:
        """ConfigMismatch (before any thread starts: this instance never campaigns) when its
        config is not the cluster's."""
        self.check_config()
        for target, tname in ((self._election_loop, "exo-election"), (self._probe_loop, "exo-probe"),
                              (self._action_loop, "exo-etcd-actions")):
            threading.Thread(target=target, daemon=True, name=tname).start()

    def stop(self) -> None:
        """Resign (a clean stop hands over at once instead of after the lease TTL)."""
        self._stop.set()
        self._actions.put(None)
        try:
            if self.election.is_leader():
                self.election.resign()
        except Exception as err:  # noqa: BLE001 - best effort on the way out
            LOG.warning("resign on stop: %s", err)

    def submit(self, actions: list) -> None:
        """From the app, lock held: never blocks."""
        for a in actions:
            self._actions.put(a)

    # ---- threads ----
    def _election_loop(self) -> None:
        from exo_common.etcd import EtcdError
        while not self._stop.is_set():
            try:
                gen = self.election.campaign()
            except EtcdError as err:
                LOG.warning("campaign failed (%s); trying again", err)
                self._stop.wait(0.5)
                continue
            LOG.info("instance %s won the election: generation %d (lease %x)", self.name, gen,
                     self.election.lease_id or 0)
            self.app.count("leader_elections_won")
            self.app.leadership_event("elected_as", gen)
            while not self._stop.is_set() and self._is_leader():
                self._stop.wait(self.probe_s / 2)
            LOG.warning("instance %s is no longer the elected master", self.name)
            self.app.leadership_event("lost_lease")

    def _is_leader(self) -> bool:
        try:
            return self.election.is_leader()
        except Exception as err:  # noqa: BLE001 - unknown is not "lost": the lease decides
            LOG.warning("is_leader: %s", err)
            return True

    def _probe_loop(self) -> None:
        from exo_common.etcd import EtcdError
        while not self._stop.wait(self.probe_s):
            self.app.leadership_event("tick", time.monotonic())
            try:
                info = self.election.leader()
            except EtcdError as err:
                LOG.debug("leader(): %s", err)
                continue
            leader = None if info is None else Leader(info.name, info.lease_id, info.generation)
            self.app.leadership_event("leader_changed", leader)
            if leader is None or leader.name == self.name:
                continue
            self.app.leadership_event("probe", self._ping(leader.name))

    def _ping(self, name: str) -> str:
        try:
            stub = self._stub(name)
        except KeyError:
            LOG.error("etcd names master %r, which controller.instances does not list", name)
            return PROBE_TIMEOUT
        try:
            stub.Ping(control_pb2.PingRequest(instance=self.name), timeout=self.probe_s)
            return PROBE_OK
        except grpc.RpcError as err:
            result = classify(err)
            LOG.log(logging.WARNING if result == PROBE_REFUSED else logging.DEBUG,
                    "Ping of master %s: %s (%s)", name, result, err.details() if hasattr(err, "details") else err)
            return result

    def _stub(self, name: str):
        if name not in self._channels:
            address = self.cfg.controller.instance(name).grpc
            # Reconnect as often as we probe: gRPC's default backoff (1 s and more) would hide a
            # master that came back, and would answer later probes from a stale failure.
            backoff = max(10, self.cfg.controller.failover_probe_ms)
            ch = tls.secure_channel(self.cfg, "controller", address, "controller", options=[
                ("grpc.initial_reconnect_backoff_ms", backoff), ("grpc.min_reconnect_backoff_ms", backoff),
                ("grpc.max_reconnect_backoff_ms", backoff)])
            self._channels[name] = control_pb2_grpc.ControllerStub(ch)
        return self._channels[name]

    def _action_loop(self) -> None:
        from exo_common.etcd import revoke_leader
        while not self._stop.is_set():
            a = self._actions.get()
            if a is None:
                return
            try:
                if isinstance(a, Resign):
                    LOG.warning("resigning: %s", a.why)
                    self.election.resign()
                elif isinstance(a, RevokeLeader):
                    revoked = revoke_leader(self.client, a.lease_id)
                    LOG.warning("master %s refused two Pings in a row: its lease %x %s", a.name, a.lease_id,
                                "revoked" if revoked else "was already gone")
                    if revoked:
                        self.app.count("leader_revokes")
            except Exception as err:  # noqa: BLE001 - etcd unreachable: the lease TTL still decides
                LOG.error("%s failed: %s", type(a).__name__, err)
