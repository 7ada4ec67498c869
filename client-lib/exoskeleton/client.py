"""The Exoskeleton client: GET/SET/DELETE over raw Ethernet frames.

The client keeps no cluster state: the key hash in the destination MAC is all the switch
needs. Requests are pipelined (up to `window` in flight); each is resent with the same
(client_id, seq) after `timeout` seconds, at most `retries` times. A db node applies a request
id at most once and answers a resend with the first outcome (docs/two-phase-commit.md).

A BUSY reply means "not applied, try again later" (e.g. the cache node holding the key did not
answer the two-phase commit). The node remembers that outcome for the id, so a delayed copy of
the request can never be applied later; the client therefore retries under a *new* seq after a
short backoff. So the outcome of a write is decided by its last id alone: a reply says applied
(OK) or not (ERROR, BUSY); no reply to the last id leaves it unknown.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional

from . import wire
from .errors import DefinitelyFailed, KeyTooLong, ServerError, Timeout, UnknownOutcome, ValueTooLarge
from .rawio import RawIO

OP_NAMES = {wire.OP_GET: "get", wire.OP_PUT: "put", wire.OP_DELETE: "delete"}
STATUS_NAMES = {wire.ST_OK: "OK", wire.ST_NOT_FOUND: "NOT_FOUND", wire.ST_ERROR: "ERROR",
                wire.ST_BAD_REQUEST: "BAD_REQUEST", wire.ST_BUSY: "BUSY"}


@dataclass(frozen=True)
class Request:
    op: int
    key: bytes
    value: bytes = b""


@dataclass(frozen=True)
class Result:
    request: Request
    status: Optional[int]  # None: no reply after every resend
    value: bytes
    flags: int
    latency_s: float
    attempts: int

    @property
    def from_cache(self) -> bool:
        return bool(self.flags & wire.FLAG_FROM_CACHE)

    @property
    def outcome(self) -> str:
        """"ok" (OK or NOT_FOUND), "unknown" (a write with no reply: maybe applied) or
        "failed" (definitely no effect: a refused write, or any failed read)."""
        if self.status in (wire.ST_OK, wire.ST_NOT_FOUND):
            return "ok"
        if self.status is None and self.request.op != wire.OP_GET:
            return "unknown"
        return "failed"


@dataclass
class _InFlight:
    request: Request
    frame: bytes
    first_sent: float
    deadline: float
    attempts: int
    busy: int = 0              # BUSY replies so far (each retried under a new seq)
    unsent: bool = False       # waiting out a BUSY backoff: send `frame` at `deadline`


class Client:
    """Talks to an Exoskeleton cluster through `iface` (needs CAP_NET_RAW).

    Not thread-safe: each call reads replies off the shared socket and drops those it did not
    ask for, so two threads sharing a Client lose each other's replies. Use one per thread.

    `history=History(), history_name="client0"`: record every operation for the linearizability
    checker. This only wraps `io` in exo_harness.recorder.RecordingIO (needs that package).

    `native`: run execute() (and so get, set, delete, get_many) in the native hot path
    (exoskeleton.native: C++, batched sendmmsg/recvmmsg, same rules as stream()). None (default):
    when it is built and the client owns a real RawIO; False: never; True: required (raises
    RuntimeError saying why when it cannot). A fake or recording I/O always uses this file's
    pure-Python path, which stays the reference: both pass the same tests."""

    def __init__(self, iface: str, *, timeout: float = 0.25, retries: int = 4, mtu: int = 1500,
                 udp_port: int = 7777, service_ip: str = "10.0.0.254", window: int = 32,
                 client_id: Optional[int] = None, io=None, history=None, history_name: str = "",
                 native: Optional[bool] = None):
        self.io = io if io is not None else RawIO(iface)  # io: tests pass a fake
        if history is not None:
            # A convenience kept for existing callers: recording is a wrapper around the I/O
            # (exo_harness.recorder), not part of the client. Imported only here, so the client
            # library does not depend on the harness.
            from exo_harness.recorder import RecordingIO
            self.io = RecordingIO(self.io, history, history_name)
        self.timeout = timeout
        self.retries = retries
        self.max_kv = wire.max_kv_bytes(mtu)
        self.udp_port = udp_port
        self.service_ip = socket.inet_aton(service_ip)
        self.window = window
        self.client_id = client_id if client_id is not None else int.from_bytes(os.urandom(4), "big")
        self._seq = 0
        self.stats = {"sent": 0, "resent": 0, "replies": 0, "stray_replies": 0, "timeouts": 0,
                      "busy_retries": 0}
        self._native = self._native_pipeline(native)

    @property
    def native(self) -> bool:
        """Whether execute() runs in the native hot path."""
        return self._native is not None

    def native_stats(self) -> Optional[dict]:
        """The native path's lifetime counters (those of self.stats plus send_calls and
        recv_calls, the system calls that carried them), or None on the pure-Python path."""
        return None if self._native is None else self._native.stats()

    def _native_pipeline(self, wanted: Optional[bool]):
        if wanted is False:
            return None
        from . import native
        mod, why = native.load()
        if mod is not None and type(self.io) is not RawIO:
            why = "the client's I/O is not a plain RawIO (a fake, or recording a history)"
        if mod is None or why:
            if wanted:
                raise RuntimeError(f"native client path unavailable: {why}")
            return None
        return mod.Pipeline(self.io.tx.fileno(), self.io.rx.fileno(), self.io.mac, self.io.ip, self.io.port,
                            self.service_ip, self.udp_port, self.client_id)

    # ---- public API ----
    def get(self, key: bytes, timeout: Optional[float] = None) -> Optional[bytes]:
        """The value, or None if the key does not exist."""
        r = self._one(Request(wire.OP_GET, key), timeout)
        return r.value if r.status == wire.ST_OK else None

    def set(self, key: bytes, value: bytes, timeout: Optional[float] = None) -> None:
        self._one(Request(wire.OP_PUT, key, value), timeout)

    def delete(self, key: bytes, timeout: Optional[float] = None) -> None:
        self._one(Request(wire.OP_DELETE, key), timeout)

    def get_many(self, keys: Iterable[bytes], timeout: Optional[float] = None) -> dict[bytes, Optional[bytes]]:
        keys = list(keys)
        results = self.execute([Request(wire.OP_GET, k) for k in keys], timeout=timeout)
        lost = [r.request.key for r in results if r.status is None]
        if lost:
            raise Timeout(f"no reply for {len(lost)} of {len(keys)} keys", lost)
        for r in results:
            _raise_for_status(r)
        return {r.request.key: (r.value if r.status == wire.ST_OK else None) for r in results}

    def execute(self, requests: list[Request], timeout: Optional[float] = None) -> list[Result]:
        """Run requests pipelined; results in request order. Never raises Timeout (status None)."""
        for req in requests:
            self.check(req)
        if self._native is not None:
            return self._execute_native(requests, self.timeout if timeout is None else timeout)
        out: list[Optional[Result]] = [None] * len(requests)
        # Positions per request object: the same (frozen) Request may be listed twice.
        slots: dict[int, list[int]] = {}
        for i, r in enumerate(requests):
            slots.setdefault(id(r), []).append(i)

        def collect(res: Result) -> None:
            pending = slots[id(res.request)]
            out[next(i for i in pending if out[i] is None)] = res

        self.stream(iter(requests), collect, timeout=timeout)
        return out  # type: ignore[return-value]

    def stream(self, requests: Iterator[Request], on_result: Callable[[Result], None],
               timeout: Optional[float] = None, stop_at: Optional[float] = None) -> None:
        """Keep up to `window` requests in flight until `requests` is exhausted (or the
        monotonic time `stop_at` passes), calling on_result for each finished request."""
        timeout = self.timeout if timeout is None else timeout
        if self._native is not None:
            return self._stream_native(requests, on_result, timeout, stop_at)
        inflight: dict[int, _InFlight] = {}
        exhausted = False
        while True:
            now = time.monotonic()
            while not exhausted and len(inflight) < self.window and (stop_at is None or now < stop_at):
                req = next(requests, None)
                if req is None:
                    exhausted = True
                    break
                self.check(req)
                seq = self._next_seq()
                frame = self._frame(req, seq)
                self.io.send(frame)
                self.stats["sent"] += 1
                inflight[seq] = _InFlight(req, frame, now, now + timeout, 1)
            if not inflight and (exhausted or (stop_at is not None and now >= stop_at)):
                return
            next_deadline = min(f.deadline for f in inflight.values())
            data = self.io.recv(next_deadline - time.monotonic())
            if data is not None:
                self._on_reply(data, inflight, on_result, timeout)
            now = time.monotonic()
            for seq, f in list(inflight.items()):
                if f.deadline > now:
                    continue
                if f.unsent:  # BUSY backoff over: first send under the new seq
                    self.io.send(f.frame)
                    self.stats["sent"] += 1
                    f.unsent = False
                    f.attempts += 1
                    f.deadline = now + timeout
                elif f.attempts > self.retries:
                    del inflight[seq]
                    self.stats["timeouts"] += 1
                    on_result(Result(f.request, None, b"", 0, now - f.first_sent, f.attempts))
                else:
                    self.io.send(f.frame)  # same (client_id, seq): the node sees a resend
                    self.stats["resent"] += 1
                    f.attempts += 1
                    f.deadline = now + timeout

    def check(self, req: Request) -> None:
        if not 1 <= len(req.key) <= wire.MAX_KEY_LEN:
            raise KeyTooLong(f"key is {len(req.key)} bytes; keys are 1..{wire.MAX_KEY_LEN} bytes")
        reply_value = len(req.value) if req.op == wire.OP_PUT else 0
        if len(req.key) + reply_value > self.max_kv:
            raise ValueTooLarge(f"key + value is {len(req.key) + reply_value} bytes; at this MTU "
                                f"at most {self.max_kv} fit one frame")

    def close(self) -> None:
        self.io.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- internals ----
    # stream() on the native path hands the requests over in chunks of this many windows: each
    # chunk ends when its slowest request does, so a chunk of 8 windows keeps the pipe full for
    # all but the last window's worth of its requests.
    NATIVE_CHUNK_WINDOWS = 8

    def _stream_native(self, requests: Iterator[Request], on_result: Callable[[Result], None], timeout: float,
                       stop_at: Optional[float]) -> None:
        chunk = self.window * self.NATIVE_CHUNK_WINDOWS
        while stop_at is None or time.monotonic() < stop_at:
            batch = []
            for req in requests:
                self.check(req)
                batch.append(req)
                if len(batch) == chunk:
                    break
            if not batch:
                return
            for res in self._execute_native(batch, timeout):
                on_result(res)

    def _execute_native(self, requests: list[Request], timeout: float) -> list[Result]:
        before = self._native.stats()
        raw, self._seq = self._native.execute([(r.op, r.key, r.value) for r in requests], timeout, self.retries,
                                              self.window, self._seq)
        after = self._native.stats()
        for k in self.stats:
            self.stats[k] += after[k] - before[k]
        return [Result(req, st, val, flags, lat, att) for req, (st, val, flags, lat, att) in zip(requests, raw)]

    def _one(self, req: Request, timeout: Optional[float]) -> Result:
        res = self.execute([req], timeout=timeout)[0]
        if res.status is None and req.op == wire.OP_GET:
            raise Timeout(f"GET of {req.key!r}: no reply after {res.attempts} attempts", [req.key])
        if res.status is None:
            raise UnknownOutcome(f"{OP_NAMES[req.op].upper()} of {req.key!r}: no reply after "
                                 f"{res.attempts} attempts; outcome unknown (it may have been applied)",
                                 [req.key])
        _raise_for_status(res)
        return res

    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        return self._seq

    def _frame(self, req: Request, seq: int) -> bytes:
        msg = wire.Message(req.op, 0, 0, self.client_id, seq, req.key, req.value)
        # The IPv4 destination carries the key hash's top 32 bits (keyhash.request_ip), which
        # the switch's Ruleset 2 matches; `service_ip` is accepted but no longer sent.
        return wire.encode_frame(wire.request_dst_mac(req.op, req.key), self.io.mac, self.io.ip,
                                 wire.request_dst_ip(req.key), self.io.port, self.udp_port, msg)

    def _on_reply(self, data: bytes, inflight: dict[int, _InFlight],
                  on_result: Callable[[Result], None], timeout: float) -> None:
        try:
            msg = wire.decode_payload(data)
        except wire.MalformedFrame:
            self.stats["stray_replies"] += 1
            return
        f = inflight.get(msg.seq)
        if msg.client_id != self.client_id or not msg.is_reply or f is None or msg.key != f.request.key:
            self.stats["stray_replies"] += 1  # e.g. the second answer to a resent request
            return
        del inflight[msg.seq]
        self.stats["replies"] += 1
        if msg.status == wire.ST_BUSY and f.attempts <= self.retries:
            # Not applied, and the node will not apply this id later: retry under a new id.
            f.busy += 1
            seq = self._next_seq()
            f.frame = self._frame(f.request, seq)
            f.unsent = True
            f.deadline = time.monotonic() + min(timeout, 0.02 * (1 << min(f.busy, 6)))
            inflight[seq] = f
            self.stats["busy_retries"] += 1
            return
        on_result(Result(f.request, msg.status, msg.value, msg.flags,
                         time.monotonic() - f.first_sent, f.attempts))


def _raise_for_status(res: Result) -> None:
    if res.status in (wire.ST_OK, wire.ST_NOT_FOUND):
        return
    name = STATUS_NAMES.get(res.status, str(res.status))
    if res.request.op == wire.OP_GET:
        raise ServerError(f"{name} for GET of {res.request.key!r}", res.status, res.request.key)
    raise DefinitelyFailed(f"{name} for {OP_NAMES[res.request.op].upper()} of {res.request.key!r}: "
                           f"not applied (definitely failed)", res.status, res.request.key)
