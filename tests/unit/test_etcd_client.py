"""exo_common.etcd.EtcdClient against a real etcd (exo_topo.etcd.EtcdServer): put/get/prefix,
Txn compares (known-bad: a stale compare must fail), watches, leases; bad arguments are errors
that name what is wrong."""
import threading
import time
import uuid

import pytest

from etcd_fixtures import client, etcd_plain  # noqa: F401  (fixtures)
from exo_common.etcd import (EtcdClient, EtcdError, EtcdRpcError, cmp_create_revision, cmp_mod_revision,
                             cmp_value, op_delete, op_get, op_put)
from exo_common.etcd.ops import endpoint_target, prefix_range_end


def fresh() -> str:
    return f"/t/{uuid.uuid4().hex[:8]}/"


def test_prefix_range_end_and_endpoints_are_checked():
    assert prefix_range_end(b"/a/") == b"/a0"
    assert prefix_range_end(b"a\xff") == b"b"
    assert prefix_range_end(b"\xff\xff") == b"\0"
    assert endpoint_target("http://127.0.0.1:2379", tls=False) == "127.0.0.1:2379"
    assert endpoint_target("https://localhost:2379/", tls=True) == "localhost:2379"
    for bad, tls, says in [("https://127.0.0.1:1", False, "no TLS files"), ("http://127.0.0.1:1", True, "is http"),
                           ("ftp://h:1", False, "scheme"), ("127.0.0.1", False, "host:port"),
                           ("h:99999", False, "1-65535")]:
        with pytest.raises(EtcdError, match=says):
            endpoint_target(bad, tls)
    with pytest.raises(EtcdError, match="non-empty list"):
        EtcdClient("127.0.0.1:2379")


def test_put_get_prefix_delete(client):
    p = fresh()
    assert client.get(p + "missing") is None
    r1 = client.put(p + "a", b"1")
    r2 = client.put(p + "b", "2")
    assert r2 > r1
    kv = client.get(p + "a")
    assert (kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease) == (p + "a", b"1", r1, r1, 1, 0)
    client.put(p + "a", b"1b")
    kv = client.get(p + "a")
    assert kv.create_revision == r1 and kv.mod_revision > r2 and kv.version == 2
    assert [(k.key, k.value) for k in client.get_prefix(p)] == [(p + "a", b"1b"), (p + "b", b"2")]
    assert client.delete(p + "a") == 1 and client.delete(p + "a") == 0
    assert client.delete_prefix(p) == 1 and client.get_prefix(p) == []
    assert client.revision() >= r2
    with pytest.raises(EtcdError, match="value must be str or bytes"):
        client.put(p + "x", 5)


def test_txn_compares_hold_or_the_failure_ops_run(client):
    p = fresh()
    # create-if-absent: CreateRevision == 0
    ok, _ = client.txn([cmp_create_revision(p + "k", 0)], [op_put(p + "k", b"v1")])
    assert ok
    ok, resp = client.txn([cmp_create_revision(p + "k", 0)], [op_put(p + "k", b"other")], [op_get(p + "k")])
    assert not ok and resp[0].response_range.kvs[0].value == b"v1"  # known-bad: the key exists
    kv = client.get(p + "k")
    assert client.txn([cmp_mod_revision(p + "k", kv.mod_revision)], [op_put(p + "k", b"v2")])[0]
    # known-bad: a compare-and-set on the revision read before the last write must fail
    assert not client.txn([cmp_mod_revision(p + "k", kv.mod_revision)], [op_put(p + "k", b"lost")])[0]
    assert client.get(p + "k").value == b"v2"
    assert client.txn([cmp_value(p + "k", "v2")], [op_delete(p + "k")])[0]
    assert client.get(p + "k") is None


def test_watch_prefix_sees_puts_and_deletes_in_order_and_cancel_stops_it(client):
    p = fresh()
    seen, got3 = [], threading.Event()

    def cb(events):
        seen.extend((e.type, e.kv.key, e.kv.value) for e in events)
        if len(seen) >= 3:
            got3.set()
    w = client.watch_prefix(p, cb)
    assert w.revision > 0 and w.active
    client.put(p + "x", b"1")
    client.put("/elsewhere/" + p, b"not watched")
    client.put(p + "y", b"2")
    client.delete(p + "x")
    assert got3.wait(5), seen
    assert seen == [("PUT", p + "x", b"1"), ("PUT", p + "y", b"2"), ("DELETE", p + "x", b"")]
    w.cancel()
    assert not w.active and w.error is None
    client.put(p + "z", b"after cancel")
    time.sleep(0.2)
    assert len(seen) == 3


def test_watch_from_a_past_revision_replays_history(client):
    p = fresh()
    first = client.put(p + "a", b"1")
    client.put(p + "a", b"2")
    seen, done = [], threading.Event()
    w = client.watch_prefix(p, lambda evs: (seen.extend(e.kv.value for e in evs), len(seen) >= 2 and done.set()),
                            start_revision=first)
    assert done.wait(5)
    assert seen == [b"1", b"2"]
    w.cancel()


def test_leases_keep_keys_alive_and_revoke_deletes_them(client):
    p = fresh()
    lease = client.lease_grant(1)  # etcd's minimum with the test timing (docs/etcd.md)
    client.put(p + "held", b"x", lease=lease)
    assert client.get(p + "held").lease == lease
    assert client.lease_keepalive(lease) >= 1
    client.lease_revoke(lease)
    assert client.get(p + "held") is None
    assert client.lease_ttl(lease) == -1
    assert client.lease_keepalive(lease) == 0
    with pytest.raises(EtcdRpcError, match="lease not found") as err:  # known-bad: revoking twice
        client.lease_revoke(lease)
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(EtcdError, match="ttl_s"):
        client.lease_grant(0)


def test_a_lease_nobody_renews_expires_with_its_keys(client):
    p = fresh()
    lease = client.lease_grant(1)
    client.put(p + "k", b"x", lease=lease)
    t0 = time.monotonic()
    while client.get(p + "k") is not None and time.monotonic() - t0 < 5:
        time.sleep(0.05)
    took = time.monotonic() - t0
    print(f"\nunrenewed 1 s lease: key gone after {took:.2f} s")
    assert client.get(p + "k") is None and 0.5 < took < 3.0


def test_an_unreachable_etcd_is_an_error_naming_the_endpoint(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    c = EtcdClient([f"127.0.0.1:{port}"], timeout_s=0.5)
    with pytest.raises(EtcdError, match=f"Range at 127.0.0.1:{port}: (UNAVAILABLE|DEADLINE_EXCEEDED)"):
        c.get("/x")
    c.close()


def test_a_dead_first_endpoint_moves_to_the_next(etcd_plain):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    c = EtcdClient([dead, *etcd_plain.endpoints], timeout_s=1.0)
    try:
        c.put("/t/failover-endpoint", b"1")
        assert c.get("/t/failover-endpoint").value == b"1"
    finally:
        c.close()
