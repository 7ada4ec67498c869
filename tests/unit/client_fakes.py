"""What the client's tests talk to instead of a cluster: FakeIO (answers at once, in the sending
thread), DelayedNode (answers late and out of order from its own thread, like a network: for the
thread, fork and asyncio tests), a key-value behaviour, and the `make` fixture that builds a
Client three ways (pure Python over FakeIO, pure Python over RawIO on lo, native over RawIO on
lo; the last two answered by loopback_node.py, need root and, for native, `make build`).

A behaviour is `behaviour(request_msg, attempt) -> [reply Message] | None`; attempt counts the
copies of that (client_id, seq) the node has seen."""
from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from collections import deque

import pytest

from exoskeleton import Client, native, wire

from conftest_ci import missing_or_fail

MAC = bytes.fromhex("020000000301")
IP = bytes([10, 0, 3, 1])


def reply_to(msg, status=wire.ST_OK, value=b"", flags=0, **kw):
    return wire.Message(msg.opcode | wire.OP_REPLY, status, flags, kw.get("client_id", msg.client_id),
                        kw.get("seq", msg.seq), kw.get("key", msg.key), value)


def kv_node(store: dict):
    """A behaviour that is a key-value store: PUT stores, DELETE removes, GET reads."""

    def node(m, attempt):
        if m.opcode == wire.OP_PUT:
            store[m.key] = m.value
        elif m.opcode == wire.OP_DELETE:
            store.pop(m.key, None)
        elif m.key not in store:
            return [reply_to(m, status=wire.ST_NOT_FOUND)]
        return [reply_to(m, value=store[m.key] if m.opcode == wire.OP_GET else b"")]
    return node


class FakeIO:
    """Records sent frames; answers according to `behaviour(frame_msg, attempt) -> reply|None`."""

    mac = MAC
    ip = IP
    port = 40000

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.sent = []
        self.queue = []

    def send(self, frame):
        f = wire.decode_frame(frame)
        self.sent.append(f)
        attempt = sum(1 for s in self.sent if s.msg.seq == f.msg.seq)
        for reply in self.behaviour(f.msg, attempt) or []:
            self.queue.append(wire.encode_payload(reply))

    def recv(self, timeout):
        return self.queue.pop(0) if self.queue else None

    def close(self):
        pass


class DelayedNode:
    """A fake I/O whose node answers `delay(msg, attempt)` seconds after each request, from a
    delivery thread: replies arrive late and out of order. recv() blocks like a socket's;
    fileno() is readable while a reply waits (for AsyncClient); reopen() gives a forked child a
    node of its own. `senders`/`receivers` map each seq to the thread that sent the request and
    the thread that read its reply (the thread tests check replies cross threads)."""

    mac = MAC
    ip = IP
    _ports = itertools.count(41000)

    def __init__(self, behaviour, delay=lambda msg, attempt: 0.0):
        self.behaviour = behaviour
        self.delay = delay
        self.port = next(self._ports)
        self.pid = os.getpid()
        self.sent: list[wire.Frame] = []
        self.senders: dict[int, int] = {}
        self.receivers: dict[int, int] = {}
        self.closed = False
        self._attempts: dict[int, int] = {}
        self._cv = threading.Condition()
        self._due: list[tuple[float, int, bytes]] = []
        self._ready: deque[bytes] = deque()
        self._n = itertools.count()
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._thread = threading.Thread(target=self._deliver, name="delayed-node", daemon=True)
        self._thread.start()

    def send(self, frame: bytes) -> None:
        f = wire.decode_frame(frame)
        with self._cv:
            self.sent.append(f)
            self.senders[f.msg.seq] = threading.get_ident()
            attempt = self._attempts[f.msg.seq] = self._attempts.get(f.msg.seq, 0) + 1
            at = time.monotonic() + self.delay(f.msg, attempt)
            for reply in self.behaviour(f.msg, attempt) or []:
                heapq.heappush(self._due, (at, next(self._n), wire.encode_payload(reply)))
            self._cv.notify_all()

    def _deliver(self) -> None:
        with self._cv:
            while not self.closed:
                now = time.monotonic()
                while self._due and self._due[0][0] <= now:
                    self._ready.append(heapq.heappop(self._due)[2])
                    self._w.send(b"x")
                    self._cv.notify_all()
                self._cv.wait(self._due[0][0] - now if self._due else None)

    def recv(self, timeout: float):
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cv:
            while not self._ready:
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    return None
                self._cv.wait(left)
            data = self._ready.popleft()
            self._r.recv(1)
            self.receivers[wire.decode_payload(data).seq] = threading.get_ident()
            return data

    def fileno(self) -> int:
        return self._r.fileno()

    def reopen(self) -> "DelayedNode":
        if os.getpid() == self.pid:
            self.close()
        else:  # a forked child: the delivery thread (and maybe its lock) stayed with the parent
            self._r.close()
            self._w.close()
        return DelayedNode(self.behaviour, self.delay)

    def close(self) -> None:
        with self._cv:
            if self.closed:
                return
            self.closed = True
            self._cv.notify_all()
        self._thread.join(timeout=1)
        self._r.close()
        self._w.close()


TRANSPORTS = ("fake", "raw-pure", "raw-native")


def need_raw(path: str) -> None:
    """Skip (or, under CI, fail) unless raw sockets on lo, and for "raw-native" the native
    extension, are there."""
    if os.geteuid() != 0:
        missing_or_fail("raw sockets on lo need root")
    if path == "raw-native" and native.load()[0] is None:
        missing_or_fail(native.load()[1])


@pytest.fixture(params=TRANSPORTS)
def make(request):
    """make(behaviour, **client_kw) -> Client; `c.sent_frames` lists the frames the node got."""
    made = []

    def build(behaviour, **kw):
        if request.param == "fake":
            c = Client("fake0", io=FakeIO(behaviour), timeout=0.01, retries=2, **kw)
            c.sent_frames = c.io.sent
            made.append(c)
            return c
        need_raw(request.param)
        from loopback_node import LoopbackNode
        # 50 ms, not the fake's 10: a real reply crosses two sockets and a thread
        c = Client("lo", timeout=0.05, retries=2, native=request.param == "raw-native", **kw)
        node = LoopbackNode(behaviour, c.io.port)
        c.sent_frames = node.sent
        made.append(c)
        made.append(node)
        return c

    yield build
    for m in made:
        m.close()
