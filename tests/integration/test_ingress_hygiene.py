"""Data-plane hygiene on a real cluster (docs/switch-rules.md, "Ingress hygiene"): crafted
frames from a client's host (raw sockets) are stopped by the switch's table 0 or by a db node,
and the counter of what stopped them moves; the honest client next to it is unaffected.

    spoofed source MAC/IP        switch, client_source rule  Stats ingress_client_source_dropped <client>
    forwarded GET, prefix 0xAE   switch, client_forwarded    Stats ingress_client_forwarded_dropped <client>
    old-style (0xBA), no mark    db node (BAD_REQUEST)       db node's forwarded_unmarked_dropped
    old-style (0xBA), cache mark switch, client_forwarded_mark  Stats ingress_client_forwarded_dropped <client>
    write to the wrong db node   db node (BAD_REQUEST)       db node's wrong_owner_dropped
    flood above the meter        switch, the port's meter    Stats ingress_meter_dropped <client>, meter-stats
    frame from an unknown port   switch, unknown_port        Stats ingress_unknown_port_dropped
"""
from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from exo_controller.ingress import client_meter_id, meter_burst
from exo_topo import megaflow
from exo_topo.cluster import EmulatedCluster
from exo_topo.configgen import emulation_config
from exo_topo.ovs import meter_stats
from exo_topo.netns import in_netns
from exoproto import control_pb2 as pb
from exoskeleton import wire
from exoskeleton.keyhash import PREFIX_FORWARDED, PREFIX_OTHER, key_hash, mac_bytes, request_ip, request_mac

from .conftest import RUN_ROOT
from .helpers import cache_for, owner_db

pytestmark = pytest.mark.mininet

METER_PPS = 2000  # low enough that one Python process floods past it
UDP_SRC = 40999
RUN = RUN_ROOT / "test_ingress_hygiene"


@pytest.fixture(scope="module")
def cluster():
    shutil.rmtree(RUN, ignore_errors=True)
    cfg = emulation_config(n_cache=1, n_db=2, n_clients=2, run_dir=RUN, controller={"openflow_port": 6675},
                           cache_fill={"enabled": False}, switch={"client_meter_pps": METER_PPS})
    with EmulatedCluster(cfg, RUN) as cl:
        yield cl


def ctl(cl) -> dict[str, int]:
    return cl.stubs.controller_stats()


def wait_until(read, pred, timeout: float = 10.0):
    """Poll read() until pred(value): the controller reads the switch's counters every second,
    and OVS updates them from its datapath about twice a second."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if pred(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


class Attacker:
    """Raw frames from a client's host, and the replies to UDP_SRC on its own address."""

    def __init__(self, cl, name: str = "client1"):
        self.cfg, self.node = cl.cfg, cl.cfg.node(name)
        with in_netns(cl.host(name).pid):
            self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.tx.bind((self.node.interface, 0))
        self.rx.bind((self.node.ip, UDP_SRC))
        self.mac, self.ip = mac_bytes(self.node.mac), socket.inet_aton(self.node.ip)
        self.seq = int(time.monotonic() * 1000) & 0xFFFFFF

    def frame(self, op: int, key: bytes, value: bytes = b"", *, route_key: bytes | None = None,
              prefix: int | None = None, flags: int = 0, src_mac: bytes | None = None,
              src_ip: bytes | None = None, dscp: int = 0) -> bytes:
        self.seq += 1
        h = key_hash(route_key or key)
        if prefix is None:
            prefix = wire.PREFIX_GET if op == wire.OP_GET else PREFIX_OTHER
        msg = wire.Message(op, 0, flags, 0xA77AC4, self.seq, key, value)
        f = bytearray(wire.encode_frame(request_mac(prefix, h), src_mac or self.mac, src_ip or self.ip,
                                        request_ip(h), UDP_SRC, self.cfg.cluster.udp_port, msg))
        if dscp:
            ip_at = wire.OFFSET["ip_version_ihl"]
            f[wire.OFFSET["ip_tos"]] = dscp << 2
            struct.pack_into("!H", f, wire.OFFSET["ip_checksum"], 0)
            struct.pack_into("!H", f, wire.OFFSET["ip_checksum"], wire.ip_checksum(bytes(f[ip_at:ip_at + wire.IP_LEN])))
        return bytes(f)

    def send(self, frames, listen_s: float = 1.0) -> list[wire.Message]:
        for f in frames:
            self.tx.send(f)
            time.sleep(0.002)  # far below the meter
        out, end = [], time.monotonic() + listen_s
        while (left := end - time.monotonic()) > 0:
            self.rx.settimeout(left)
            try:
                out.append(wire.decode_payload(self.rx.recv(65536)))
            except socket.timeout:
                break
        return out

    def close(self):
        self.tx.close()
        self.rx.close()


