"""One Client shared by many threads: each call gets its own replies, whichever thread read
them off the socket (client.py's receiver role and per-call condition variables). The node is
client_fakes.DelayedNode: replies come late and out of order, from another thread."""
import random
import threading
import time

from exoskeleton import Client, Timeout, wire

from client_fakes import DelayedNode, kv_node, reply_to


def run_threads(n, work):
    """work(i) in n threads; returns the exceptions they raised."""
    errors = []

    def body(i):
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001  (reported to the test)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


def start_receiving(c, target, *args):
    """A thread running target(*args), returned once its call is the one reading the socket."""
    t = threading.Thread(target=target, args=args)
    t.start()
    deadline = time.monotonic() + 10
    while not c._s.receiving:
        assert time.monotonic() < deadline, "the thread never started receiving"
        time.sleep(0.001)
    return t


def jitter(msg, attempt):
    return random.Random(msg.seq * 7 + attempt).uniform(0, 0.004)


def test_threads_sharing_a_client_each_get_their_own_replies_out_of_order():
    store = {}
    node = DelayedNode(kv_node(store), delay=jitter)
    c = Client("fake0", io=node, timeout=0.2, retries=3, window=4)

    def work(i):
        mine = {f"t{i}:{j}": b"%d-%d" % (i, j) for j in range(12)}
        for j, (k, v) in enumerate(mine.items()):
            c.set(k, v)
            assert c.get(k) == v, (i, k)
            if j % 4 == 3:
                assert c.get_many(mine) == {kk: (vv if kk in list(mine)[:j + 1] else None) for kk, vv in mine.items()}
        assert not c.delete_many(list(mine)[:3])
        assert c.get_many(list(mine)[:4]) == {**dict.fromkeys(list(mine)[:3]), list(mine)[3]: mine[list(mine)[3]]}

    assert run_threads(8, work) == []
    assert c.stats["timeouts"] == 0
    crossed = [seq for seq, t in node.receivers.items() if node.senders[seq] != t]
    assert crossed, "every reply was read by its own thread: the dispatch was not exercised"
    c.close()


def test_threads_resend_their_own_requests_while_another_thread_receives():
    node = DelayedNode(lambda m, attempt: [reply_to(m, value=m.key)] if attempt > 1 else None, delay=jitter)
    c = Client("fake0", io=node, timeout=0.02, retries=3)

    def work(i):
        for j in range(15):
            assert c.get(b"k%d:%d" % (i, j)) == b"k%d:%d" % (i, j)

    assert run_threads(6, work) == []
    assert c.stats["resent"] >= 6 * 15 and c.stats["timeouts"] == 0
    seqs = {}
    for f in node.sent:  # every resend kept its request id
        seqs.setdefault(f.msg.seq, set()).add((f.msg.client_id, f.msg.key))
    assert all(len(ids) == 1 for ids in seqs.values())
    c.close()


def test_a_waiting_thread_gets_the_reply_the_receiving_thread_read():
    # A sends first and waits in recv for its slow reply; B's fast reply arrives meanwhile: A
    # reads it and hands it to B, who must not wait for A's.
    delays = {b"slow": 0.4, b"fast": 0.05}
    node = DelayedNode(lambda m, a: [reply_to(m, value=m.key)], delay=lambda m, a: delays[m.key])
    c = Client("fake0", io=node, timeout=2.0, retries=0)
    done = {}

    def get(key):
        assert c.get(key) == key
        done[key] = time.monotonic()

    a = start_receiving(c, get, b"slow")
    get(b"fast")
    a.join()
    assert done[b"fast"] < done[b"slow"]
    slow_seq, fast_seq = (next(f.msg.seq for f in node.sent if f.msg.key == k) for k in (b"slow", b"fast"))
    assert node.receivers[fast_seq] == node.senders[slow_seq] == a.ident  # A read B's reply
    c.close()


def test_the_receiver_role_passes_on_when_its_call_ends():
    # A receives; its reply comes first and it leaves. B, waiting, must take the socket over and
    # read its own reply when it comes, not sleep until its resend deadline (2 s).
    delays = {b"first": 0.05, b"second": 0.2}
    node = DelayedNode(lambda m, a: [reply_to(m, value=m.key)], delay=lambda m, a: delays[m.key])
    c = Client("fake0", io=node, timeout=2.0, retries=0)
    took = {}

    def get(key):
        t0 = time.monotonic()
        assert c.get(key) == key
        took[key] = time.monotonic() - t0

    a = start_receiving(c, get, b"first")
    get(b"second")
    a.join()
    assert took[b"second"] < 1.0 and c.stats["resent"] == 0
    c.close()


def test_a_thread_timing_out_does_not_disturb_the_others():
    node = DelayedNode(lambda m, a: None if m.key == b"never" else [reply_to(m, value=m.key)], delay=jitter)
    c = Client("fake0", io=node, timeout=0.02, retries=1)

    def work(i):
        if i == 0:
            for _ in range(3):
                try:
                    c.get(b"never")
                except Timeout:
                    continue
                raise AssertionError("no Timeout")
        else:
            for j in range(20):
                assert c.get(b"%d.%d" % (i, j)) == b"%d.%d" % (i, j)

    assert run_threads(4, work) == []
    assert c.stats["timeouts"] == 3
    assert c._s.inflight == {}  # nothing left behind
    c.close()


def test_threads_share_one_client_on_every_transport(make):
    # On the native transport a call that finds another thread inside takes the pure-Python
    # path beside it (a native call reads every reply itself).
    store = {}
    c = make(kv_node(store), window=8)
    c.retries = 5  # a loaded machine must not turn into a flaky test

    def work(i):
        for j in range(20):
            k = b"%d:%d" % (i, j)
            c.set(k, k)
            assert c.get(k) == k
        assert c.get_many([b"%d:%d" % (i, j) for j in range(20)]) == {b"%d:%d" % (i, j): b"%d:%d" % (i, j)
                                                                    for j in range(20)}

    assert run_threads(4, work) == []
    assert len(store) == 80 and c.stats["timeouts"] == 0
    assert c.get(b"0:0") == b"0:0"  # alone again: back on the fast path
    assert sum(1 for f in c.sent_frames if f.msg.opcode == wire.OP_PUT) >= 80
