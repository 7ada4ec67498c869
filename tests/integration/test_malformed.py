"""1,000 malformed frames at cache and db nodes are dropped and counted; the cluster keeps
serving."""
from __future__ import annotations

import socket
import time

import pytest

from exo_topo.netns import in_netns
from exoproto import control_pb2 as pb
from exoskeleton import wire
from exoskeleton.keyhash import PREFIX_GET, PREFIX_OTHER, key_hash, mac_bytes, request_mac

from .helpers import cache_for, counters, delta

pytestmark = pytest.mark.mininet


def malformed_variants(good: bytes) -> list[bytes]:
    def patch(offset: int, data: bytes) -> bytes:
        b = bytearray(good)
        b[offset:offset + len(data)] = data
        return bytes(b)

    return [
        patch(42, b"\x00\x00"),                 # bad magic
        patch(44, b"\x07"),                     # bad version
        patch(45, b"\x66"),                     # unknown opcode
        good[:55],                              # truncated inside the header
        good[:64],                              # truncated inside the key
        patch(48, b"\x00\x00"),                 # zero key length
        patch(48, b"\x01\x2c"),                 # key length 300 (> 250)
        patch(50, b"\x7f\xff\xff\xff"),         # value length far beyond the frame (oversize)
        patch(38, b"\x00\x10"),                 # UDP length disagrees with IP length
        patch(16, b"\x05\xdc"),                 # IP total length 1500 > frame
    ]


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
        good = wire.encode_frame(request_mac(prefix, key_hash(key)), src, ip_src,
                                 socket.inet_aton(cfg.cluster.service_ip), 40000,
                                 cfg.cluster.udp_port, msg)
        frames += malformed_variants(good)
    batch = [frames[i % len(frames)] for i in range(1000)]

    before = counters(cluster)
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
        if sum(dropped.values()) >= 1000:
            break
        time.sleep(0.2)
    assert sum(dropped.values()) == 1000, dropped
    assert dropped[node] > 0 and any(v > 0 for n, v in dropped.items() if n.startswith("db"))

    with cluster.client() as c:  # still serving, from cache and from db
        assert c.get(hot) == b"v"
        c.set(b"after:malformed", b"ok")
        assert c.get(b"after:malformed") == b"ok"
    for name, proc in cluster.node_procs.items():
        assert proc.poll() is None, f"{name} died"
