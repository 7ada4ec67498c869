"""exo_harness.recorder.RecordingIO: recording a Client's history from its I/O.

The scripted exchange below was run through the recorder that lived inside the Client before
issue 11 (commit 0fee8cf, Client(history=...)); OLD is what it recorded, written out. The
wrapper must record the same operations, except for the two documented places where it knows
more (recorder.py's docstring): a reply after the client gave up, and a GET's give-up time.
"""
import pytest

from exo_chaos.linearizability import check_history
from exo_harness.history import History
from exo_harness.recorder import RecordingIO
from exoskeleton import Client, DefinitelyFailed, Request, Timeout, UnknownOutcome, wire


def reply(m, status=wire.ST_OK, value=b""):
    return wire.encode_payload(wire.Message(m.opcode | wire.OP_REPLY, status, 0, m.client_id,
                                            m.seq, m.key, value))


class ScriptedIO:
    """A node behind a link, scripted per key. Time `t` moves 1000 ns per frame sent or
    received, and is the History's clock, so recorded times name the frame they belong to."""

    mac = bytes.fromhex("020000000301")
    ip = bytes([10, 0, 3, 1])
    port = 40000

    def __init__(self):
        self.t = 0
        self.queue, self.held, self.sent = [], [], []
        self.copies = {}    # seq -> copies received
        self.store = {}

    def clock(self):
        return self.t

    def send(self, frame):
        self.t += 1000
        m = wire.decode_frame(frame).msg
        self.sent.append(m)
        n = self.copies[m.seq] = self.copies.get(m.seq, 0) + 1
        k, put = m.key, m.opcode == wire.OP_PUT
        if k == b"a" and put:        # the first copy is lost; the resend is applied and answered
            if n == 2:
                self.store[k] = m.value
                self.queue.append(reply(m))
        elif k == b"b" and put:      # BUSY to the first id; the retry (a new seq) is applied
            if sum(s.key == b"b" for s in self.sent) == 1:
                self.queue.append(reply(m, wire.ST_BUSY))
            else:
                self.store[k] = m.value
                self.queue.append(reply(m))
        elif k == b"c" and put:      # applied; the only reply comes after the client gave up
            self.store[k] = m.value
            if n == 3:
                self.held.append(reply(m))
        elif k == b"e" and put:      # BUSY every time: the client gives up (DefinitelyFailed)
            self.queue.append(reply(m, wire.ST_BUSY))
        elif k == b"d":              # a GET nobody answers
            pass
        else:
            self.queue.extend(self.held)   # the late reply to c arrives before this one
            self.held.clear()
            if put:
                self.store[k] = m.value
                self.queue.append(reply(m))
            else:
                self.queue.append(reply(m, value=self.store[k]) if k in self.store
                                  else reply(m, wire.ST_NOT_FOUND))

    def recv(self, timeout):
        if not self.queue:
            return None
        self.t += 1000
        return self.queue.pop(0)

    def close(self):
        pass


def run_script(c):
    c.set(b"a", b"1")                       # first send, resend, OK
    c.set(b"b", b"2")                       # BUSY, retry under a new seq, OK
    with pytest.raises(UnknownOutcome):
        c.set(b"c", b"3")                   # no reply: the client gives up
    assert c.get(b"a") == b"1"              # the late reply to c arrives first (stray to the client)
    with pytest.raises(Timeout):
        c.get(b"d")                         # a GET timeout
    with pytest.raises(DefinitelyFailed):
        c.set(b"e", b"5")                   # BUSY after every retry
    assert c.get(b"c") == b"3"
    assert c.get(b"zz") is None             # NOT_FOUND


def op(i, o, k, v, inv, done, out, res=None):
    return {"id": i, "client": "c0", "op": o, "key": k, "value": v, "invoke_ns": inv,
            "complete_ns": done, "outcome": out, "result": res}


