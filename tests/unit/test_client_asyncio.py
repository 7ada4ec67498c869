"""AsyncClient (exoskeleton.aio): the Client's calls as coroutines over the same request
machinery: the reply socket on the event loop (add_reader), each reply to the future of its
request by id, a timer per request for resends. Against client_fakes.DelayedNode (late, out
of order replies, a readable fileno) and, as root, a RawIO on lo."""
import asyncio
import random

import pytest

from exoskeleton import (AsyncClient, DefinitelyFailed, KeyTooLong, PartialResult, Request, Timeout, UnknownOutcome,
                         wire)

from client_fakes import DelayedNode, kv_node, need_raw, reply_to


def jitter(msg, attempt):
    return random.Random(msg.seq * 7 + attempt).uniform(0, 0.005)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_async_gather_of_many_gets_each_gets_its_own_reply():
    store = {b"k%d" % i: b"v%d" % i for i in range(300)}
    node = DelayedNode(kv_node(store), delay=jitter)

    async def main():
        async with AsyncClient("fake0", io=node, timeout=0.5, retries=2, window=16) as c:
            got = await asyncio.gather(*(c.get(b"k%d" % i) for i in range(300)), c.get(b"missing"))
            return got, dict(c.stats)

    got, stats = run(main())
    assert got == [b"v%d" % i for i in range(300)] + [None]
    assert stats["replies"] == 301 and stats["timeouts"] == 0 and stats["resent"] == 0
    assert node.closed  # async with closed it


def test_async_resend_on_a_dropped_reply_keeps_the_request_id():
    node = DelayedNode(lambda m, attempt: None if attempt == 1 and m.key.endswith(b"odd") else
                       [reply_to(m, value=m.key)], delay=jitter)
    c = AsyncClient("fake0", io=node, timeout=0.03, retries=2)
    keys = [b"%d:%s" % (i, b"odd" if i % 2 else b"even") for i in range(20)]
    assert run(c.get_many(keys)) == {k: k for k in keys}
    assert c.stats["resent"] == 10 and c.stats["timeouts"] == 0
    for k in keys:
        ids = [(f.msg.client_id, f.msg.seq) for f in node.sent if f.msg.key == k]
        assert len(ids) == (2 if k.endswith(b"odd") else 1) and len(set(ids)) == 1
    run(c.close())


def test_async_timeouts_name_read_failures_and_unknown_writes():
    node = DelayedNode(lambda m, a: None)
    c = AsyncClient("fake0", io=node, timeout=0.01, retries=2)
    with pytest.raises(Timeout) as err:
        run(c.get(b"k"))
    assert not isinstance(err.value, UnknownOutcome) and err.value.keys == [b"k"]
    with pytest.raises(UnknownOutcome):
        run(c.set("k", b"v"))
    with pytest.raises(UnknownOutcome):
        run(c.delete(b"k"))
    assert len(node.sent) == 9 and c.stats["timeouts"] == 3  # 1 + 2 retries each
    assert c._s.inflight == {}
    run(c.close())


def test_async_many_key_calls_report_per_key_outcomes():
    def node(m, attempt):
        if m.key == b"lost":
            return None
        if m.key == b"refused":
            return [reply_to(m, status=wire.ST_ERROR)]
        return [reply_to(m, value=m.key if m.opcode == wire.OP_GET else b"")]

    c = AsyncClient("fake0", io=DelayedNode(node, delay=jitter), timeout=0.02, retries=1)
    with pytest.raises(PartialResult) as err:
        run(c.get_many([b"a", b"lost", "b"]))
    assert err.value.values == {b"a": b"a", "b": b"b"} and err.value.failed_keys == [b"lost"]
    out = run(c.set_many({b"a": b"1", b"refused": b"2", b"lost": b"3"}))
    assert out == [b"refused", b"lost"] and out.failed == [b"refused"] and out.unknown == [b"lost"]
    assert run(c.delete_many([b"a"])) == [] and run(c.delete(b"a")) is True
    with pytest.raises(DefinitelyFailed):
        run(c.set(b"refused", b"x"))
    run(c.close())


def test_async_busy_is_retried_under_a_new_request_id():
    busy = set()

    def node(m, attempt):
        if len(busy) < 2:
            busy.add(m.seq)
            return [reply_to(m, status=wire.ST_BUSY)]
        return [reply_to(m)]

    io = DelayedNode(node)
    c = AsyncClient("fake0", io=io, timeout=0.05, retries=3)
    run(c.set(b"k", b"v"))
    assert len({f.msg.seq for f in io.sent}) == 3 and c.stats["busy_retries"] == 2
    run(c.close())


def test_async_cancelled_call_forgets_its_requests():
    c = AsyncClient("fake0", io=DelayedNode(lambda m, a: None), timeout=5.0)

    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(c.get(b"slow"), 0.05)
        return dict(c._s.inflight)

    assert run(main()) == {}
    run(c.close())


def test_async_str_keys_serializer_execute_and_errors_before_sending():
    store = {}
    io = DelayedNode(kv_node(store))
    c = AsyncClient("fake0", io=io, serializer=lambda k, v: str(v).encode(), deserializer=lambda k, d: int(d))

    async def main():
        await c.set("n", 41)
        assert await c.get("n") == 41
        assert not await c.set_many({"a": 1, "b": 2})
        assert await c.get_many(["a", "b", "c"]) == {"a": 1, "b": 2, "c": None}
        (res,) = await c.execute([Request(wire.OP_GET, "n")])
        assert res.value == b"41" and res.outcome == "ok"
        with pytest.raises(KeyTooLong):
            await c.get(b"")
        with pytest.raises(TypeError, match="keys are bytes or str"):
            await c.get(3)
        assert await c.execute([]) == []

    run(main())
    assert store == {b"n": b"41", b"a": b"1", b"b": b"2"}
    run(c.close())


def test_async_client_moves_to_a_new_event_loop():
    c = AsyncClient("fake0", io=DelayedNode(kv_node({b"k": b"v"})))
    assert run(c.get(b"k")) == b"v"
    assert run(c.get(b"k")) == b"v"  # a second asyncio.run: another loop
    run(c.close())


def test_async_client_over_a_raw_socket():
    need_raw("raw-pure")
    from loopback_node import LoopbackNode
    store = {}
    c = AsyncClient("lo", timeout=0.1, retries=3)
    node = LoopbackNode(kv_node(store), c.io.port)

    async def main():
        assert not await c.set_many({b"k%d" % i: b"v%d" % i for i in range(50)})
        return await asyncio.gather(*(c.get(b"k%d" % i) for i in range(50)))

    try:
        assert run(main()) == [b"v%d" % i for i in range(50)]
        assert c.stats["timeouts"] == 0
    finally:
        run(c.close())
        node.close()
