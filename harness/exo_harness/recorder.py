"""Records a Client's operations into a History by watching its I/O, the way ImpairedIO impairs it:

    io = RecordingIO(RawIO("client0-eth0"), history, "client0")   # or around an ImpairedIO
    client = Client("client0-eth0", io=io)

(`Client(..., history=h, history_name=n)` does exactly this.) The client knows nothing of it.

What is recorded, from the frames alone:

- invoke: the first send of a request id (client_id, seq), just before the frame leaves. A resend
  keeps the id and is the same operation.
- complete: the first reply to that id that the client can see (a reply, same client_id, seq and
  key, as the client itself matches replies): OK / NOT_FOUND -> "ok" (a GET's value, None = not
  found), anything else -> "fail".
- BUSY means "not applied, and never will be under this id". The op is completed "fail" at once
  (the client may give up here), but the client retries a BUSY under a new seq with the same
  request, so the next *new* id carrying the same (op, key, value) reopens it: the request stays
  one operation from its first send to the reply to its last id, as the client sees it. Two
  identical requests are interchangeable to the checker, so linking a retry to the wrong one of
  them only swaps their labels; every effect still lies inside one recorded interval.
- no reply: the op stays pending; History saves it as "unknown" (a write: maybe applied, the
  interval never closes) or "fail" (a GET: a read has no effect) - what the client concludes
  when it gives up.

Two differences from the recorder that lived inside the Client (issue 11; both only add
knowledge, so they can never make a correct system look wrong):
- A reply that arrives after the client gave up still completes the op ("ok" at the time it
  arrived): the client drops it as stray, but it is the node's answer, so the op did take effect
  inside [first send, that reply].
- A GET the client gave up on is "fail" with complete_ns None (the old recorder wrote the give-up
  time); the checker drops failed GETs either way.
And one approximation: after a request the client gave up on with BUSY, a later *identical*
request reopens the failed op instead of starting a new one (one "fail" fewer; its interval
starts at the failed request's first send, a superset of the truth).

Put the recorder outermost (Client -> RecordingIO -> ImpairedIO -> RawIO): it then records what
the client sent and saw; inside an ImpairedIO it would see the link's copies and losses instead.
"""
from __future__ import annotations

from collections import deque
from typing import Optional

from exoskeleton import wire

_OP_NAMES = {wire.OP_GET: "get", wire.OP_PUT: "put", wire.OP_DELETE: "delete"}


class RecordingIO:
    """Wraps an I/O object with send/recv/close and mac/ip/port (RawIO, ImpairedIO or a fake)."""

    def __init__(self, io, history, name: str = ""):
        self.io = io
        self.history = history
        self.name = name  # "" = the client_id in hex, as the Client named itself
        # (client_id, seq) -> (history id, request content) for every id sent and not answered.
        # Content is (client_id, opcode, key, value): what a BUSY retry repeats under a new seq.
        self._open: dict[tuple[int, int], tuple[int, tuple]] = {}
        # content -> history ids answered BUSY, oldest first: the next new id with that content
        # is the client's retry of the oldest.
        self._busy: dict[tuple, deque[int]] = {}
        self.stats = {"invoked": 0, "completed": 0, "busy_reopened": 0, "unparsed": 0}

    # the address fields the Client reads
    @property
    def mac(self):
        return self.io.mac

    @property
    def ip(self):
        return self.io.ip

    @property
    def port(self):
        return self.io.port

    def __getattr__(self, attr):
        # Anything else (a fake's `sent`, an ImpairedIO's `imp` and `stats`) is the wrapped io's.
        if attr == "io":
            raise AttributeError(attr)
        return getattr(self.io, attr)

    def send(self, frame: bytes) -> None:
        self._on_send(frame)
        self.io.send(frame)

    def recv(self, timeout: float) -> Optional[bytes]:
        data = self.io.recv(timeout)
        if data is not None:
            self._on_reply(data)
        return data

    def close(self) -> None:
        self.io.close()

    def reopen(self) -> "RecordingIO":
        """For a client used in a forked child: the wrapped I/O reopened, still recorded (into
        the child's copy of the history)."""
        return RecordingIO(self.io.reopen(), self.history, self.name)

    # ---- bookkeeping (never raises on bad frames: it only watches) ----
    def _on_send(self, frame: bytes) -> None:
        try:
            msg = wire.decode_frame(frame).msg
        except wire.MalformedFrame:
            self.stats["unparsed"] += 1
            return
        rid = (msg.client_id, msg.seq)
        if msg.is_reply or rid in self._open:
            return  # a resend: same id, same operation
        content = (msg.client_id, msg.opcode, msg.key, msg.value)
        waiting = self._busy.get(content)
        if waiting:
            hid = waiting.popleft()
            if not waiting:
                del self._busy[content]
            self.history.reopen(hid)
            self.stats["busy_reopened"] += 1
        else:
            op = _OP_NAMES[msg.opcode]
            hid = self.history.invoke(op, msg.key, msg.value if op == "put" else None,
                                      self.name or f"{msg.client_id:08x}")
            self.stats["invoked"] += 1
        self._open[rid] = (hid, content)

    def _on_reply(self, data: bytes) -> None:
        try:
            msg = wire.decode_payload(data)
        except wire.MalformedFrame:
            self.stats["unparsed"] += 1
            return
        rid = (msg.client_id, msg.seq)
        entry = self._open.get(rid)
        # The client's own test for "this reply is mine" (Client._on_reply).
        if not msg.is_reply or entry is None or entry[1][2] != msg.key:
            return  # not ours, or a second answer to an id already answered
        del self._open[rid]
        hid, content = entry
        if msg.status in (wire.ST_OK, wire.ST_NOT_FOUND):
            is_get = content[1] == wire.OP_GET
            self.history.complete(hid, "ok", msg.value if is_get and msg.status == wire.ST_OK else None)
        else:
            self.history.complete(hid, "fail")
            if msg.status == wire.ST_BUSY:
                self._busy.setdefault(content, deque()).append(hid)
        self.stats["completed"] += 1
