"""exo_harness.history: recording, outcomes, the JSON Lines format, load/merge, and recording
through a Client (whose history= keyword wraps its I/O in exo_harness.recorder.RecordingIO)."""
import json

import pytest

from exoskeleton import Client, Timeout, wire
from exo_harness.history import FIELDS, History


class Clock:
    def __init__(self, t=1000):
        self.t = t

    def __call__(self):
        self.t += 10
        return self.t


def test_invoke_and_complete_record_times_ids_and_outcomes():
    h = History(clock=Clock())
    a = h.invoke("put", b"k", b"v", "c0")
    b = h.invoke("get", b"k", None, "c0")
    assert (a, b) == (0, 1)
    h.complete(b, "ok", b"v")
    h.complete(a, "ok", None)
    pa, pb = h.ops
    assert (pa.invoke_ns, pb.invoke_ns, pb.complete_ns, pa.complete_ns) == (1010, 1020, 1030, 1040)
    assert pa.as_dict() == {"id": 0, "client": "c0", "op": "put", "key": b"k", "value": b"v",
                            "invoke_ns": 1010, "complete_ns": 1040, "outcome": "ok", "result": None}
    assert pb.as_dict()["result"] == b"v"


def test_get_not_found_is_ok_with_no_result():
    h = History(clock=Clock())
    h.complete(h.invoke("get", b"k", None, "c"), "ok", None)
    d = h.as_dicts()[0]
    assert (d["outcome"], d["result"]) == ("ok", None)


def test_unknown_write_stays_open_and_a_get_is_never_unknown():
    h = History(clock=Clock())
    w = h.invoke("put", b"k", b"v", "c")
    g = h.invoke("get", b"k", None, "c")
    h.complete(w, "unknown")
    h.complete(g, "unknown", b"junk")
    dw, dg = h.as_dicts()
    assert (dw["outcome"], dw["complete_ns"]) == ("unknown", None)
    assert (dg["outcome"], dg["result"]) == ("fail", None)
    assert dg["complete_ns"] is not None


def test_failed_ops_keep_no_result():
    h = History(clock=Clock())
    h.complete(h.invoke("get", b"k", None, "c"), "fail", b"x")
    h.complete(h.invoke("delete", b"k", None, "c"), "fail")
    assert [(d["outcome"], d["result"]) for d in h.as_dicts()] == [("fail", None), ("fail", None)]


