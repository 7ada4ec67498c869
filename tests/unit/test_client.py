"""Client behaviour: sizes refused before sending, resends keep the request id, stray replies
are ignored, statuses map to named exceptions. Every test runs three ways (the `make` fixture):
the pure-Python path over a fake I/O, the pure-Python path over a real RawIO on the loopback
interface, and the native path (exoskeleton.native) over the same; the last two answer through
tests/unit/loopback_node.py and need root and, for native, `make build` (client_fakes.py)."""
import socket

import time

import pytest

from exoskeleton import KeyTooLong, ServerError, Timeout, ValueTooLarge, wire
from exoskeleton.keyhash import PREFIX_GET, PREFIX_OTHER, key_hash, request_ip, request_mac

from client_fakes import reply_to


def test_key_too_long_and_empty_refused_before_sending(make):
    c = make(lambda m, a: [reply_to(m)])
    with pytest.raises(KeyTooLong):
        c.get(b"k" * 251)
    with pytest.raises(KeyTooLong):
        c.set(b"", b"v")
    assert c.sent_frames == []


def test_value_too_large_refused_at_mtu(make):
    c = make(lambda m, a: [reply_to(m)], mtu=1500)
    c.set(b"k", b"v" * 1451)  # exactly fits: 1 + 1451 = 1452
    with pytest.raises(ValueTooLarge):
        c.set(b"k", b"v" * 1452)
    assert len(c.sent_frames) == 1


def test_get_found_not_found(make):
    store = {b"a": b"1"}

    def node(m, attempt):
        if m.key in store:
            return [reply_to(m, value=store[m.key])]
        return [reply_to(m, status=wire.ST_NOT_FOUND)]

    c = make(node)
    assert c.get(b"a") == b"1"
    assert c.get(b"b") is None
    assert c.get_many([b"a", b"b"]) == {b"a": b"1", b"b": None}


def test_requests_carry_the_key_hash_in_mac_and_ip_dst(make):
    """Every request's IPv4 dst is keyhash.request_ip of its key's hash (not service_ip, which
    is accepted and unused); its dst MAC carries the whole hash under the op's prefix."""
    c = make(lambda m, a: [reply_to(m)], service_ip="10.9.9.9")
    c.set(b"k1", b"v")
    c.get(b"k2")
    c.delete(b"k3")
    c.get_many([b"user:%d" % i for i in range(20)])
    assert len(c.sent_frames) == 23
    for f in c.sent_frames:
        h = key_hash(f.msg.key)
        assert f.ip_dst == request_ip(h) == (h >> 8).to_bytes(4, "big"), f.msg.key
        assert f.ip_dst != socket.inet_aton("10.9.9.9")
        prefix = PREFIX_GET if f.msg.opcode == wire.OP_GET else PREFIX_OTHER
        assert f.eth_dst == request_mac(prefix, h)
        assert f.udp_dst == 7777 and f.ip_src == c.io.ip  # decode_frame checked the IPv4 checksum
    assert len({f.ip_dst for f in c.sent_frames}) == 23


def test_resend_keeps_request_id_and_succeeds(make):
    c = make(lambda m, attempt: [reply_to(m, value=b"x")] if attempt == 3 else None)
    assert c.get(b"k") == b"x"
    seqs = {(f.msg.client_id, f.msg.seq) for f in c.sent_frames}
    assert len(c.sent_frames) == 3 and len(seqs) == 1
    assert c.stats["resent"] == 2


def test_timeout_after_retries_names_unknown_write_outcome(make):
    c = make(lambda m, a: None)
    with pytest.raises(Timeout) as err:
        c.set(b"k", b"v")
    assert "unknown" in str(err.value) and err.value.keys == [b"k"]
    assert len(c.sent_frames) == 3  # first try + 2 retries


def test_stray_and_mismatched_replies_ignored(make):
    def node(m, attempt):
        return [reply_to(m, seq=m.seq + 1000), reply_to(m, client_id=m.client_id ^ 1),
                reply_to(m, key=b"other"), reply_to(m, value=b"real")]

    c = make(node)
    assert c.get(b"k") == b"real"
    assert c.stats["stray_replies"] == 3


def test_server_error_status_raises_named_exception(make):
    c = make(lambda m, a: [reply_to(m, status=wire.ST_ERROR)])
    with pytest.raises(ServerError) as err:
        c.set(b"k", b"v")
    assert err.value.status == wire.ST_ERROR


def test_pipelined_execute_keeps_order_and_window(make):
    c = make(lambda m, a: [reply_to(m, value=m.key)], window=4)
    keys = [f"k{i}".encode() for i in range(50)]
    from exoskeleton import Request
    res = c.execute([Request(wire.OP_GET, k) for k in keys])
    assert [r.value for r in res] == keys
    assert all(r.attempts == 1 for r in res)


