"""1,000 malformed frames (wrong IPv4 header and UDP checksums among them) at cache and db
nodes are dropped and counted; the cluster keeps serving, and correct UDP checksums are served."""
from __future__ import annotations

import socket
import time

import pytest

from exo_topo.netns import in_netns
from exoproto import control_pb2 as pb
from exoskeleton import wire
from exoskeleton.keyhash import PREFIX_GET, PREFIX_OTHER, key_hash, mac_bytes, request_ip, request_mac

from .helpers import cache_for, counters, delta

pytestmark = pytest.mark.mininet


O = wire.OFFSET


def malformed_variants(good: bytes, good_udp_checksum: bytes) -> list[bytes]:
    def patch(offset: int, data: bytes, base: bytes = good) -> bytes:
        b = bytearray(base)
        b[offset:offset + len(data)] = data
        return bytes(b)

    ip_ck = good[O["ip_checksum"]:O["ip_checksum"] + 2]
    return [
        patch(O["magic"], b"\x00\x00"),          # bad magic
        patch(O["version"], b"\x07"),            # bad version
        patch(O["opcode"], b"\x66"),             # unknown opcode
        good[:55],                              # truncated inside the header
        good[:64],                              # truncated inside the key
        patch(O["key_len"], b"\x00\x00"),        # zero key length
        patch(O["key_len"], b"\x01\x2c"),        # key length 300 (> 250)
        patch(O["value_len"], b"\x7f\xff\xff\xff"),  # value length far beyond the frame
        patch(O["udp_length"], b"\x00\x10"),     # UDP length disagrees with IP length
        patch(O["ip_total_len"], b"\x05\xdc"),   # IP total length 1500 > frame
        patch(O["ip_checksum"], bytes([ip_ck[0] ^ 0x01, ip_ck[1]])),  # wrong IPv4 header checksum
        patch(O["ip_ttl"], b"\x3f"),             # header changed, checksum not
        patch(len(good_udp_checksum) - 1, b"\xee", good_udp_checksum),  # wrong UDP checksum
    ]


def _checksummed(c, op: int, key: bytes, value: bytes = b"") -> wire.Message:
    """One request with a computed UDP checksum, sent through the client's sockets."""
    seq = 0x6000_0000 + (time.monotonic_ns() & 0xFFFFF)
    msg = wire.Message(op, 0, 0, c.client_id, seq, key, value)
    c.io.send(wire.encode_frame(wire.request_dst_mac(op, key), c.io.mac, c.io.ip,
                                wire.request_dst_ip(key), c.io.port, c.udp_port, msg,
                                with_udp_checksum=True))
    deadline = time.monotonic() + 3
    while (left := deadline - time.monotonic()) > 0:
        data = c.io.recv(left)
        if data is None:
            break
        rep = wire.decode_payload(data)
        if rep.seq == seq and rep.key == key:
            return rep
    raise AssertionError(f"no reply to a checksummed {op} of {key!r}")


def test_malformed_frames_are_dropped_counted_and_harmless(cluster):
    cfg = cluster.cfg
    client = cfg.clients[0]
    hot = b"hot:malformed"
    with cluster.client() as c:
        c.set(hot, b"v")
    node = cache_for(cfg, hot)
    assert cluster.stubs.cache(node).Cache(pb.KeysRequest(keys=[hot]), timeout=10).done == 1

    src = mac_bytes(client.mac)
    ip_src = socket.inet_aton(client.ip)
    frames = []
    # GETs for the cached key reach the cache node (Ruleset 2); 0xBA frames reach db nodes.
    for prefix, key in ((PREFIX_GET, hot), (PREFIX_OTHER, hot), (PREFIX_OTHER, b"cold:1")):
        msg = wire.Message(wire.OP_GET, 0, 0, 1, 1, key)
        args = (request_mac(prefix, key_hash(key)), src, ip_src,
                request_ip(key_hash(key)), 40000, cfg.cluster.udp_port, msg)
        frames += malformed_variants(wire.encode_frame(*args),
                                     wire.encode_frame(*args, with_udp_checksum=True))
    batch = [frames[i % len(frames)] for i in range(1000)]

    before = counters(cluster)
    # Frames whose IPv4 total length disagrees with the frame (truncated, or claiming 1500 bytes)
    # never reach a node: the switch cannot read their source address, so its ingress check
    # drops them as from another source (docs/switch-rules.md, "Ingress hygiene").
    switch_drops = f"ingress_client_source_dropped {client.name}"
    switch_before = cluster.stubs.controller_stats()[switch_drops]
    with in_netns(cluster.host(client.name).pid):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        s.bind((client.interface, 0))
        for i, f in enumerate(batch):
            s.send(f)
            if i % 50 == 49:
                time.sleep(0.01)  # stay far below the emulated switch's capacity
    finally:
        s.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        dropped = delta(counters(cluster), before, "malformed_dropped")
        at_switch = cluster.stubs.controller_stats()[switch_drops] - switch_before
        if sum(dropped.values()) + at_switch >= 1000:
            break
        time.sleep(0.2)
    assert sum(dropped.values()) + at_switch == 1000, (dropped, at_switch)
    assert dropped[node] > 0 and any(v > 0 for n, v in dropped.items() if n.startswith("db"))
    bad_length = sum(1 for f in batch if len(f) < 14 + int.from_bytes(f[16:18], "big"))
    assert at_switch == bad_length > 0, (at_switch, bad_length)

    with cluster.client() as c:  # still serving, from cache and from db
        assert c.get(hot) == b"v"
        c.set(b"after:malformed", b"ok")
        assert c.get(b"after:malformed") == b"ok"
        # A client may send UDP checksums: correct ones are served, by the cache node (a hit),
        # by a db node (a PUT, then a GET the cache node forwards: its rewrite keeps the
        # checksum valid) alike.
        assert _checksummed(c, wire.OP_GET, hot).status == wire.ST_OK
        assert _checksummed(c, wire.OP_PUT, b"udp:ck", b"summed").status == wire.ST_OK
        assert c.get(b"udp:ck") == b"summed"
        before_fwd = counters(cluster)
        cluster.stubs.cache(node).DropEntries(pb.KeysRequest(keys=[hot]), timeout=5)
        fwd = _checksummed(c, wire.OP_GET, hot)
        assert fwd.status == wire.ST_OK and fwd.value == b"v" and fwd.flags == 0
        assert delta(counters(cluster), before_fwd, "forwarded_misses")[node] == 1
    for name, proc in cluster.node_procs.items():
        assert proc.poll() is None, f"{name} died"