def test_pending_ops_are_saved_as_unknown_writes_and_failed_gets(tmp_path):
    h = History(clock=Clock())
    h.invoke("put", b"k", b"v", "c")
    h.invoke("delete", b"k", None, "c")
    h.invoke("get", b"k", None, "c")
    assert len(h.pending()) == 3
    h.save(tmp_path / "h.jsonl")
    lines = [json.loads(s) for s in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert [(d["op"], d["outcome"], d["complete_ns"]) for d in lines] == [
        ("put", "unknown", None), ("delete", "unknown", None), ("get", "fail", None)]


def test_json_lines_format_is_hex_with_every_field(tmp_path):
    h = History(clock=Clock())
    h.complete(h.invoke("put", b"k\x00", b"\xff1", "c0"), "ok")
    h.complete(h.invoke("get", b"k\x00", None, "c0"), "ok", b"\xff1")
    h.complete(h.invoke("delete", b"k\x00", b"ignored", "c0"), "fail")
    lines = h.to_json().splitlines()
    assert len(lines) == 3
    d = [json.loads(s) for s in lines]
    assert list(d[0]) == list(FIELDS)
    assert d[0] == {"id": 0, "client": "c0", "op": "put", "key": "6b00", "value": "ff31",
                    "invoke_ns": 1010, "complete_ns": 1020, "outcome": "ok", "result": None}
    assert (d[1]["value"], d[1]["result"]) == (None, "ff31")
    assert (d[2]["value"], d[2]["outcome"]) == (None, "fail")


def test_save_load_round_trip(tmp_path):
    h = History(clock=Clock())
    h.complete(h.invoke("put", b"a", b"1", "c0"), "ok")
    h.complete(h.invoke("get", b"a", None, "c0"), "ok", b"1")
    h.complete(h.invoke("put", b"b", b"2", "c0"), "unknown")
    h.invoke("get", b"b", None, "c0")  # pending at save
    p = tmp_path / "sub" / "h.jsonl"
    h.save(p)
    assert not list(p.parent.glob("*.tmp"))
    back = History.load(p)
    assert back.as_dicts() == h.as_dicts()
    assert back.to_json() == h.to_json()


def test_merge_sorts_by_invoke_time_and_keeps_clients_and_ids(tmp_path):
    a, b = History(clock=Clock(0)), History(clock=Clock(5))
    for h, name in ((a, "c0"), (b, "c1")):
        for _ in range(3):
            h.complete(h.invoke("put", b"k", name.encode(), name), "ok")
    for h, name in ((a, "c0"), (b, "c1")):
        h.save(tmp_path / f"{name}.jsonl")
    m = History.merge([History.load(tmp_path / "c0.jsonl"), History.load(tmp_path / "c1.jsonl")])
    got = [(o.client, o.id, o.invoke_ns) for o in m]
    assert got == sorted(got, key=lambda t: t[2])
    assert len(m) == 6
    assert sorted((c, i) for c, i, _ in got) == [("c0", 0), ("c0", 1), ("c0", 2),
                                                 ("c1", 0), ("c1", 1), ("c1", 2)]
    assert all(isinstance(d, dict) for d in m.as_dicts())


def test_bad_calls_and_bad_files_are_refused(tmp_path):
    h = History(clock=Clock())
    with pytest.raises(ValueError):
        h.invoke("cas", b"k", None, "c")
    with pytest.raises(ValueError):
        h.invoke("put", b"k", None, "c")
    i = h.invoke("get", b"k", None, "c")
    with pytest.raises(ValueError):
        h.complete(i, "maybe")
    h.complete(i, "ok", None)
    with pytest.raises(KeyError):
        h.complete(i, "ok", None)
    p = tmp_path / "bad.jsonl"
    p.write_text(h.to_json() + '{"id": 1, "op": "get"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        History.load(p)


# ---- recorded by a real Client over a fake link ----

class FakeIO:
    mac = bytes.fromhex("020000000301")
    ip = bytes([10, 0, 3, 1])
    port = 40000

    def __init__(self, behaviour):
        self.behaviour, self.queue = behaviour, []

    def send(self, frame):
        m = wire.decode_frame(frame).msg
        for r in self.behaviour(m) or []:
            self.queue.append(wire.encode_payload(r))

    def recv(self, timeout):
        return self.queue.pop(0) if self.queue else None

    def close(self):
        pass


def test_client_records_into_a_history_the_checker_accepts():
    from exo_chaos.linearizability import check_history
    store = {}

    def node(m):
        reply = lambda st=wire.ST_OK, v=b"": [wire.Message(m.opcode | wire.OP_REPLY, st, 0,
                                                           m.client_id, m.seq, m.key, v)]
        if m.key == b"lost":
            return None
        if m.opcode == wire.OP_PUT:
            store[m.key] = m.value
            return reply()
        if m.opcode == wire.OP_DELETE:
            store.pop(m.key, None)
            return reply()
        return reply(v=store[m.key]) if m.key in store else reply(wire.ST_NOT_FOUND)

    h = History()
    c = Client("fake0", io=FakeIO(node), timeout=0.01, retries=1, history=h, history_name="c0")
    c.set(b"a", b"1")
    assert c.get(b"a") == b"1"
    c.delete(b"a")
    assert c.get(b"a") is None
    with pytest.raises(Timeout):
        c.set(b"lost", b"x")
    with pytest.raises(Timeout):
        c.get(b"lost")
    got = [(d["op"], d["key"], d["outcome"], d["result"]) for d in h.as_dicts()]
    assert got == [("put", b"a", "ok", None), ("get", b"a", "ok", b"1"), ("delete", b"a", "ok", None),
                   ("get", b"a", "ok", None), ("put", b"lost", "unknown", None),
                   ("get", b"lost", "fail", None)]
    assert all(o.invoke_ns <= (o.complete_ns or o.invoke_ns) for o in h)
    r = check_history(h)
    assert r.ok and r.keys_checked == 2


def test_reopen_only_a_failed_op():
    h = History(clock=Clock())
    i = h.invoke("put", b"k", b"v", "c")
    with pytest.raises(KeyError):
        h.reopen(i)            # pending, not failed
    h.complete(i, "fail")
    h.reopen(i)                # a BUSY retry continues it
    assert h.ops[0].pending and h.ops[0].complete_ns is None
    h.complete(i, "ok")
    with pytest.raises(KeyError):
        h.reopen(i)            # succeeded
    assert h.as_dicts()[0]["outcome"] == "ok"