@pytest.fixture
def attacker(cluster):
    a = Attacker(cluster)
    try:
        yield a
    finally:
        a.close()


def test_honest_traffic_passes_metered(cluster):
    with cluster.client("client0") as c:
        for i in range(50):
            c.set(b"honest:%d" % i, b"v%d" % i)
        assert [c.get(b"honest:%d" % i) for i in range(50)] == [b"v%d" % i for i in range(50)]
    port = cluster.cfg.node("client0").switch_port
    allow = wait_until(lambda: {f.cookie: f for f in cluster.stubs.rules(4).flows},
                       lambda fs: any(f.packet_count >= 100 and f.cookie & 0xFFFF_FFFF == port for f in fs.values()))
    assert any(f.packet_count >= 100 and f.cookie & 0xFFFF_FFFF == port for f in allow.values())
    s = ctl(cluster)
    assert s["ingress_client_source_dropped client0"] == 0 and s["ingress_meter_dropped client0"] == 0


def test_spoofed_sources_are_dropped_and_counted(cluster, attacker):
    victim = cluster.cfg.node("client0")
    vmac, vip = mac_bytes(victim.mac), socket.inet_aton(victim.ip)
    before = ctl(cluster)["ingress_client_source_dropped client1"]
    frames = []
    for src in (dict(src_mac=vmac, src_ip=vip), dict(src_ip=vip), dict(src_mac=vmac)):
        frames += [attacker.frame(wire.OP_PUT, b"spoof:k", b"SPOOFED", **src) for _ in range(10)]
    assert attacker.send(frames) == []
    after = wait_until(lambda: ctl(cluster)["ingress_client_source_dropped client1"], lambda v: v >= before + 30)
    assert after >= before + 30
    with cluster.client("client0") as c:
        assert c.get(b"spoof:k") is None