# Recorded by the in-client recorder (commit 0fee8cf) for run_script on ScriptedIO.
OLD = [
    op(0, "put", b"a", b"1", 0, 3000, "ok"),              # sent 1000, resent 2000, reply 3000
    op(1, "put", b"b", b"2", 3000, 7000, "ok"),           # BUSY at 5000, retry 6000, OK 7000
    op(2, "put", b"c", b"3", 7000, None, "unknown"),      # three copies, no reply in time
    op(3, "get", b"a", None, 10000, 13000, "ok", b"1"),   # late c reply at 12000 dropped
    op(4, "get", b"d", None, 13000, 16000, "fail"),       # give-up time: after the 3rd copy
    op(5, "put", b"e", b"5", 16000, 22000, "fail"),       # three ids, three BUSYs
    op(6, "get", b"c", None, 22000, 24000, "ok", b"3"),
    op(7, "get", b"zz", None, 24000, 26000, "ok", None),
]
# The wrapper: the same, except op 2 (the late reply at 12000 says it was applied) and op 4
# (a GET given up on stays open; the checker drops failed GETs whatever their times).
NEW = [dict(d) for d in OLD]
NEW[2].update(complete_ns=12000, outcome="ok")
NEW[4].update(complete_ns=None)


def scripted(wrap):
    io = ScriptedIO()
    h = History(clock=io.clock)
    c = wrap(io, h)
    run_script(c)
    return h, c


def test_scripted_exchange_through_the_wrapper_gives_the_documented_history():
    h, c = scripted(lambda io, h: Client("fake0", io=RecordingIO(io, h, "c0"), timeout=0.01, retries=2,
                                                    busy_budget=0))
    assert h.as_dicts() == NEW
    assert h.pending() == [h.ops[4]]                      # the unanswered GET
    assert c.io.stats == {"invoked": 8, "completed": 10, "busy_reopened": 3, "unparsed": 0}
    assert c.stats["stray_replies"] == 1                 # the client dropped the late reply
    # Only the two documented ops differ from the in-client recorder.
    assert [i for i, (a, b) in enumerate(zip(OLD, NEW)) if a != b] == [2, 4]


def test_client_history_keyword_wraps_the_io_in_the_recorder():
    h, c = scripted(lambda io, h: Client("fake0", io=io, timeout=0.01, retries=2, history=h, busy_budget=0,
                                         history_name="c0"))
    assert isinstance(c.io, RecordingIO) and h.as_dicts() == NEW
    assert len(c.io.sent) == 16   # other attributes are the wrapped io's


def test_client_name_defaults_to_the_client_id_in_hex():
    h = History()
    c = Client("fake0", io=RecordingIO(ScriptedIO(), h), client_id=0xAB, timeout=0.01)
    c.set(b"x", b"1")
    assert [o.client for o in h] == ["000000ab"]


def _kept_by_checker(ops):
    """What the checker searches over: no failed ops, no failed GETs (linearizability.py)."""
    return [{k: d[k] for k in ("op", "key", "value", "invoke_ns", "complete_ns", "outcome", "result")}
            for d in ops if d["outcome"] != "fail"]


def test_the_checker_sees_the_same_operations_except_the_answered_write():
    old, new = _kept_by_checker(OLD), _kept_by_checker(NEW)
    assert [d for d in old if d["key"] != b"c" or d["op"] != "put"] == \
           [d for d in new if d["key"] != b"c" or d["op"] != "put"]
    # The write that got a late OK: open-ended and optional before, closed at the OK now; the
    # new interval lies inside the old one, so any order the new history allows the old did too.
    (o,) = [d for d in old if d["op"] == "put" and d["key"] == b"c"]
    (n,) = [d for d in new if d["op"] == "put" and d["key"] == b"c"]
    assert (o["invoke_ns"], o["outcome"]) == (n["invoke_ns"], "unknown")
    assert n["outcome"] == "ok" and n["complete_ns"] == 12000
    assert check_history(OLD).ok and check_history(NEW).ok


