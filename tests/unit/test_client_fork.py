"""A Client (or AsyncClient) used in a child after os.fork() opens its own I/O under a new
random client_id and forgets the parent's requests in flight; the parent's client goes on as
before (gunicorn's pre-fork workers: no worker may read another's replies). The child reports
through a pipe and leaves with os._exit."""
import asyncio
import json
import os
import signal
import threading
import time

import pytest

from exoskeleton import Client, Timeout
from exoskeleton.aio import AsyncClient

from client_fakes import DelayedNode, kv_node, need_raw, reply_to


def in_child(fn) -> dict:
    """fn() in a forked child; returns the dict it returned (or {"error": ...})."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        os.close(r)
        signal.alarm(20)  # a deadlocked child must not hang the run
        try:
            out = fn()
        except BaseException as e:  # noqa: BLE001  (reported to the parent)
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(b"".join(chunks) or b'{"error": "the child said nothing"}')


def test_forked_child_gets_a_new_client_id_and_its_own_io():
    store = {b"k": b"v"}
    node = DelayedNode(kv_node(store))
    c = Client("fake0", io=node, timeout=0.2, retries=2, client_id=0x1234)
    c.set(b"p", b"parent")
    sent_before = len(node.sent)

    def child():
        got = c.get(b"k")
        c.set(b"c", b"child")
        return {"got": got.decode(), "client_id": c.client_id, "io_pid": c.io.pid, "io_is_parents": c.io is node,
                "frame_ids": sorted({f.msg.client_id for f in c.io.sent}), "pid": os.getpid(),
                "stats": c.stats, "parent_io_closed": node.closed}

    out = in_child(child)
    assert "error" not in out, out
    assert out["got"] == "v" and out["client_id"] != 0x1234
    assert out["io_pid"] == out["pid"] and not out["io_is_parents"] and out["parent_io_closed"] is False
    assert out["frame_ids"] == [out["client_id"]]   # the child's frames carry its own id
    assert out["stats"]["sent"] == 2                 # counters start again in the child
    # the parent is unaffected: same id, same I/O, still working
    assert c.client_id == 0x1234 and c.io is node and not node.closed
    assert len(node.sent) == sent_before             # nothing of the child's reached the parent's node
    assert c.get(b"p") == b"parent" and b"c" not in store
    c.close()


def test_forked_child_drops_the_parents_in_flight_requests_and_held_lock():
    # A parent thread waits on a request that is never answered; the main thread holds the
    # session lock across fork(), as another thread might at any moment. The child must neither
    # inherit that request nor deadlock on the lock.
    node = DelayedNode(lambda m, a: None if m.key == b"never" else [reply_to(m, value=m.key)])
    c = Client("fake0", io=node, timeout=1.0, retries=0)
    waiting = threading.Thread(target=lambda: pytest.raises(Timeout, c.get, b"never"))
    waiting.start()
    while not c._s.inflight:
        time.sleep(0.005)
    parent_session = c._s

    def child():
        inherited = len(c._s.inflight)
        got = c.get(b"mine")
        return {"inherited": inherited, "got": got.decode(), "in_flight_after": len(c._s.inflight),
                "new_session": c._s is not parent_session}

    with c._s.lock:
        out = in_child(child)
    assert "error" not in out, out
    assert out == {"inherited": 1, "got": "mine", "in_flight_after": 0, "new_session": True}
    waiting.join()
    assert c._s is parent_session and c.stats["timeouts"] == 1
    c.close()


@pytest.mark.parametrize("path", ["raw-pure", "raw-native"])
def test_forked_child_opens_its_own_raw_socket(path):
    need_raw(path)
    from loopback_node import LoopbackNode
    store = {}
    c = Client("lo", timeout=0.05, retries=3, native=path == "raw-native")
    node = LoopbackNode(kv_node(store), c.io.port)
    parent_port, parent_id = c.io.port, c.client_id

    def child():
        child_node = LoopbackNode(kv_node(store), c.io.port)  # the parent's answers its port only
        try:
            c.set(b"k", b"from-child")
            return {"port": c.io.port, "client_id": c.client_id, "native": c.native, "got": c.get(b"k").decode()}
        finally:
            child_node.close()

    try:
        out = in_child(child)
        assert "error" not in out, out
        assert out["port"] != parent_port and out["client_id"] != parent_id
        assert out["native"] == (path == "raw-native") and out["got"] == "from-child"
        c.set(b"k", b"from-parent")
        assert c.get(b"k") == b"from-parent" and c.io.port == parent_port and c.client_id == parent_id
    finally:
        c.close()
        node.close()


def test_forked_child_async_client_gets_a_new_client_id():
    node = DelayedNode(kv_node({b"k": b"v"}))
    c = AsyncClient("fake0", io=node, timeout=0.2)
    assert asyncio.run(c.get(b"k")) == b"v"
    parent_id = c.client_id

    def child():
        got = asyncio.run(c.get(b"k"))  # a new event loop in the child, as a worker makes one
        return {"got": got.decode(), "client_id": c.client_id, "io_pid": c.io.pid, "pid": os.getpid()}

    out = in_child(child)
    assert "error" not in out, out
    assert out["got"] == "v" and out["client_id"] != parent_id and out["io_pid"] == out["pid"]
    assert asyncio.run(c.get(b"k")) == b"v" and c.client_id == parent_id
    asyncio.run(c.close())
