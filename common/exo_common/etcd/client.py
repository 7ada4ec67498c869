"""EtcdClient: the few etcd v3 calls the controllers make, over etcd's own gRPC API (the stubs of
proto/etcd/, docs/design/replication.md 5.2), with TLS from etcd's CA (EtcdTls) or plaintext.

    c = EtcdClient(["https://127.0.0.1:2379"], tls=EtcdTls.client(cert_dir))
    c.put("/exo/c/x", b"1"); c.get("/exo/c/x").mod_revision
    ok, _ = c.txn([cmp_mod_revision("/exo/c/x", rev)], [op_put("/exo/c/x", b"2")])
    w = c.watch_prefix("/exo/c/", lambda events: ...); w.cancel()

Every failure raises EtcdError naming the rpc and the endpoint. With several endpoints, a call
that finds one unreachable (UNAVAILABLE) moves on to the next; the others are answers.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional, Sequence

import grpc

from etcd import rpc_pb2, rpc_pb2_grpc

from .ops import Bytes, EtcdError, EtcdRpcError, KeyValue, WatchEvent, b, endpoint_target, prefix_range_end
from .tlsfiles import SERVER_CERT_NAME, EtcdTls
from .watch import Watch


class EtcdClient:
    def __init__(self, endpoints: Sequence[str], tls: Optional[EtcdTls] = None, timeout_s: float = 2.0):
        if isinstance(endpoints, str) or not endpoints:
            raise EtcdError("etcd endpoints: expected a non-empty list of host:port or http(s)://host:port")
        if not timeout_s > 0:
            raise EtcdError(f"etcd timeout_s must be > 0, not {timeout_s!r}")
        self._targets = [endpoint_target(e, tls is not None) for e in endpoints]
        self.endpoints = list(endpoints)
        self.timeout_s = float(timeout_s)
        self._creds = None
        if tls is not None:
            ca, crt, key = tls.read()
            self._creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=crt)
        self._lock = threading.Lock()
        self._channels: dict[int, tuple[grpc.Channel, dict]] = {}
        self._current = 0
        self._watches: list[Watch] = []
        self._closed = False

    # ------------------------------------------------------------ channels

    def _stubs(self, i: int) -> dict:
        with self._lock:
            if self._closed:
                raise EtcdError("etcd client is closed")
            if i not in self._channels:
                target = self._targets[i]
                if self._creds is None:
                    ch = grpc.insecure_channel(target)
                else:  # every etcd server certificate carries DNS:etcd (pki.init_etcd_pki)
                    ch = grpc.secure_channel(target, self._creds,
                                             options=[("grpc.ssl_target_name_override", SERVER_CERT_NAME)])
                self._channels[i] = (ch, {"kv": rpc_pb2_grpc.KVStub(ch), "watch": rpc_pb2_grpc.WatchStub(ch),
                                          "lease": rpc_pb2_grpc.LeaseStub(ch)})
            return self._channels[i][1]

    def _unary(self, service: str, method: str, request):
        n = len(self._targets)
        start = self._current
        for k in range(n):
            i = (start + k) % n
            try:
                resp = getattr(self._stubs(i)[service], method)(request, timeout=self.timeout_s)
                self._current = i
                return resp
            except grpc.RpcError as err:
                code = err.code()
                if code == grpc.StatusCode.UNAVAILABLE and k + 1 < n:
                    continue
                raise EtcdRpcError(f"etcd {method} at {self._targets[i]}: {code.name}: {err.details()}",
                                   code.name) from None
        raise AssertionError("unreachable")

    # ------------------------------------------------------------ KV

    def range(self, request: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        """A raw Range (for sorted or revision-bounded queries, as the election makes)."""
        return self._unary("kv", "Range", request)

    def get(self, key: Bytes) -> Optional[KeyValue]:
        resp = self.range(rpc_pb2.RangeRequest(key=b(key)))
        return KeyValue.of(resp.kvs[0]) if resp.kvs else None

    def get_prefix(self, prefix: Bytes) -> list[KeyValue]:
        """Every key starting with `prefix`, sorted by key."""
        p = b(prefix, "prefix")
        resp = self.range(rpc_pb2.RangeRequest(key=p, range_end=prefix_range_end(p),
                                               sort_order=rpc_pb2.RangeRequest.ASCEND,
                                               sort_target=rpc_pb2.RangeRequest.KEY))
        return [KeyValue.of(kv) for kv in resp.kvs]

    def revision(self) -> int:
        """The store's current revision."""
        return self.range(rpc_pb2.RangeRequest(key=b"\0", count_only=True)).header.revision

    def put(self, key: Bytes, value: Bytes, lease: int = 0) -> int:
        """Returns the revision the put created."""
        resp = self._unary("kv", "Put", rpc_pb2.PutRequest(key=b(key), value=b(value, "value"), lease=int(lease)))
        return resp.header.revision

    def delete(self, key: Bytes) -> int:
        """Returns how many keys were deleted (0 or 1)."""
        return self._unary("kv", "DeleteRange", rpc_pb2.DeleteRangeRequest(key=b(key))).deleted

    def delete_prefix(self, prefix: Bytes) -> int:
        p = b(prefix, "prefix")
        req = rpc_pb2.DeleteRangeRequest(key=p, range_end=prefix_range_end(p))
        return self._unary("kv", "DeleteRange", req).deleted

    def txn(self, compare: Sequence[rpc_pb2.Compare], success: Sequence[rpc_pb2.RequestOp],
            failure: Sequence[rpc_pb2.RequestOp] = ()) -> tuple[bool, list[rpc_pb2.ResponseOp]]:
        """If every compare holds, run `success`, else `failure`, atomically. Returns (whether the
        compares held, the responses of the ops that ran). Build them with exo_common.etcd.ops."""
        resp = self._unary("kv", "Txn", rpc_pb2.TxnRequest(compare=list(compare), success=list(success),
                                                             failure=list(failure)))
        return resp.succeeded, list(resp.responses)

    # ------------------------------------------------------------ Lease

    def lease_grant(self, ttl_s: int) -> int:
        """A new lease's id. etcd raises a TTL below its minimum to the minimum (docs/etcd.md)."""
        if not isinstance(ttl_s, int) or ttl_s < 1:
            raise EtcdError(f"lease ttl_s must be a whole number of seconds >= 1, not {ttl_s!r}")
        resp = self._unary("lease", "LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=ttl_s))
        if resp.error:
            raise EtcdError(f"etcd LeaseGrant: {resp.error}")
        return resp.ID

    def lease_revoke(self, lease_id: int) -> None:
        """Ends the lease and deletes its keys at once. An unknown lease: EtcdRpcError code NOT_FOUND."""
        self._unary("lease", "LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=int(lease_id)))

    def lease_keepalive(self, lease_id: int) -> int:
        """One keep-alive round; returns the lease's TTL from now (0: the lease is gone)."""
        n = len(self._targets)
        for k in range(n):
            i = (self._current + k) % n
            call = self._stubs(i)["lease"].LeaseKeepAlive(iter([rpc_pb2.LeaseKeepAliveRequest(ID=int(lease_id))]),
                                                          timeout=self.timeout_s)
            try:
                for resp in call:
                    return max(resp.TTL, 0)
                raise EtcdError(f"etcd LeaseKeepAlive at {self._targets[i]}: no answer")
            except grpc.RpcError as err:
                if err.code() == grpc.StatusCode.UNAVAILABLE and k + 1 < n:
                    continue
                raise EtcdRpcError(f"etcd LeaseKeepAlive at {self._targets[i]}: {err.code().name}: "
                                   f"{err.details()}", err.code().name) from None
            finally:
                call.cancel()
        raise AssertionError("unreachable")

    def lease_ttl(self, lease_id: int) -> int:
        """The lease's remaining TTL in seconds; -1 if it does not exist (expired or revoked)."""
        return self._unary("lease", "LeaseTimeToLive", rpc_pb2.LeaseTimeToLiveRequest(ID=int(lease_id))).TTL

    # ------------------------------------------------------------ Watch

    def _watch(self, create: rpc_pb2.WatchCreateRequest, callback, on_error, what: str) -> Watch:
        n = len(self._targets)
        start = self._current
        for k in range(n):
            i = (start + k) % n
            try:
                w = Watch(self._stubs(i)["watch"], create, callback, on_error, what).start(self.timeout_s)
                self._current = i
                break
            except EtcdRpcError as err:
                if err.code == "UNAVAILABLE" and k + 1 < n:
                    continue
                raise
        with self._lock:
            self._watches = [x for x in self._watches if x.active] + [w]
        return w

    def watch_prefix(self, prefix: Bytes, callback: Callable[[list[WatchEvent]], None], start_revision: int = 0,
                     on_error: Optional[Callable[[EtcdError], None]] = None) -> Watch:
        """callback(events) on a thread for every change under `prefix` from `start_revision`
        (0: from now). Returns once etcd has created the watch; .cancel() ends it."""
        p = b(prefix, "prefix")
        create = rpc_pb2.WatchCreateRequest(key=p, range_end=prefix_range_end(p), start_revision=int(start_revision))
        return self._watch(create, callback, on_error, f"watch {p.decode('utf-8', 'replace')}*")

    def watch_key(self, key: Bytes, callback: Callable[[list[WatchEvent]], None], start_revision: int = 0,
                  on_error: Optional[Callable[[EtcdError], None]] = None) -> Watch:
        k = b(key)
        create = rpc_pb2.WatchCreateRequest(key=k, start_revision=int(start_revision))
        return self._watch(create, callback, on_error, f"watch {k.decode('utf-8', 'replace')}")

    # ------------------------------------------------------------ end

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            watches, self._watches = self._watches, []
        for w in watches:
            w.cancel()
        with self._lock:
            self._closed = True
            channels, self._channels = self._channels, {}
        for ch, _ in channels.values():
            ch.close()

    def __enter__(self) -> "EtcdClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