def test_forwarded_gets_from_a_client_are_refused(cluster, attacker):
    key = b"fwd:k"
    owner = owner_db(cluster.cfg, key)
    with cluster.client("client0") as c:
        c.set(key, b"real")
    before = cluster.stubs.stats(owner)
    # With the prefix only a cache node sends (0xAE), mark or no mark: dropped by the switch.
    sw_before = ctl(cluster)["ingress_client_forwarded_dropped client1"]
    assert attacker.send([attacker.frame(wire.OP_GET, key, prefix=PREFIX_FORWARDED, flags=wire.FLAG_FORWARDED,
                                         dscp=dscp) for dscp in (0, wire.FORWARDED_DSCP) for _ in range(5)]) == []
    assert wait_until(lambda: ctl(cluster)["ingress_client_forwarded_dropped client1"],
                      lambda v: v >= sw_before + 10) >= sw_before + 10
    assert cluster.stubs.stats(owner)["forwarded_unmarked_dropped"] == before["forwarded_unmarked_dropped"]
    # An old-style forwarded GET (0xBA) without the mark: past the switch (it looks like a PUT),
    # refused by the db node.
    replies = attacker.send([attacker.frame(wire.OP_GET, key, prefix=PREFIX_OTHER, flags=wire.FLAG_FORWARDED)
                             for _ in range(10)])
    assert len(replies) == 10 and {r.status for r in replies} == {wire.ST_BAD_REQUEST}
    after = cluster.stubs.stats(owner)
    assert after["forwarded_unmarked_dropped"] - before["forwarded_unmarked_dropped"] == 10
    assert after["forwarded_gets"] == before["forwarded_gets"]
    # With the mark only the switch writes on cache-node ports: dropped by the switch.
    sw_before = ctl(cluster)["ingress_client_forwarded_dropped client1"]
    assert attacker.send([attacker.frame(wire.OP_GET, key, prefix=PREFIX_OTHER, flags=wire.FLAG_FORWARDED,
                                         dscp=wire.FORWARDED_DSCP) for _ in range(10)]) == []
    sw_after = wait_until(lambda: ctl(cluster)["ingress_client_forwarded_dropped client1"],
                          lambda v: v >= sw_before + 10)
    assert sw_after >= sw_before + 10
    assert cluster.stubs.stats(owner)["forwarded_unmarked_dropped"] == after["forwarded_unmarked_dropped"]
    # A real forwarded miss (a cache node that lost its entry while its rule lives) is marked
    # by the switch on the cache node's port, and served.
    node = cache_for(cluster.cfg, key)
    assert cluster.stubs.cache(node).Cache(pb.KeysRequest(keys=[key]), timeout=10).done == 1
    cluster.stubs.cache(node).DropEntries(pb.KeysRequest(keys=[key]), timeout=5)
    with cluster.client("client0") as c:
        assert c.get(key) == b"real"
    final = cluster.stubs.stats(owner)
    assert final["forwarded_gets"] == after["forwarded_gets"] + 1
    assert final["forwarded_unmarked_dropped"] == after["forwarded_unmarked_dropped"]


def test_write_to_the_wrong_db_node_is_refused(cluster, attacker):
    cfg = cluster.cfg
    key = next(b"wrong:%d" % i for i in range(1000) if owner_db(cfg, b"wrong:%d" % i) == "db0")
    route = next(b"route:%d" % i for i in range(1000) if owner_db(cfg, b"route:%d" % i) == "db1")
    before = cluster.stubs.stats("db1")
    replies = attacker.send([attacker.frame(wire.OP_PUT, key, b"MISROUTED", route_key=route) for _ in range(10)])
    assert len(replies) == 10 and {r.status for r in replies} == {wire.ST_BAD_REQUEST}
    after = cluster.stubs.stats("db1")
    assert after["wrong_owner_dropped"] - before["wrong_owner_dropped"] == 10
    assert after["puts"] == before["puts"]
    with cluster.client("client0") as c:
        assert c.get(key) is None


