"""The key-value API on top of the request machinery: str keys (UTF-8), type errors, the
serializer hooks, get_many returning what it read and naming what it could not, set_many /
delete_many outcomes, delete saying whether the key existed. Every test runs on the three
transports of test_client.py (the `make` fixture, client_fakes.py)."""
import json

import pytest

from exoskeleton import (BatchOutcome, DefinitelyFailed, PartialResult, ServerError, Timeout, UnknownOutcome,
                         ValueTooLarge, wire)

from client_fakes import kv_node, reply_to


def test_str_keys_are_utf8_in_every_call(make):
    store = {}
    c = make(kv_node(store))
    c.set("ключ", b"v")
    assert store == {"ключ".encode(): b"v"}
    assert c.get("ключ") == b"v" and c.get("ключ".encode()) == b"v"
    assert c.get_many(["ключ", b"other"]) == {"ключ": b"v", b"other": None}  # keyed as the caller gave them
    assert not c.set_many({"a": b"1", "b": bytearray(b"2"), "c": memoryview(b"3")})
    assert store[b"a"] == b"1" and store[b"b"] == b"2" and store[b"c"] == b"3"
    assert not c.delete_many(["a", "b"])
    assert c.delete("ключ") is True
    assert store == {b"c": b"3"}
    assert {f.msg.key for f in c.sent_frames} == {"ключ".encode(), b"other", b"a", b"b", b"c"}


def test_a_key_of_another_type_is_a_clear_type_error_and_nothing_is_sent(make):
    c = make(kv_node({}))
    for call in (lambda: c.get(12), lambda: c.set(None, b"v"), lambda: c.delete(1.5),
                 lambda: c.get_many([b"ok", 7]), lambda: c.set_many({b"ok": b"v", 7: b"v"}),
                 lambda: c.delete_many([b"ok", object()])):
        with pytest.raises(TypeError, match="keys are bytes or str, not"):
            call()
    assert c.sent_frames == []


def test_a_str_value_needs_the_serializer(make):
    c = make(kv_node({}))
    with pytest.raises(TypeError, match="serializer"):
        c.set(b"k", "text")
    with pytest.raises(TypeError, match="serializer"):
        c.set_many({b"a": b"fine", b"b": 3})
    assert c.sent_frames == []


def test_serializer_hooks_see_the_callers_key(make):
    store, seen = {}, []

    def ser(key, value):
        seen.append(("ser", key))
        return json.dumps(value).encode()

    def de(key, data):
        seen.append(("de", key))
        return json.loads(data)

    c = make(kv_node(store), serializer=ser, deserializer=de)
    c.set("user:1", {"name": "alice"})
    assert store[b"user:1"] == b'{"name": "alice"}'
    assert c.get("user:1") == {"name": "alice"}
    assert not c.set_many({"n": 1, "s": "text"})
    assert c.get_many(["n", "s", "missing"]) == {"n": 1, "s": "text", "missing": None}
    assert ("de", "missing") not in seen  # not found: None, the deserializer is not asked
    assert seen[:2] == [("ser", "user:1"), ("de", "user:1")]


def test_get_many_returns_what_it_read_and_names_the_keys_it_could_not(make):
    def node(m, attempt):
        if m.key == b"lost":
            return None
        if m.key == b"bad":
            return [reply_to(m, status=wire.ST_ERROR)]
        if m.key == b"absent":
            return [reply_to(m, status=wire.ST_NOT_FOUND)]
        return [reply_to(m, value=m.key.upper())]

    c = make(node)
    with pytest.raises(PartialResult) as err:
        c.get_many([b"a", b"lost", "b", b"bad", b"absent"])
    e = err.value
    assert isinstance(e, Timeout) and e.outcome == "failed"  # callers catching Timeout still do
    assert e.values == {b"a": b"A", "b": b"B", b"absent": None}
    assert e.failed_keys == e.keys == [b"lost", b"bad"]
    assert type(e.errors[b"lost"]) is Timeout and type(e.errors[b"bad"]) is ServerError
    assert e.errors[b"bad"].status == wire.ST_ERROR


def test_set_many_returns_the_keys_not_stored_with_their_outcomes(make):
    def node(m, attempt):
        if m.key == b"refused":
            return [reply_to(m, status=wire.ST_ERROR)]
        if m.key == b"lost":
            return None
        return [reply_to(m)]

    c = make(node)
    out = c.set_many({b"a": b"1", b"refused": b"2", "b": b"3", b"lost": b"4"})
    assert isinstance(out, BatchOutcome)
    assert out == [b"refused", b"lost"]  # pymemcache's set_many: the keys that were not stored
    assert out.failed == [b"refused"] and out.unknown == [b"lost"] and out.succeeded == [b"a", "b"]
    assert type(out.errors[b"refused"]) is DefinitelyFailed and type(out.errors[b"lost"]) is UnknownOutcome
    assert out.errors[b"lost"].outcome == "unknown"
    assert c.set_many({}) == [] and c.set_many([(b"x", b"1"), (b"y", b"2")]) == []  # pairs work too


def test_set_many_is_pipelined_and_refuses_an_oversized_value_before_sending_any(make):
    c = make(kv_node({}), window=8, mtu=1500)
    with pytest.raises(ValueTooLarge):
        c.set_many({b"a": b"1", b"big": b"v" * 1500})
    assert c.sent_frames == []
    assert not c.set_many({b"k%d" % i: b"v" for i in range(40)})
    assert len(c.sent_frames) == 40


def test_delete_many_and_delete_report_not_found(make):
    def node(m, attempt):
        if m.key == b"gone":
            return [reply_to(m, status=wire.ST_NOT_FOUND)]  # what db nodes may report one day
        if m.key == b"lost":
            return None
        return [reply_to(m)]

    c = make(node)
    assert c.delete(b"there") is True
    assert c.delete(b"gone") is False
    out = c.delete_many([b"there", b"gone", b"lost"])
    assert out == [b"lost"] and out.unknown == [b"lost"]
    assert out.succeeded == [b"there", b"gone"] and out.not_found == [b"gone"]
    with pytest.raises(UnknownOutcome):
        c.delete(b"lost")
