"""The request machinery Client (threads) and AsyncClient (asyncio) share: one Session per
process holds the I/O, the client_id, the seq counter and the in-flight map, keyed by seq.

Every request in flight is an Entry with an `owner`, the call waiting for it. The Session does
the protocol and nothing else: it sends, matches a reply to its Entry by (client_id, seq, key),
retries BUSY under a new seq, resends after a deadline under the same seq, and tells the owner:
  owner.finished(entry, result)  - the request is over (a reply, or no reply after every resend)
  owner.rescheduled(entry)       - entry.deadline moved (a resend, or a BUSY backoff started)
How a caller waits (a thread on a condition variable, a coroutine on a future) is the owner's
business: client.py and aio.py. So a reply read by anyone reaches the call that sent the request.

Fork: a child process must not share its parent's sockets and request ids (both would read each
other's replies). `generation()` changes in every forked child (os.register_at_fork); a client
compares it on each call and, in a child, opens a new I/O (`io.reopen()`) under a new random
client_id, dropping the parent's in-flight state (Session.forked).
"""
from __future__ import annotations

import os
import threading
from typing import Optional

from . import wire
from .request import Request, Result

# A BUSY is retried while attempts <= retries, and past that until this long after the request
# was first sent: a chain's hand-over to a new tail leaves its slot without a read server for a
# little over 1 s (GETs BUSY, docs/replication.md), and a BUSY is never applied, so waiting it
# out costs latency, not correctness. The native engine's EngineOptions::busy_budget_s is the same
# number (tests/unit/test_client.py checks it against the built module's BUSY_BUDGET_S).
BUSY_BUDGET_S = 2.0

STAT_NAMES = ("sent", "resent", "replies", "stray_replies", "timeouts", "busy_retries")

_generation = 0
_fork_lock = threading.Lock()  # serializes the switch to a new Session in a child


def _after_fork_in_child() -> None:
    global _generation, _fork_lock
    _generation += 1
    _fork_lock = threading.Lock()  # a parent's thread may have held it at fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def generation() -> int:
    """Changes in every forked child: a Session from another generation belongs to the parent."""
    return _generation


def random_client_id() -> int:
    return int.from_bytes(os.urandom(4), "big")


class Entry:
    """One request in flight (under `seq`; a BUSY retry moves it to a new seq)."""

    __slots__ = ("request", "frame", "seq", "first_sent", "deadline", "attempts", "busy", "unsent",
                 "timeout", "retries", "owner", "tag")

    def __init__(self, request: Request, owner, timeout: float, retries: int, now: float):
        self.request = request
        self.owner = owner
        self.timeout = timeout
        self.retries = retries
        self.first_sent = now
        self.deadline = now + timeout
        self.attempts = 1
        self.busy = 0          # BUSY replies so far (each retried under a new seq)
        self.unsent = False    # waiting out a BUSY backoff: send `frame` at `deadline`
        self.tag = None        # the owner's own (e.g. the request's position)
        self.frame = b""
        self.seq = 0

    def result(self, status: Optional[int], value: bytes, flags: int, now: float) -> Result:
        return Result(self.request, status, value, flags, now - self.first_sent, self.attempts)


