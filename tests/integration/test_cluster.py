"""End-to-end behaviour of a real cluster in Mininet: routing by key hash through OVS,
cache hits, forwarded misses, writes to cached keys, and malformed input; the cluster runs with
TLS on (OpenFlow and gRPC), as every test cluster does."""
from __future__ import annotations

import socket
import struct
import subprocess
import time

import grpc
import pytest

from exo_topo.tls_setup import ssl_is
from exoproto import control_pb2 as pb
from exoproto import control_pb2_grpc as rpc
from exoskeleton import wire
from exoskeleton.keyhash import PREFIX_GET, key_hash, request_mac

from .helpers import cache_for, counters, delta, matching_flow, owner_db, wait_flow_packets

pytestmark = pytest.mark.mininet


def cache_key(cl, key: bytes) -> str:
    node = cache_for(cl.cfg, key)
    rep = cl.stubs.cache(node).Cache(pb.KeysRequest(keys=[key]), timeout=10)
    assert rep.done == 1, rep
    return node


def test_switch_holds_rulesets_1_and_3(cluster):
    flows = cluster.stubs.rules(0).flows
    n_nodes = len(cluster.cfg.cache_nodes) + len(cluster.cfg.db_nodes) + len(cluster.cfg.clients)
    by = {r: [f for f in flows if f.ruleset == r] for r in (1, 2, 3)}
    assert len(by[3]) == 1 << cluster.cfg.switch.partition_bits
    node_macs = {f.eth_dst for f in by[1] if f.eth_dst}
    assert {n.mac for n in [*cluster.cfg.cache_nodes, *cluster.cfg.db_nodes, *cluster.cfg.clients]} <= node_macs
    assert len(node_macs) >= n_nodes


def test_put_get_delete(cluster):
    with cluster.client() as c:
        c.set(b"pgd:1", b"first")
        assert c.get(b"pgd:1") == b"first"
        c.set(b"pgd:1", b"second")
        assert c.get(b"pgd:1") == b"second"
        c.delete(b"pgd:1")
        assert c.get(b"pgd:1") is None


def test_uncached_get_is_served_by_owning_db_node(cluster):
    key = b"uncached:42"
    owner = owner_db(cluster.cfg, key)
    with cluster.client() as c:
        c.set(key, b"v")
        flow_before = matching_flow(cluster.stubs.rules(3).flows, request_mac(PREFIX_GET, key_hash(key)))
        before = counters(cluster)
        for _ in range(20):
            assert c.get(key) == b"v"
    after = counters(cluster)
    gets = delta(after, before, "gets")
    assert gets[owner] == 20
    assert all(v == 0 for n, v in gets.items() if n != owner), gets
    flow_after = wait_flow_packets(cluster, 3, request_mac(PREFIX_GET, key_hash(key)),
                                   flow_before.packet_count + 20)
    assert flow_after.out_port == cluster.cfg.node(owner).switch_port
    assert flow_after.packet_count - flow_before.packet_count >= 20


def test_cached_get_is_served_by_cache_node(cluster):
    key = b"hot:7"
    with cluster.client() as c:
        c.set(key, b"hot-value")
        node = cache_key(cluster, key)
        rule = matching_flow(cluster.stubs.rules(2).flows, request_mac(PREFIX_GET, key_hash(key)))
        assert rule is not None and rule.out_port == cluster.cfg.node(node).switch_port
        before = counters(cluster)
        results = c.execute([c_req(key) for _ in range(30)])
    after = counters(cluster)
    assert all(r.value == b"hot-value" and r.from_cache for r in results)
    assert delta(after, before, "hits")[node] == 30
    db_gets = {n: v for n, v in delta(after, before, "gets").items() if n.startswith("db")}
    assert sum(db_gets.values()) == 0, db_gets
    rule_after = wait_flow_packets(cluster, 2, request_mac(PREFIX_GET, key_hash(key)), rule.packet_count + 30)
    assert rule_after.packet_count - rule.packet_count >= 30


def c_req(key: bytes):
    from exoskeleton import Request
    return Request(wire.OP_GET, key)


def test_write_to_cached_key_is_seen_by_next_get(cluster):
    key = b"hot:write"
    with cluster.client() as c:
        c.set(key, b"old")
        node = cache_key(cluster, key)
        for i in range(10):
            c.set(key, b"new-%d" % i)
            (res,) = c.execute([c_req(key)])
            assert res.value == b"new-%d" % i and res.from_cache
        c.delete(key)
        assert c.get(key) is None
    stats = cluster.stubs.stats(owner_db(cluster.cfg, key))
    assert stats["writes_propagated"] >= 11
    assert cluster.stubs.stats(node)["commits"] >= 11