def test_pending_ops_save_as_the_client_concluded(tmp_path):
    # The client gives up on a write ("unknown") and a GET ("fail"); the wrapper never hears
    # of it, the ops stay pending, and the saved file says what the client concluded.
    h = History()
    c = Client("fake0", io=RecordingIO(ScriptedIO(), h, "c0"), timeout=0.01, retries=1)
    with pytest.raises(Timeout):
        c.get(b"d")
    with pytest.raises(UnknownOutcome):
        c.set(b"c", b"3")   # two copies: ScriptedIO answers c only at the third
    assert len(h.pending()) == 2
    h.save(tmp_path / "h.jsonl")
    back = History.load(tmp_path / "h.jsonl").as_dicts()
    assert [(d["op"], d["outcome"], d["complete_ns"]) for d in back] == [
        ("get", "fail", None), ("put", "unknown", None)]


def test_an_identical_request_during_a_busy_backoff_takes_the_busy_op():
    # window 2: [x, y, x]. The first x is answered BUSY and waits out its backoff; y finishes, so
    # the second x (a new request with the same content) is sent first and the recorder takes it
    # for the retry. The retry itself then opens a new op. Labels swap; nothing else changes:
    # two OK puts of x (and y), each interval holding one of the two real effects.
    io = ScriptedIO()
    busy = {"left": 1}
    plain = io.send

    def send(frame):
        m = wire.decode_frame(frame).msg
        if m.key == b"x" and busy["left"]:
            busy["left"] -= 1
            io.t += 1000
            io.sent.append(m)
            io.queue.append(reply(m, wire.ST_BUSY))
            return
        plain(frame)

    io.send = send
    h = History(clock=io.clock)
    c = Client("fake0", io=RecordingIO(io, h, "c0"), timeout=0.01, retries=2, window=2)
    x = Request(wire.OP_PUT, b"x", b"1")
    res = c.execute([x, Request(wire.OP_PUT, b"y", b"1"), x])
    assert [r.status for r in res] == [wire.ST_OK] * 3
    sends = [(m.key, m.seq) for m in io.sent]
    assert sends == [(b"x", 1), (b"y", 2), (b"x", 4), (b"x", 3)]   # seq 3 is the BUSY retry
    got = [(d["op"], d["key"], d["outcome"], d["invoke_ns"], d["complete_ns"]) for d in h.as_dicts()]
    assert got == [("put", b"x", "ok", 0, 6000),        # first x (BUSY at 3000) + second x's reply
                   ("put", b"y", "ok", 1000, 4000),
                   ("put", b"x", "ok", 6000, 8000)]     # the retry, as a new op
    # The in-client recorder (0fee8cf) gave x [0, 8000], y [1000, 4000], x [4000, 6000]: the
    # same ops and outcomes; each x's effect lies in one x interval of either history.
    assert check_history(h).ok


def test_identical_request_after_a_busy_give_up_reopens_the_failed_op():
    # The documented approximation: the recorder cannot tell this from a retry.
    io = ScriptedIO()
    h = History(clock=io.clock)
    c = Client("fake0", io=RecordingIO(io, h, "c0"), timeout=0.01, retries=1, busy_budget=0)
    with pytest.raises(DefinitelyFailed):
        c.set(b"e", b"5")
    assert [d["outcome"] for d in h.as_dicts()] == ["fail"]
    with pytest.raises(DefinitelyFailed):
        c.set(b"e", b"5")
    # The in-client recorder (0fee8cf) had two failed ops, [0, 4000] and [4000, 8000]; here the
    # second request continues the first. Failed ops are dropped by the checker either way.
    (d,) = h.as_dicts()
    assert (d["outcome"], d["invoke_ns"], d["complete_ns"]) == ("fail", 0, 8000)


