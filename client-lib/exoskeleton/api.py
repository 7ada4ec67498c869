"""The key-value API Client and AsyncClient share: get/set/delete, their many-key variants,
keys (bytes or str), values (bytes, or anything through the serializer hooks) and what each call
returns or raises. Each call is a plan, the requests to run and a function turning their
Results into the answer, handed to the subclass's `_run`: Client runs it and returns the answer,
AsyncClient returns a coroutine (`await c.get(k)`). So both have one definition of every call.

The transport is the session's business, not the calls': transport="raw" (raw frames,
dispatch.Session) or transport="proxy" (the host's exo-proxy over the memcached text protocol,
proxy_transport.py). Both turn Requests into the same Results, so every call answers and raises
alike over either.
"""
from __future__ import annotations

import socket
from typing import Any, Callable, Iterable, Optional

from . import dispatch, proxy_transport, wire
from .errors import KeyTooLong, PartialResult, ValueTooLarge
from .rawio import RawIO
from .request import Request, Result, error_for, key_bytes, value_bytes

Serializer = Callable[[Any, Any], Any]      # (key, value) -> bytes
Deserializer = Callable[[Any, bytes], Any]  # (key, bytes) -> value


class BatchOutcome(list):
    """What set_many / delete_many did. As a list (pymemcache's set_many returns the keys it
    failed to store): the keys not known to be applied, in call order, so it is empty (false)
    when every write was applied. Attributes, each a list of the caller's keys:
      succeeded  - applied (OK; for delete_many also NOT_FOUND)
      failed     - definitely not applied (ERROR, or BUSY after every retry): outcome "failed"
      unknown    - no reply after every resend; may have been applied: outcome "unknown"
      not_found  - delete_many: keys a node reported absent (a subset of succeeded; db nodes do
                   not report it yet, so today this stays empty)
    and `errors`: {key: the exception set()/delete() would have raised for it}."""

    def __init__(self, pairs: Iterable[tuple[Any, Result]]):
        super().__init__()
        self.succeeded: list = []
        self.failed: list = []
        self.unknown: list = []
        self.not_found: list = []
        self.errors: dict = {}
        for key, res in pairs:
            err = error_for(res, key)
            if err is None:
                self.succeeded.append(key)
                if res.status == wire.ST_NOT_FOUND:
                    self.not_found.append(key)
                continue
            self.errors[key] = err
            (self.unknown if err.outcome == "unknown" else self.failed).append(key)
            self.append(key)


_ANSWERED = (wire.ST_OK, wire.ST_NOT_FOUND)


def _ok(res: Result, key) -> Result:
    if res.status in _ANSWERED:
        return res
    err = error_for(res, key)
    if err is not None:
        raise err
    return res


TRANSPORTS = ("raw", "proxy")