def test_get_for_dropped_entry_with_live_rule_is_forwarded(cluster):
    key = b"hot:dropped"
    owner = owner_db(cluster.cfg, key)
    with cluster.client() as c:
        c.set(key, b"still-here")
        node = cache_key(cluster, key)
        cluster.stubs.cache(node).DropEntries(pb.KeysRequest(keys=[key]), timeout=5)
        assert matching_flow(cluster.stubs.rules(2).flows, request_mac(PREFIX_GET, key_hash(key))) is not None
        before = counters(cluster)
        (res,) = c.execute([c_req(key)])
    after = counters(cluster)
    assert res.status == wire.ST_OK and res.value == b"still-here" and not res.from_cache
    # FORWARDED is a request flag only: the db node's reply to the forwarded GET carries none
    # (docs/wire-format.md, "Flags in replies").
    assert res.flags == 0
    assert delta(after, before, "forwarded_misses")[node] == 1
    assert delta(after, before, "forwarded_gets")[owner] == 1


def _exchange(c, msg: wire.Message, timeout: float = 2.0) -> wire.Message | None:
    """Send one raw request with the given id through the client's sockets; its reply, if any."""
    c.io.send(wire.encode_frame(wire.request_dst_mac(msg.opcode, msg.key), c.io.mac, c.io.ip,
                                wire.request_dst_ip(msg.key), c.io.port, c.udp_port, msg))
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        data = c.io.recv(left)
        if data is None:
            break
        rep = wire.decode_payload(data)
        if rep.client_id == msg.client_id and rep.seq == msg.seq and rep.key == msg.key:
            return rep
    return None


def test_a_reused_request_id_gets_the_first_outcome_and_is_not_applied(cluster):
    """The independent client's finding: a write reusing an answered (client_id, seq) with other
    content was applied. Now every copy gets the first outcome and none is applied again."""
    key = b"dedup:reused"
    owner = owner_db(cluster.cfg, key)
    other = next(k for k in (b"dedup:other:%d" % i for i in range(1000)) if owner_db(cluster.cfg, k) == owner)
    seq = 0x7000_0001  # far from the client's own seqs, which start at 1
    with cluster.client() as c:
        cid = c.client_id
        before = counters(cluster)
        first = _exchange(c, wire.Message(wire.OP_PUT, 0, 0, cid, seq, key, b"first"))
        assert first is not None and first.status == wire.ST_OK
        for copy in (wire.Message(wire.OP_PUT, 0, 0, cid, seq, key, b"second"),   # other value
                     wire.Message(wire.OP_DELETE, 0, 0, cid, seq, key),            # other opcode
                     wire.Message(wire.OP_PUT, 0, 0, cid, seq, other, b"x")):      # other key
            rep = _exchange(c, copy)
            assert rep is not None and rep.status == wire.ST_OK, copy
        assert c.get(key) == b"first"
        assert c.get(other) is None
    after = counters(cluster)
    assert delta(after, before, "duplicate_writes")[owner] == 3
    assert delta(after, before, "duplicate_id_conflicts")[owner] == 3


def test_the_control_plane_runs_over_tls(cluster):
    """The cluster came up with TLS on (docs/security.md): the switch reaches the controller at
    an ssl: target with the `switch` certificate, a plain-TCP OpenFlow peer is refused and
    counted, and the controller's gRPC answers no caller without a certificate and counts it."""
    cfg = cluster.cfg
    c = cfg.controller
    assert not cfg.security.insecure_dev_mode
    targets = subprocess.run(["ovs-vsctl", "get-controller", cfg.switch.bridge], capture_output=True,
                             text=True, check=True).stdout.split()
    assert targets == [f"ssl:{c.openflow_host}:{c.openflow_port}"]
    assert ssl_is(cfg.security.cert_dir)
    before = cluster.stubs.controller_stats()
    assert before["switch_connected"] == 1
    # Plain TCP, as any host could: HELLO gets no HELLO back, the controller closes the connection.
    with socket.create_connection((c.openflow_host, c.openflow_port), timeout=10) as s:
        s.sendall(struct.pack("!BBHI", 4, 0, 8, 1))
        try:
            got = s.recv(8)
        except ConnectionResetError:
            got = b""
    assert got == b"" or got[:1] != b"\x04"  # at most a TLS alert, never an OpenFlow message
    deadline = time.monotonic() + 10
    while cluster.stubs.controller_stats()["openflow_refused"] <= before["openflow_refused"]:
        assert time.monotonic() < deadline, "the plain-TCP peer was not counted"
        time.sleep(0.2)
    after = cluster.stubs.controller_stats()
    assert after["switch_connects"] == before["switch_connects"] and after["switch_connected"] == 1
    plain = grpc.insecure_channel(c.grpc)
    try:
        with pytest.raises(grpc.RpcError) as e:
            rpc.ControllerStub(plain).Stats(pb.StatsRequest(), timeout=5)
    finally:
        plain.close()
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    # ... and counts it: the handshake failed inside gRPC, before any caller check (docs/security.md).
    deadline = time.monotonic() + 10
    while cluster.stubs.controller_stats()["tls_handshake_refused"] <= after["tls_handshake_refused"]:
        assert time.monotonic() < deadline, "the plaintext gRPC caller was not counted in tls_handshake_refused"
        time.sleep(0.2)
