"""Pure builders of etcd requests (no I/O): key ranges, Txn compares and ops, and the records the
wrapper hands out. The messages are etcd's own (proto/etcd/rpc.proto)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from etcd import kv_pb2, rpc_pb2

Bytes = Union[str, bytes]


class EtcdError(RuntimeError):
    """Every failure of exo_common.etcd: etcd unreachable, a refused TLS handshake, an rpc etcd
    refused, a bad argument. The message says which endpoint and rpc, and why."""


class EtcdRpcError(EtcdError):
    """etcd (or gRPC) refused an rpc; `code` is the gRPC status name, e.g. "NOT_FOUND"."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


def b(v: Bytes, what: str = "key") -> bytes:
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    raise EtcdError(f"{what} must be str or bytes, not {type(v).__name__}")


def prefix_range_end(prefix: bytes) -> bytes:
    """The range_end that makes [prefix, range_end) every key starting with `prefix`: the prefix
    with its last byte below 0xff incremented and what follows dropped (etcd's GetPrefixRangeEnd);
    "\\0" (every key) when there is no such byte."""
    p = bytearray(prefix)
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return b"\0"


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def of(cls, kv: kv_pb2.KeyValue) -> "KeyValue":
        return cls(kv.key.decode("utf-8", "replace"), bytes(kv.value), kv.create_revision, kv.mod_revision,
                   kv.version, kv.lease)


@dataclass(frozen=True)
class WatchEvent:
    type: str  # "PUT" | "DELETE"
    kv: KeyValue


def _compare(key: Bytes, target: int, **value) -> rpc_pb2.Compare:
    return rpc_pb2.Compare(result=rpc_pb2.Compare.EQUAL, target=target, key=b(key), **value)


def cmp_create_revision(key: Bytes, revision: int) -> rpc_pb2.Compare:
    """CreateRevision(key) == revision (0: the key does not exist)."""
    return _compare(key, rpc_pb2.Compare.CREATE, create_revision=int(revision))


def cmp_mod_revision(key: Bytes, revision: int) -> rpc_pb2.Compare:
    """ModRevision(key) == revision: nobody changed the key since it was read at that revision."""
    return _compare(key, rpc_pb2.Compare.MOD, mod_revision=int(revision))


def cmp_value(key: Bytes, value: Bytes) -> rpc_pb2.Compare:
    return _compare(key, rpc_pb2.Compare.VALUE, value=b(value, "value"))


def op_put(key: Bytes, value: Bytes, lease: int = 0) -> rpc_pb2.RequestOp:
    return rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b(key), value=b(value, "value"), lease=lease))


def op_get(key: Bytes) -> rpc_pb2.RequestOp:
    return rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=b(key)))


def op_delete(key: Bytes) -> rpc_pb2.RequestOp:
    return rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=b(key)))


def endpoint_target(endpoint: str, tls: bool) -> str:
    """"host:port" for grpc from "http://host:port", "https://host:port" or "host:port". A scheme
    that contradicts `tls` is an error naming the endpoint."""
    if not isinstance(endpoint, str) or not endpoint:
        raise EtcdError(f"etcd endpoint {endpoint!r}: expected host:port or http(s)://host:port")
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        scheme, rest = "", endpoint
    if scheme not in ("", "http", "https"):
        raise EtcdError(f"etcd endpoint {endpoint!r}: scheme must be http or https")
    if scheme == "https" and not tls:
        raise EtcdError(f"etcd endpoint {endpoint!r} is https but no TLS files were given")
    if scheme == "http" and tls:
        raise EtcdError(f"etcd endpoint {endpoint!r} is http but TLS files were given")
    rest = rest.rstrip("/")
    host, colon, port = rest.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise EtcdError(f"etcd endpoint {endpoint!r}: expected host:port with a port in 1-65535")
    return rest