class BaseClient:
    """Configuration, the per-process Session (dispatch.py, or proxy_transport.py for
    transport="proxy") and the public calls. Subclasses supply `_run(timeout, plan, *args)` and
    how requests are executed."""

    def __init__(self, iface: Optional[str], *, timeout: float, retries: int, mtu: int, udp_port: int,
                 service_ip: str, window: int, client_id: Optional[int], io, serializer: Optional[Serializer],
                 deserializer: Optional[Deserializer], transport: str = "raw", proxy=None,
                 busy_budget: float = dispatch.BUSY_BUDGET_S):
        if window < 1:
            raise ValueError("window must be at least 1")
        if transport not in TRANSPORTS:
            raise ValueError(f"transport is 'raw' (frames, needs CAP_NET_RAW) or 'proxy' (through exo-proxy), "
                             f"not {transport!r}")
        if transport == "proxy":
            for name, value in (("iface", iface), ("io", io), ("client_id", client_id)):
                if value is not None:
                    raise ValueError(f"{name}= is for transport='raw'; transport='proxy' sends through exo-proxy "
                                     f"(proxy=, default {proxy_transport.DEFAULT_ADDRESS})")
        elif proxy is not None:
            raise ValueError("proxy= is exo-proxy's address: pass transport='proxy' with it")
        elif iface is None and io is None:
            raise TypeError("the client needs iface= (the interface facing the switch), or transport='proxy'")
        self.transport = transport
        self.iface = iface
        self.timeout = timeout
        self.retries = retries
        if busy_budget < 0:
            raise ValueError("busy_budget must be at least 0 (seconds)")
        self.busy_budget = busy_budget  # a BUSY is retried until this long after the first send
        self.max_kv = wire.max_kv_bytes(mtu)
        self.udp_port = udp_port
        self.service_ip = socket.inet_aton(service_ip)  # accepted, unused (see Client's doc)
        self.window = window
        self.serializer = serializer
        self.deserializer = deserializer
        if transport == "proxy":
            address = proxy_transport.parse_address(proxy)
            self.proxy: Optional[str] = address.text
            self._proxy_check = proxy_transport.check_key
            self._adopt(self._new_proxy_session(address))
        else:
            self.proxy = None
            self._proxy_check = None
            self._adopt(self._new_session(io if io is not None else RawIO(iface), client_id))

    # ---- the Session: one per process (a forked child gets its own) ----
    def _new_session(self, io, client_id: Optional[int]) -> dispatch.Session:
        s = dispatch.Session(io, client_id, self.udp_port)
        s.busy_budget = self.busy_budget
        return s

    def _new_proxy_session(self, address: proxy_transport.Address):
        raise NotImplementedError

    def _adopt(self, session) -> None:
        self._s = session

    @property
    def io(self):
        """The I/O object (send, recv, close, mac/ip/port): a RawIO unless `io=` was given.
        transport="proxy": NotImplementedError (there is none)."""
        return dispatch.current(self).io

    @property
    def client_id(self) -> int:
        """The 32-bit id in every request: random per process (a forked child picks its own).
        transport="proxy": NotImplementedError (exo-proxy uses ids of its own)."""
        return dispatch.current(self).client_id

    @property
    def stats(self) -> dict:
        """Counters of this process's requests: sent, resent, replies, stray_replies, timeouts,
        busy_retries. transport="proxy": sent (commands), replies, timeouts (no answer from the
        cluster or the proxy) and connections (opened); the others stay 0 (resends and BUSY
        retries are the proxy's)."""
        return dispatch.current(self).stats

    def check(self, req: Request) -> None:
        if not 1 <= len(req.key) <= wire.MAX_KEY_LEN:
            raise KeyTooLong(f"key is {len(req.key)} bytes; keys are 1..{wire.MAX_KEY_LEN} bytes")
        reply_value = len(req.value) if req.op == wire.OP_PUT else 0
        if len(req.key) + reply_value > self.max_kv:
            raise ValueTooLarge(f"key + value is {len(req.key) + reply_value} bytes; at this MTU "
                                f"at most {self.max_kv} fit one frame")
        if self._proxy_check is not None:
            self._proxy_check(req.key)

    def _run(self, timeout: Optional[float], plan, *args):
        raise NotImplementedError

    # ---- public API (AsyncClient: each returns a coroutine) ----
    def get(self, key, timeout: Optional[float] = None):
        """The value (deserialized), or None if the key does not exist. Raises Timeout (no reply
        after every resend) or ServerError."""
        return self._run(timeout, self._plan_get, key)

    def set(self, key, value, timeout: Optional[float] = None):
        """Stores value (bytes, or what the serializer makes of it). Returns None once applied;
        raises UnknownOutcome (no reply: maybe applied) or DefinitelyFailed (not applied)."""
        return self._run(timeout, self._plan_write, wire.OP_PUT, key, value)

    def delete(self, key, timeout: Optional[float] = None):
        """Deletes key: True once applied, False if the node reported NOT_FOUND (the key did not
        exist). Raises as set() does."""
        return self._run(timeout, self._plan_write, wire.OP_DELETE, key, None)

    def get_many(self, keys: Iterable, timeout: Optional[float] = None):
        """{key: value or None (not found)} for every key, pipelined (`window` in flight). If
        some keys could not be read (no reply after every resend, or an error status), raises
        PartialResult (a Timeout): `.values` holds what was read, `.failed_keys` the rest."""
        return self._run(timeout, self._plan_get_many, keys)

    def set_many(self, mapping, timeout: Optional[float] = None):
        """Stores every {key: value} (a mapping, or (key, value) pairs), pipelined. Returns a
        BatchOutcome: the keys not known to be stored (empty when all were), with `.failed`,
        `.unknown`, `.succeeded` and `.errors`. Size and type errors raise before anything is sent."""
        return self._run(timeout, self._plan_write_many, wire.OP_PUT, mapping)

    def delete_many(self, keys: Iterable, timeout: Optional[float] = None):
        """Deletes every key, pipelined; returns a BatchOutcome as set_many does (and
        `.not_found`, empty until db nodes report NOT_FOUND)."""
        return self._run(timeout, self._plan_write_many, wire.OP_DELETE, keys)

    # ---- plans: (requests, finish(results) -> answer) ----
    def _encode(self, key, value) -> bytes:
        return value_bytes(value if self.serializer is None else self.serializer(key, value))

    def _decode(self, key, res: Result):
        if res.status != wire.ST_OK:
            return None
        return res.value if self.deserializer is None else self.deserializer(key, res.value)

    def _plan_get(self, key):
        return [Request(wire.OP_GET, key_bytes(key))], lambda results: self._decode(key, _ok(results[0], key))

    def _plan_write(self, op: int, key, value):
        req = Request(op, key_bytes(key), self._encode(key, value) if op == wire.OP_PUT else b"")

        def finish(results):
            res = _ok(results[0], key)
            return None if op == wire.OP_PUT else res.status != wire.ST_NOT_FOUND
        return [req], finish

    def _plan_get_many(self, keys: Iterable):
        keys = list(keys)

        def finish(results):
            values, errors = {}, {}
            found, absent, de = wire.ST_OK, wire.ST_NOT_FOUND, self.deserializer
            for key, res in zip(keys, results):  # inlined _decode: this loop is per key
                status = res.status
                if status == found:
                    values[key] = res.value if de is None else de(key, res.value)
                elif status == absent:
                    values[key] = None
                else:
                    errors[key] = error_for(res, key)
            if errors:
                raise PartialResult(f"could not read {len(errors)} of {len(keys)} keys", values, errors)
            return values
        get = wire.OP_GET
        return [Request(get, k if type(k) is bytes else key_bytes(k)) for k in keys], finish

    def _plan_write_many(self, op: int, items):
        if op == wire.OP_PUT:
            pairs = list(items.items() if hasattr(items, "items") else items)
            keys = [k for k, _ in pairs]
            reqs = [Request(op, key_bytes(k), self._encode(k, v)) for k, v in pairs]
        else:
            keys = list(items)
            reqs = [Request(op, key_bytes(k)) for k in keys]
        return reqs, lambda results: BatchOutcome(zip(keys, results))