def test_garbage_and_foreign_frames_pass_through_unrecorded():
    class Pipe:
        mac, ip, port = ScriptedIO.mac, ScriptedIO.ip, ScriptedIO.port

        def __init__(self):
            self.out, self.inbox = [], []

        def send(self, f):
            self.out.append(f)

        def recv(self, timeout):
            return self.inbox.pop(0) if self.inbox else None

        def close(self):
            pass

    p = Pipe()
    h = History()
    r = RecordingIO(p, h, "c0")
    r.send(b"\x00" * 10)
    r.send(b"\xff" * 80)
    m = wire.Message(wire.OP_GET, 0, 0, 7, 1, b"k")
    frame = wire.encode_frame(b"\xaa" * 6, p.mac, p.ip, b"\x0a\x00\x00\xfe", p.port, 7777, m)
    r.send(frame)
    wrong = [b"", b"junk", wire.encode_payload(m),                     # not a reply
             reply(wire.Message(m.opcode, 0, 0, 8, 1, b"k")),           # another client
             reply(wire.Message(m.opcode, 0, 0, 7, 2, b"k")),           # another seq
             reply(wire.Message(m.opcode, 0, 0, 7, 1, b"j"))]           # another key
    p.inbox.extend(wrong + [reply(m, value=b"v"), reply(m, value=b"w")])
    got = [r.recv(0) for _ in range(len(p.inbox))]
    assert got == wrong + [reply(m, value=b"v"), reply(m, value=b"w")]   # all handed on as is
    assert p.out == [b"\x00" * 10, b"\xff" * 80, frame]
    assert [(d["op"], d["outcome"], d["result"]) for d in h.as_dicts()] == [("get", "ok", b"v")]
    assert r.stats["unparsed"] == 4   # two sends, b"" and b"junk"


class StaleStore:
    """Two clients' shared node whose GETs of `stale_key` answer the first value ever written
    (a cache that missed an update): a known-bad system."""

    def __init__(self, stale_key):
        self.t = 0
        self.first, self.store, self.stale_key = {}, {}, stale_key

    def clock(self):
        self.t += 1
        return self.t

    def io(self):
        node = self

        class IO(ScriptedIO):
            def send(self, frame):
                m = wire.decode_frame(frame).msg
                if m.opcode == wire.OP_PUT:
                    node.first.setdefault(m.key, m.value)
                    node.store[m.key] = m.value
                    self.queue.append(reply(m))
                else:
                    src = node.first if m.key == node.stale_key else node.store
                    self.queue.append(reply(m, value=src[m.key]) if m.key in src
                                      else reply(m, wire.ST_NOT_FOUND))

            def recv(self, timeout):
                return self.queue.pop(0) if self.queue else None

        return IO()


def test_checker_rejects_a_stale_read_recorded_through_the_wrapper():
    node = StaleStore(b"k")
    histories = [History(clock=node.clock), History(clock=node.clock)]
    c0 = Client("fake0", io=RecordingIO(node.io(), histories[0], "c0"), client_id=1, timeout=0.01)
    c1 = Client("fake1", io=RecordingIO(node.io(), histories[1], "c1"), client_id=2, timeout=0.01)
    c0.set(b"k", b"1")
    c0.set(b"k", b"2")           # acknowledged before c1 reads
    assert c1.get(b"k") == b"1"  # stale
    c0.set(b"ok", b"1")
    assert c1.get(b"ok") == b"1"
    r = check_history(History.merge(histories))
    assert not r.ok and [v["key_hex"] for v in r.violations] == [b"k".hex()]
    # The same exchange against a correct node passes: the violation is the stale read's.
    node = StaleStore(None)
    histories = [History(clock=node.clock), History(clock=node.clock)]
    c0 = Client("fake0", io=RecordingIO(node.io(), histories[0], "c0"), client_id=1, timeout=0.01)
    c1 = Client("fake1", io=RecordingIO(node.io(), histories[1], "c1"), client_id=2, timeout=0.01)
    c0.set(b"k", b"1")
    c0.set(b"k", b"2")
    assert c1.get(b"k") == b"2"
    assert check_history(History.merge(histories)).ok