def test_execute_with_the_same_request_object_twice(make):
    c = make(lambda m, a: [reply_to(m, value=m.key)])
    from exoskeleton import Request
    same = Request(wire.OP_GET, b"k")
    res = c.execute([same, Request(wire.OP_GET, b"j"), same])
    assert [r.value for r in res] == [b"k", b"j", b"k"]
    assert res[0] is not res[2]


def test_get_reply_flag_from_cache(make):
    c = make(lambda m, a: [reply_to(m, value=b"v", flags=wire.FLAG_FROM_CACHE)])
    from exoskeleton import Request
    (res,) = c.execute([Request(wire.OP_GET, b"k")])
    assert res.from_cache


# ---- outcomes: definitely failed vs unknown (issue "Linearizable under faults") ----

def test_write_timeout_is_unknown_outcome_and_read_timeout_is_a_failure(make):
    from exoskeleton import UnknownOutcome
    c = make(lambda m, a: None)
    with pytest.raises(UnknownOutcome) as err:
        c.delete(b"k")
    assert err.value.outcome == "unknown"
    with pytest.raises(Timeout) as err:
        c.get(b"k")
    assert not isinstance(err.value, UnknownOutcome) and err.value.outcome == "failed"


def test_error_reply_to_a_write_is_definitely_failed(make):
    from exoskeleton import DefinitelyFailed
    c = make(lambda m, a: [reply_to(m, status=wire.ST_ERROR)])
    with pytest.raises(DefinitelyFailed) as err:
        c.set(b"k", b"v")
    assert err.value.outcome == "failed" and err.value.status == wire.ST_ERROR


def test_busy_is_retried_under_a_new_request_id(make):
    # The node records BUSY for an id (a late copy of it is never applied), so the retry must
    # be a new id; the first reply to the new id decides.
    busy_seqs = set()

    def node(m, attempt):
        if len(busy_seqs) < 2:
            busy_seqs.add(m.seq)
            return [reply_to(m, status=wire.ST_BUSY)]
        return [reply_to(m)]

    c = make(node)
    c.set(b"k", b"v")
    seqs = [f.msg.seq for f in c.sent_frames]
    assert len(seqs) == 3 and len(set(seqs)) == 3
    assert c.stats["busy_retries"] == 2


def test_busy_after_every_retry_and_the_busy_budget_is_definitely_failed(make):
    # BUSY is retried past `retries` until busy_budget (default dispatch.BUSY_BUDGET_S, 2 s)
    # after the first send (a chain's hand-over answers GETs BUSY for a little over 1 s), each
    # retry under its own id; then the last BUSY is the outcome. The native engine does the same.
    from exoskeleton import Client, DefinitelyFailed
    from exoskeleton.dispatch import BUSY_BUDGET_S
    assert Client("fake0", io=object()).busy_budget == BUSY_BUDGET_S == 2.0
    c = make(lambda m, a: [reply_to(m, status=wire.ST_BUSY)], busy_budget=0.3)
    t0 = time.monotonic()
    with pytest.raises(DefinitelyFailed):
        c.set(b"k", b"v")
    took = time.monotonic() - t0
    assert 0.3 <= took < 1.3
    assert len(c.sent_frames) > 3  # more than first try + 2 retries
    assert len({f.msg.seq for f in c.sent_frames}) == len(c.sent_frames)
    # busy_budget=0: the last retry's BUSY is the outcome (first try + 2 retries)
    c = make(lambda m, a: [reply_to(m, status=wire.ST_BUSY)], busy_budget=0)
    with pytest.raises(DefinitelyFailed):
        c.set(b"k", b"v")
    assert len(c.sent_frames) == 3


def test_both_engines_and_exo_proxy_share_one_busy_budget():
    """One number in two languages: the Python engine's BUSY_BUDGET_S and the native engine's
    default (which exo-proxy runs with)."""
    from conftest_ci import missing_or_fail
    from exoskeleton import native
    from exoskeleton.dispatch import BUSY_BUDGET_S
    mod, why = native.load()
    if mod is None:
        missing_or_fail(why)
    assert mod.BUSY_BUDGET_S == BUSY_BUDGET_S


def test_stream_calls_back_once_per_request(make):
    # the native path runs stream() in chunks of windows (Client.NATIVE_CHUNK_WINDOWS)
    from exoskeleton import Request
    c = make(lambda m, a: [reply_to(m, value=m.key)], window=4)
    keys = [f"k{i}".encode() for i in range(70)]
    got = []
    c.stream(iter(Request(wire.OP_GET, k) for k in keys), got.append)
    assert sorted(r.value for r in got) == sorted(keys)
    assert all(r.status == wire.ST_OK for r in got)