class Session:
    """One process's side of a client: I/O, client_id, seq, in-flight requests, counters. The
    caller serializes calls (client.py holds `lock`; aio.py runs on one event loop)."""

    proxied = False  # transport="proxy" has its own sessions (proxy_transport.py)
    busy_budget = BUSY_BUDGET_S  # the client's busy_budget= (api.py sets it)

    def __init__(self, io, client_id: Optional[int], udp_port: int):
        self.io = io
        self.client_id = random_client_id() if client_id is None else client_id
        self.udp_port = udp_port
        self.seq = 0
        self.inflight: dict[int, Entry] = {}
        self.stats = dict.fromkeys(STAT_NAMES, 0)
        self.lock = threading.Lock()
        self.generation = _generation

    def forked(self) -> "Session":
        """This session for a forked child: a new I/O from `io.reopen()` (which also closes the
        child's copy of the parent's), a new random client_id, nothing in flight."""
        reopen = getattr(self.io, "reopen", None)
        if reopen is None:
            raise RuntimeError(f"a client was used in a forked child, but its I/O ({type(self.io).__name__}) "
                               "has no reopen(): give it one, or create the client after fork()")
        return type(self)(reopen(), None, self.udp_port)

    def close(self) -> None:
        self.io.close()

    # ---- sending ----
    def next_seq(self) -> int:
        self.seq = (self.seq + 1) & 0xFFFFFFFF
        return self.seq

    def frame(self, req: Request, seq: int) -> bytes:
        msg = wire.Message(req.op, 0, 0, self.client_id, seq, req.key, req.value)
        return wire.encode_frame(wire.request_dst_mac(req.op, req.key), self.io.mac, self.io.ip,
                                 wire.request_dst_ip(req.key), self.io.port, self.udp_port, msg)

    def start(self, req: Request, owner, timeout: float, retries: int, now: float) -> Entry:
        """Sends `req` and puts it in flight for `owner`."""
        e = Entry(req, owner, timeout, retries, now)
        self._assign_seq(e)
        self.inflight[e.seq] = e
        try:
            self.io.send(e.frame)
        except BaseException:
            del self.inflight[e.seq]
            raise
        self.stats["sent"] += 1
        return e

    def _assign_seq(self, e: Entry) -> None:
        e.seq = self.next_seq()
        e.frame = self.frame(e.request, e.seq)

    # ---- events ----
    def on_data(self, data: bytes, now: float) -> None:
        """A UDP payload arrived: hand it to the owner of its request, or count it stray."""
        try:
            msg = wire.decode_payload(data)
        except wire.MalformedFrame:
            self.stats["stray_replies"] += 1
            return
        e = self.inflight.get(msg.seq)
        if msg.client_id != self.client_id or not msg.is_reply or e is None or msg.key != e.request.key:
            self.stats["stray_replies"] += 1  # e.g. the second answer to a resent request
            return
        del self.inflight[msg.seq]
        self.stats["replies"] += 1
        if msg.status == wire.ST_BUSY and (e.attempts <= e.retries or now - e.first_sent < self.busy_budget):
            # Not applied, and the node will not apply this id later: retry under a new id.
            e.busy += 1
            self._assign_seq(e)
            e.unsent = True
            e.deadline = now + min(e.timeout, 0.02 * (1 << min(e.busy, 6)))
            self.inflight[e.seq] = e
            self.stats["busy_retries"] += 1
            e.owner.rescheduled(e)
            return
        e.owner.finished(e, e.result(msg.status, msg.value, msg.flags, now))

    def expire(self, e: Entry, now: float) -> None:
        """e.deadline has passed: send it after its BUSY backoff, resend it under the same id,
        or, after every resend, finish it with no reply (status None)."""
        if e.unsent:  # BUSY backoff over: first send under the new seq
            self.io.send(e.frame)
            self.stats["sent"] += 1
            e.unsent = False
        elif e.attempts > e.retries:
            self.inflight.pop(e.seq, None)
            self.stats["timeouts"] += 1
            e.owner.finished(e, e.result(None, b"", 0, now))
            return
        else:
            self.io.send(e.frame)  # same (client_id, seq): the node sees a resend
            self.stats["resent"] += 1
        e.attempts += 1
        e.deadline = now + e.timeout
        e.owner.rescheduled(e)

    def abandon(self, entries) -> None:
        """Forget requests whose caller gave up (an exception, a cancelled task): a late reply to
        them counts as stray."""
        for e in entries:
            if self.inflight.get(e.seq) is e:
                del self.inflight[e.seq]


def current(client) -> Session:
    """client._s, the client's Session, for this process: in a forked child, a new one
    (Session.forked) that client._adopt() takes over. transport="proxy" sessions
    (proxy_transport.py) have the same `generation` and `forked()`."""
    s = client._s
    if s.generation == _generation:
        return s
    with _fork_lock:
        s = client._s
        if s.generation != _generation:
            s = s.forked()
            client._adopt(s)
    return s
