"""Leader election over etcd: the recipe of etcd's clientv3/concurrency/election.go (Campaign,
waitDeletes), as docs/design/replication.md 5.2 uses it.

    e = Election(client, "/exo/<cluster>/leader", "ctl-a", ttl_s=2)
    gen = e.campaign()      # blocks until this candidate leads; gen = its key's create revision,
                            # the OpenFlow generation_id (5.1)
    e.guarded_txn([op_put("/exo/<cluster>/chains", data)])   # (False, []) once deposed
    revoke_leader(client, e.leader().lease_id)                # a standby deposing a dead master

Each candidate puts `<prefix>/<lease id hex>` = its name under its own lease, kept alive on a
thread. The candidate whose key has the smallest create revision leads; the others wait for the
deletion of the key just before theirs. A key goes when its lease is revoked (resign,
revoke_leader) or expires (its holder stopped renewing it).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from etcd import rpc_pb2

from .client import EtcdClient
from .ops import EtcdError, EtcdRpcError, WatchEvent, b, cmp_create_revision, op_get, op_put, prefix_range_end
from .watch import Watch

log = logging.getLogger("exo.etcd.election")


@dataclass(frozen=True)
class LeaderInfo:
    name: str
    lease_id: int
    generation: int  # the create revision of the leader's key


def revoke_leader(client: EtcdClient, lease_id: int) -> bool:
    """Revokes a (dead) leader's lease: its key goes at once and the next candidate leads. True if
    revoked, False if the lease was already gone."""
    try:
        client.lease_revoke(lease_id)
        return True
    except EtcdRpcError as err:
        if err.code == "NOT_FOUND":
            return False
        raise


class Election:
    def __init__(self, client: EtcdClient, prefix: str, name: str, ttl_s: int,
                 on_lost: Optional[Callable[[], None]] = None):
        """on_lost(): called (on a thread) when this candidate, having led, loses its key or lease."""
        if not isinstance(prefix, str) or not prefix.strip("/"):
            raise EtcdError(f"election prefix must be a non-empty key prefix, not {prefix!r}")
        if not isinstance(name, str) or not name:
            raise EtcdError(f"election name must be a non-empty string, not {name!r}")
        if not isinstance(ttl_s, int) or ttl_s < 1:
            raise EtcdError(f"election ttl_s must be a whole number of seconds >= 1, not {ttl_s!r}")
        self.client = client
        self.prefix = prefix.rstrip("/") + "/"
        self.name = name
        self.ttl_s = ttl_s
        self._on_lost = on_lost
        self.lease_id: Optional[int] = None
        self.key: Optional[str] = None
        self.generation: Optional[int] = None
        self._leading = threading.Event()
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._keepalive: Optional[threading.Thread] = None
        self._own_watch: Optional[Watch] = None
        self._lock = threading.Lock()
        self._campaigning = False
        self._revoked = False

    # ------------------------------------------------------------ queries

    def _first(self, **bounds) -> Optional[rpc_pb2.RangeResponse]:
        p = b(self.prefix)
        return self.client.range(rpc_pb2.RangeRequest(key=p, range_end=prefix_range_end(p), limit=1, **bounds))

    def leader(self) -> Optional[LeaderInfo]:
        """The current leader: the key under the prefix with the smallest create revision."""
        resp = self._first(sort_order=rpc_pb2.RangeRequest.ASCEND, sort_target=rpc_pb2.RangeRequest.CREATE)
        if not resp.kvs:
            return None
        kv = resp.kvs[0]
        return LeaderInfo(kv.value.decode("utf-8", "replace"), kv.lease, kv.create_revision)

    def is_leader(self) -> bool:
        """Whether this candidate leads, as far as it knows without asking etcd: its key's deletion
        is watched and its lease's renewal answered. While etcd does not answer it keeps what it
        knew (_keep_alive says why); guarded_txn is the authoritative check."""
        return self._leading.is_set() and not self._lost.is_set()

    # ------------------------------------------------------------ campaign

    def campaign(self, timeout_s: Optional[float] = None) -> int:
        """Blocks until this candidate leads; returns its generation. On timeout, resign() or a lost
        lease: EtcdError, and the candidate's key is withdrawn."""
        with self._lock:
            if self.is_leader():
                return self.generation
            if self._campaigning:
                raise EtcdError("election: a campaign of this candidate is already running")
            self._campaigning = True
        try:
            return self._campaign(timeout_s)
        finally:
            self._campaigning = False

    def _campaign(self, timeout_s: Optional[float]) -> int:
        if self.lease_id is not None:  # an earlier term, lost or resigned: its lease and threads go first
            self._withdraw()
        with self._lock:
            self._stop.clear()
            self._lost.clear()
            self._leading.clear()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            self.lease_id = self.client.lease_grant(self.ttl_s)
            self._revoked = False
            self.key = f"{self.prefix}{self.lease_id:x}"
            self._keepalive = threading.Thread(target=self._keep_alive, args=(self.lease_id,),
                                               name=f"etcd-lease-{self.name}", daemon=True)
            self._keepalive.start()
            self.client.txn([cmp_create_revision(self.key, 0)], [op_put(self.key, self.name, self.lease_id)],
                            [op_get(self.key)])
            mine = self.client.get(self.key)
            if mine is None:
                raise EtcdError(f"election: the lease of {self.key} ended before the campaign started")
            self.generation = mine.create_revision
            self._wait_deletes(self.generation - 1, deadline)
            mine = self.client.get(self.key)
            if mine is None or mine.create_revision != self.generation:
                raise EtcdError(f"election: {self.key} was deleted (its lease revoked or expired) while waiting")
            self._watch_own_key(self.generation + 1)
            self._leading.set()
            if self._lost.is_set():
                raise EtcdError(f"election: lost {self.key} just after winning")
            log.info("election %s: %s leads, generation %d", self.prefix, self.name, self.generation)
            return self.generation
        except BaseException:
            self._withdraw()
            raise

    def _check_going(self, deadline: Optional[float]) -> None:
        if self._stop.is_set():
            raise EtcdError("election: the campaign was cancelled (resign)")
        if self._lost.is_set():
            raise EtcdError(f"election: the lease of {self.key} was lost while waiting")
        if deadline is not None and time.monotonic() >= deadline:
            raise EtcdError(f"election: {self.name} is not the leader after the campaign's timeout")

    def _wait_deletes(self, max_create_revision: int, deadline: Optional[float]) -> None:
        """etcd's waitDeletes: until no key under the prefix was created at or before
        max_create_revision, wait for the deletion of the newest such key."""
        while True:
            self._check_going(deadline)
            resp = self._first(max_create_revision=max_create_revision, sort_order=rpc_pb2.RangeRequest.DESCEND,
                               sort_target=rpc_pb2.RangeRequest.CREATE)
            if not resp.kvs:
                return
            gone = threading.Event()

            def seen(events: list[WatchEvent]) -> None:
                if any(e.type == "DELETE" for e in events):
                    gone.set()
            w = self.client.watch_key(resp.kvs[0].key, seen, start_revision=resp.header.revision + 1,
                                      on_error=lambda err: gone.set())
            try:
                while not gone.wait(0.05):
                    self._check_going(deadline)
            finally:
                w.cancel()

    # ------------------------------------------------------------ holding the lease

    def _keep_alive(self, lease_id: int) -> None:
        """Renews the lease every TTL/3 s. Only etcd saying the lease is gone is a loss: when etcd
        does not answer (a member died, its raft is electing), it retries, as etcd's own session
        does. etcd extends every lease when its raft leader changes, so a slow answer is not an
        expiry; and a lease that did expire meanwhile is reported gone on the next answer. A
        master that is wrong in the meantime is fenced by the switch's generation check and by
        guarded_txn."""
        interval = max(self.ttl_s / 3.0, 0.1)
        while not self._stop.wait(interval) and not self.client.closed:
            try:
                if self.client.lease_keepalive(lease_id) <= 0:
                    self._mark_lost(f"lease {lease_id:x} is gone (revoked or expired)")
                    return
            except EtcdError as err:
                log.warning("election %s: keep-alive failed (will retry): %s", self.prefix, err)

    def _watch_own_key(self, start_revision: int) -> None:
        self._own_watch = self.client.watch_key(self.key, self._own_key_changed, start_revision=start_revision,
                                                on_error=self._own_watch_broke)

    def _own_watch_broke(self, err: EtcdError) -> None:
        """The watch of our key broke (the etcd member it used died): our key may well be alive on
        the other members, so look again and watch again there; only a key that is gone is lost
        leadership. While etcd does not answer, it keeps trying (see _keep_alive)."""
        pause = 0.1
        while not self._stop.is_set() and not self._lost.is_set() and not self.client.closed:
            try:
                resp = self.client.range(rpc_pb2.RangeRequest(key=b(self.key)))
                if not resp.kvs or resp.kvs[0].create_revision != self.generation:
                    self._mark_lost(f"{self.key} is gone")
                    return
                self._watch_own_key(resp.header.revision + 1)
                log.info("election %s: watching %s again after: %s", self.prefix, self.key, err)
                return
            except EtcdError as again:
                log.warning("election %s: cannot watch %s again yet: %s", self.prefix, self.key, again)
                self._stop.wait(pause)
                pause = min(pause * 2, 1.0)

    def _own_key_changed(self, events: list[WatchEvent]) -> None:
        if any(e.type == "DELETE" for e in events):
            self._mark_lost(f"{self.key} was deleted")

    def _mark_lost(self, why: str) -> None:
        with self._lock:  # the keep-alive and watch threads may both get here
            if self._stop.is_set() or self._lost.is_set():
                return
            was_leading = self._leading.is_set()
            self._lost.set()
            self._leading.clear()
        log.warning("election %s: %s lost leadership: %s", self.prefix, self.name, why)
        if was_leading and self._on_lost is not None:
            try:
                self._on_lost()
            except Exception:  # noqa: BLE001
                log.exception("election on_lost failed")

    # ------------------------------------------------------------ leaving

    def _withdraw(self) -> None:
        self._stop.set()
        self._leading.clear()
        if self._own_watch is not None:
            self._own_watch.cancel()
            self._own_watch = None
        if self.lease_id is not None and not self._revoked:
            self._revoked = True
            try:
                revoke_leader(self.client, self.lease_id)
            except EtcdError as err:  # etcd gone: the lease expires by itself
                log.warning("election %s: could not revoke lease %x: %s", self.prefix, self.lease_id, err)
        t = self._keepalive
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)

    def resign(self) -> None:
        """Gives up leadership or candidacy: the lease is revoked, so the key goes at once. Also
        cancels a campaign() running on another thread."""
        self._withdraw()

    def guarded_txn(self, success_ops: Sequence[rpc_pb2.RequestOp],
                    failure_ops: Sequence[rpc_pb2.RequestOp] = ()) -> tuple[bool, list[rpc_pb2.ResponseOp]]:
        """A Txn that runs success_ops only while this candidate's key is the one it won with
        (CreateRevision(key) == generation): a deposed leader's writes fail (False)."""
        if self.key is None or self.generation is None:
            raise EtcdError("election: guarded_txn before campaign() (no key, no generation)")
        return self.client.txn([cmp_create_revision(self.key, self.generation)], success_ops, failure_ops)

    def observe(self, callback: Callable[[Optional[LeaderInfo]], None]) -> Watch:
        """callback(LeaderInfo | None) now, then on every change of leader (on the watch's thread).
        .cancel() the returned Watch to stop."""
        lock = threading.Lock()
        last: list = [object()]

        def check(_events=None) -> None:
            with lock:
                info = self.leader()
                if info != last[0]:
                    last[0] = info
                    callback(info)
        w = self.client.watch_prefix(self.prefix, check)
        check()
        return w