def test_flood_is_capped_by_the_meter_and_the_honest_client_is_not(cluster):
    sw = cluster.cfg.switch.bridge
    meter = client_meter_id(cluster.cfg, "client1")
    before = ctl(cluster)["ingress_meter_dropped client1"]
    in0, dropped0 = meter_stats(sw, meter)
    out = RUN / "flood.json"
    flood = cluster.popen_in("client1", [sys.executable, "tests/integration/frame_flood.py", "--iface",
                                         cluster.cfg.node("client1").interface, "--seconds", "1.5",
                                         "--udp-port", str(cluster.cfg.cluster.udp_port), "--out", str(out)],
                             "frame_flood")
    honest_errors: list[BaseException] = []

    def honest():
        try:
            with cluster.client("client0") as c:
                for i in range(40):
                    c.set(b"during:%d" % i, b"ok")
                    assert c.get(b"during:%d" % i) == b"ok"
        except BaseException as err:  # noqa: BLE001 - reported by the test thread
            honest_errors.append(err)
    t = threading.Thread(target=honest)
    t.start()
    try:
        assert flood.wait(timeout=30) == 0
    finally:
        if flood.poll() is None:
            flood.kill()
        t.join(timeout=60)
    assert not honest_errors, honest_errors
    sent = json.loads(out.read_text())
    time.sleep(1.0)  # frames still queued towards the switch when the sender stopped
    in1, dropped1 = meter_stats(sw, meter)
    reached, dropped = in1 - in0, dropped1 - dropped0
    # The switch saw a flood well above the meter (not every frame sent reaches it: the host's
    # and the switch's queues overflow first), passed what the meter allows (rate x time + burst,
    # with a second of slack for the queued frames) and dropped the rest.
    assert reached > 3 * METER_PPS * sent["seconds"], (sent, reached)
    assert reached - dropped <= METER_PPS * (sent["seconds"] + 1) + meter_burst(METER_PPS), (sent, reached, dropped)
    # The controller's Stats count the same drops, and none on the honest client's port.
    counted = wait_until(lambda: ctl(cluster)["ingress_meter_dropped client1"] - before, lambda v: v >= dropped)
    assert counted >= dropped > 0
    assert ctl(cluster)["ingress_meter_dropped client0"] == 0


def test_frames_from_a_port_not_in_the_config_are_dropped(cluster):
    sw, port_name = cluster.cfg.switch.bridge, "exohyg-x"
    before = ctl(cluster)["ingress_unknown_port_dropped"]
    subprocess.run(["ovs-vsctl", "--timeout=5", "add-port", sw, port_name, "--", "set", "Interface", port_name,
                    "type=internal", "ofport_request=99"], check=True)
    try:
        subprocess.run(["ip", "link", "set", port_name, "up"], check=True)
        key = b"unknown:k"
        msg = wire.Message(wire.OP_PUT, 0, 0, 1, 1, key, b"x")
        f = wire.encode_frame(wire.request_dst_mac(wire.OP_PUT, key), mac_bytes("02:00:00:00:09:09"),
                              socket.inet_aton("10.0.9.9"), wire.request_dst_ip(key), UDP_SRC,
                              cluster.cfg.cluster.udp_port, msg)
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as s:
            s.bind((port_name, 0))
            for _ in range(10):
                s.send(f)
        after = wait_until(lambda: ctl(cluster)["ingress_unknown_port_dropped"], lambda v: v >= before + 10)
        assert after >= before + 10
    finally:
        subprocess.run(["ovs-vsctl", "--timeout=5", "--if-exists", "del-port", sw, port_name], check=False)
    with cluster.client("client0") as c:
        assert c.get(key) is None


def test_misses_still_share_datapath_flows_behind_the_ingress_table(cluster):
    """Table 0 matches the sender, never the key hash: a GET that misses the cache still pins
    at most 24 hash bits of its datapath flow (docs/switch-rules.md, "Why this layout"), and a
    spoofed one is dropped in the datapath."""
    cfg, sw = cluster.cfg, cluster.cfg.switch.bridge
    c0 = cfg.node("client0")
    for i in range(40):
        mf = megaflow.trace_key(sw, c0.switch_port, c0.mac, c0.ip, b"cold:%d" % i, cfg.cluster.udp_port)
        assert mf.actions != "drop" and mf.hash_bits_pinned() <= 24, mf.line
    spoof = megaflow.trace_key(sw, c0.switch_port, "02:00:00:00:03:99", c0.ip, b"cold:1", cfg.cluster.udp_port)
    assert spoof.actions == "drop", spoof.line
    # What the switch holds now, for the record (docs/switch-rules.md quotes it)
    dump = [subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", *cmd, sw], capture_output=True,
                           text=True, check=True).stdout for cmd in (["dump-flows"], ["dump-meters"], ["meter-stats"])]
    (RUN / "switch-dump.txt").write_text("\n".join(dump))
