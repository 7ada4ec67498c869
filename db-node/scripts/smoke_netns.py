#!/usr/bin/env python3
"""Manual end-to-end smoke test of exo-db-node in a network namespace (needs root).

    sudo .venv/bin/python db-node/scripts/smoke_netns.py build-db/db-node/exo-db-node

Creates netns `exodb-t` and veth `exodbt0` (root side, the "client") <-> `exodbt1` (inside the
netns, the db node's iface), runs the db node there with a fake cache node (Python gRPC on a
unix socket), sends real frames with the Python wire implementation over AF_PACKET, and checks
replies, propagation and Stats. Everything is removed afterwards, also on failure. Traffic
never leaves the veth pair.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "client-lib"))
sys.path.insert(0, str(ROOT / "proto"))

import grpc  # noqa: E402
from exoproto import control_pb2 as pb, control_pb2_grpc as pbg  # noqa: E402
from exoskeleton import wire  # noqa: E402

NS, HOST_IF, NS_IF = "exodb-t", "exodbt0", "exodbt1"
WORK = Path("/tmp/exodb-smoke")
NODE_MAC = "02:00:00:00:02:01"
PORT = 7777
CLIENT_IP = bytes([10, 0, 3, 1])
FAILURES: list[str] = []


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


def check(cond: bool, what: str) -> None:
    print(("  ok   " if cond else "  FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def cleanup() -> None:
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "link", "del", HOST_IF, check=False)
    shutil.rmtree(WORK, ignore_errors=True)


def cluster_json(threads: int = 2) -> dict:
    """The cluster as the node reads it: resolved by the controller's schema, as `exo config
    resolve` does (the node requires every field of proto/exoproto/cluster.proto)."""
    from exo_common.config import parse_config, resolve
    return resolve(parse_config({
        "cluster": {"name": "exodb", "mtu": 1500, "udp_port": PORT, "service_ip": "10.0.0.254"},
        "switch": {"partition_bits": 1},
        "controller": {"grpc": f"unix:{WORK}/controller.sock"},
        # Every GET sampled, no confidence discount (a key seen once would report rate 0) and a
        # REPORT every 100 ms, so the hot-key checks are exact and quick.
        "hot_keys": {"top_k": 16, "sample_rate": 1.0, "segment_ms": 1000, "segments": 4,
                     "weights": [8, 4, 2, 1], "load_ewma_alpha": 0.5, "report_interval_ms": 100,
                     "report_keys": 4, "confidence_z": 0},
        "cache_nodes": [{"name": "cache0", "mac": "02:00:00:00:01:01", "ip": "10.0.1.1", "switch_port": 1,
                         "iface": "none", "grpc": f"unix:{WORK}/cache0.sock", "capacity": 10,
                         "lcores": "0", "burst": 32, "idle_sleep_us": 20, "eal_args": []}],
        "db_nodes": [{"name": "db0", "mac": NODE_MAC, "ip": "10.0.2.1", "switch_port": 2, "iface": NS_IF,
                      "grpc": f"unix:{WORK}/db0.sock", "data_dir": f"{WORK}/data", "threads": threads,
                      "sync_writes": True, "cache_node": "cache0"}],
        "clients": [],
    }, "smoke_netns"))


class FakeCache(pbg.CacheNodeServicer):
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.reports: list = []  # REPORTs, kept apart from the write-propagation calls

    def Report(self, req, ctx):
        self.reports.append(req)
        return pb.ReportReply(accepted=True)

    def Prepare(self, req, ctx):
        self.calls.append(("prepare", req.key, req.is_delete, req.value))
        return pb.TxReply(ok=True, cached=True)

    def Commit(self, req, ctx):
        self.calls.append(("commit", req.key))
        return pb.TxReply(ok=True, cached=True)

    def Abort(self, req, ctx):
        self.calls.append(("abort", req.key))
        return pb.TxReply(ok=True)


class Client:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind((HOST_IF, 0))
        self.sock.settimeout(0.2)
        self.mac = bytes.fromhex(Path(f"/sys/class/net/{HOST_IF}/address").read_text().strip().replace(":", ""))
        self.seq = 0

    def frame(self, op: int, key: bytes, value: bytes = b"", port: int = PORT, flags: int = 0) -> bytes:
        self.seq += 1
        msg = wire.Message(op, 0, flags, 0xC0FFEE, self.seq, key, value)
        return wire.encode_frame(wire.request_dst_mac(op, key), self.mac, CLIENT_IP,
                                 wire.request_dst_ip(key), 40001, port, msg)

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def wait_reply(self, seq: int, timeout: float = 2.0):
        end = time.time() + timeout
        while time.time() < end:
            try:
                data = self.sock.recv(65535)
            except socket.timeout:
                continue
            if data[0:6] != self.mac:
                continue  # our own request (AF_PACKET sees outgoing frames too) or noise
            try:
                f = wire.decode_frame(data)
            except wire.MalformedFrame:
                continue
            if f.msg.is_reply and f.msg.seq == seq:
                return f
        return None

    def call(self, op: int, key: bytes, value: bytes = b"", **kw):
        self.send(self.frame(op, key, value, **kw))
        return self.wait_reply(self.seq)


def stats(stub) -> dict:
    rep = stub.Stats(pb.StatsRequest(), timeout=2)
    return {c.name: c.value for c in rep.counters}


def start_node(binary: str, cfg: Path) -> subprocess.Popen:
    p = subprocess.Popen(["ip", "netns", "exec", NS, binary, "--cluster", str(cfg), "--name", "db0",
                          "--log-level", "debug"], stderr=open(WORK / "node.log", "a"))
    for _ in range(50):
        if (WORK / "db0.sock").exists():
            return p
        if p.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError("db node did not start: " + (WORK / "node.log").read_text()[-2000:])


def stop_node(p: subprocess.Popen) -> tuple[int, float]:
    t0 = time.time()
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=10)
    return rc, time.time() - t0


def run(binary: str) -> None:
    cleanup()
    WORK.mkdir(parents=True)
    sh("ip", "netns", "add", NS)
    sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
    sh("ip", "link", "set", NS_IF, "netns", NS)
    for path in (f"/proc/sys/net/ipv6/conf/{HOST_IF}/disable_ipv6",):
        Path(path).write_text("1")  # keep IPv6 router solicitations out of the counters
    sh("ip", "link", "set", HOST_IF, "up")
    sh("ip", "netns", "exec", NS, "ip", "link", "set", NS_IF, "up")
    cfg = WORK / "cluster.json"
    cfg.write_text(json.dumps(cluster_json()))

    print("config errors:")
    r = sh(binary, "--cluster", str(cfg), "--name", "nosuch", check=False)
    check(r.returncode == 2 and "--name" in r.stderr and r.stderr.count("\n") == 1,
          f"unknown name -> exit 2, one line naming --name ({r.returncode}: {r.stderr.strip()})")
    bad = cluster_json()
    bad["db_nodes"][0]["mac"] = "zz:00:00:00:02:01"
    (WORK / "bad.json").write_text(json.dumps(bad))
    r = sh(binary, "--cluster", str(WORK / "bad.json"), "--name", "db0", check=False)
    check(r.returncode == 2 and "db_nodes[0]" in r.stderr,
          f"bad mac -> exit 2 naming db_nodes[0] ({r.returncode}: {r.stderr.strip()})")

    fake = FakeCache()
    cache_srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pbg.add_CacheNodeServicer_to_server(fake, cache_srv)
    cache_srv.add_insecure_port(f"unix:{WORK}/cache0.sock")
    cache_srv.start()

    node = start_node(binary, cfg)
    time.sleep(0.3)  # let the packet threads reach recv()
    stub = pbg.DbNodeStub(grpc.insecure_channel(f"unix:{WORK}/db0.sock"))
    c = Client()
    node_mac = bytes.fromhex(NODE_MAC.replace(":", ""))
    try:
        print("data plane:")
        f = c.call(wire.OP_PUT, b"k1", b"v1")
        check(f is not None and f.msg.status == wire.ST_OK and f.msg.opcode == 0x82, "PUT k1 -> OK")
        check(f is not None and f.eth_src == node_mac and f.udp_src == PORT and f.udp_dst == 40001
              and f.ip_dst == CLIENT_IP, "reply from node MAC/port to client MAC/IP/port")
        f = c.call(wire.OP_GET, b"k1")
        check(f is not None and f.msg.status == wire.ST_OK and f.msg.value == b"v1", "GET k1 -> OK v1")
        f = c.call(wire.OP_GET, b"missing")
        check(f is not None and f.msg.status == wire.ST_NOT_FOUND, "GET missing -> NOT_FOUND")
        big = b"x" * (wire.max_kv_bytes(1500) - 3)
        f = c.call(wire.OP_PUT, b"big", big)
        check(f is not None and f.msg.status == wire.ST_OK, "PUT 1449-byte value -> OK")
        f = c.call(wire.OP_GET, b"big")
        check(f is not None and f.msg.value == big, "GET big -> full-MTU reply with the value")
        f = c.call(wire.OP_DELETE, b"k1")
        check(f is not None and f.msg.status == wire.ST_OK, "DELETE k1 -> OK")
        f = c.call(wire.OP_GET, b"k1")
        check(f is not None and f.msg.status == wire.ST_NOT_FOUND, "GET k1 after DELETE -> NOT_FOUND")
        f = c.call(wire.OP_GET, b"k1", flags=wire.FLAG_FORWARDED)
        # no switch here to write the cache-port DSCP (docs/switch-rules.md, "Ingress hygiene")
        check(f is not None and f.msg.status == wire.ST_BAD_REQUEST, "forwarded GET without the mark -> BAD_REQUEST")

        print("malformed / ignored:")
        good = bytearray(c.frame(wire.OP_PUT, b"evil", b"v"))
        bad_magic = bytearray(good); bad_magic[42] = 0
        c.send(bytes(bad_magic))
        c.send(bytes(good[:-2]))  # IP length exceeds frame
        reply_op = bytearray(good); reply_op[45] |= 0x80
        c.send(bytes(reply_op))
        c.send(c.frame(wire.OP_PUT, b"evil", b"v", port=5353))  # not our port: ignored
        check(c.wait_reply(c.seq, timeout=0.7) is None, "no reply to malformed or foreign frames")
        f = c.call(wire.OP_GET, b"evil")
        check(f is not None and f.msg.status == wire.ST_NOT_FOUND, "malformed PUTs were not applied")

        print("hot keys:")
        # GETs so far: k1 x3 (one forwarded), missing, big, evil; all sampled (rate 1).
        hk = stub.HotKeys(pb.StatsRequest(), timeout=2)
        check(hk.db_node == "db0" and hk.sampled == 6, f"HotKeys: db0, 6 sampled ({hk.db_node}, {hk.sampled})")
        check(len(hk.keys) == 4 and hk.keys[0].key == b"k1" and hk.keys[0].rate > hk.keys[1].rate > 0,
              f"HotKeys: report_keys 4, k1 hottest ({[(k.key, round(k.rate, 1)) for k in hk.keys]})")
        time.sleep(0.35)
        seqs = [r.seq for r in fake.reports]
        check(len(seqs) >= 3 and seqs == list(range(seqs[0], seqs[0] + len(seqs))),
              f"REPORTs every 100 ms, seq +1 each ({seqs})")
        last = fake.reports[-1]
        check(last.db_node == "db0" and last.keys[0].key == b"k1" and last.load > 0,
              f"REPORT: db0, k1 hottest, load > 0 ({last.load:.1f} req/s)")

        print("write propagation:")
        c.call(wire.OP_PUT, b"hot", b"old")
        rep = stub.Fetch(pb.FetchRequest(keys=[b"hot", b"cold"], cache_node="cache0"), timeout=2)
        check([(v.key, v.found, v.value) for v in rep.values] == [(b"hot", True, b"old"), (b"cold", False, b"")],
              "Fetch returns hot=old, cold not found")
        f = c.call(wire.OP_PUT, b"hot", b"new")
        check(f is not None and f.msg.status == wire.ST_OK, "PUT cached key -> OK")
        check(fake.calls == [("prepare", b"hot", False, b"new"), ("commit", b"hot")],
              f"cache node saw Prepare then Commit ({fake.calls})")
        cache_srv.stop(0).wait()
        f = c.call(wire.OP_PUT, b"hot", b"lost")
        check(f is not None and f.msg.status == wire.ST_BUSY, "cache node down: PUT cached key -> BUSY")
        f = c.call(wire.OP_GET, b"hot")
        check(f is not None and f.msg.value == b"new", "failed Prepare left the old value")
        ev = stub.Evict(pb.EvictRequest(keys=[b"hot"], cache_node="other"), timeout=2)
        check(ev.evicted == 0, "Evict by another cache node -> 0")
        ev = stub.Evict(pb.EvictRequest(keys=[b"hot"], cache_node="cache0"), timeout=2)
        check(ev.evicted == 1, "Evict by cache0 -> 1")
        f = c.call(wire.OP_PUT, b"hot", b"after")
        check(f is not None and f.msg.status == wire.ST_OK, "evicted key: PUT -> OK without propagation")

        print("stats:")
        time.sleep(0.3)  # requests_served is bumped after send(): the client may see the reply first
        s = stats(stub)
        print("   ", {k: v for k, v in s.items() if v})
        check(s["malformed_dropped"] == 3, f"malformed_dropped == 3 ({s['malformed_dropped']})")
        check(s["ignored"] >= 1, "ignored >= 1")
        check(s["puts"] == 6 and s["gets"] == 7 and s["deletes"] == 1, "puts 6, gets 7, deletes 1")
        check(s["forwarded_gets"] == 1 and s["writes_propagated"] == 1 and s["errors"] == 0
              and s["busy_writes"] == 1 and s["resolver_pending"] == 1,
              "forwarded_gets 1, writes_propagated 1, errors 0, busy_writes 1, resolver_pending 1 "
              "(the Abort for the dead cache node)")
        check(s["requests_served"] == 14 and s["not_found"] == 4 and s["cached_keys"] == 0,
              "requests_served 14, not_found 4, cached_keys 0")
        check(s["misrouted"] == 0 and s["tx_errors"] == 0, "misrouted 0, tx_errors 0")
        check(s["hot_sampled"] == 7 and s["reports_sent"] >= 3,
              f"hot_sampled 7, reports_sent >= 3 ({s['hot_sampled']}, {s['reports_sent']})")
    finally:
        rc, took = stop_node(node)
    check(rc == 0 and took < 2.0, f"SIGTERM -> exit {rc} in {took:.2f}s")

    print("restart keeps data:")
    node = start_node(binary, cfg)
    time.sleep(0.3)
    try:
        f = c.call(wire.OP_GET, b"hot")
        check(f is not None and f.msg.value == b"after", "GET hot after restart -> 'after'")
        stub = pbg.DbNodeStub(grpc.insecure_channel(f"unix:{WORK}/db0.sock"))
        s = stats(stub)
        check(s["txns_recovered"] == 1 and s["resolver_pending"] == 1,
              "the undelivered Abort survived the restart (txns_recovered 1, resolver_pending 1)")
        fg = stub.ForgetCacheNode(pb.ForgetCacheNodeRequest(cache_node="cache0"), timeout=2)
        check(fg.keys_dropped == 0 and fg.txns_dropped == 1, "ForgetCacheNode(cache0) drops the Abort")
        check(stats(stub)["resolver_pending"] == 0, "nothing left to resolve")
    finally:
        rc, _ = stop_node(node)
    check(rc == 0, "second shutdown clean")


def main() -> int:
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build-db/db-node/exo-db-node"))
    try:
        run(binary)
    finally:
        log = WORK / "node.log"
        if log.exists():
            text = log.read_text()
            check("runtime error" not in text and "AddressSanitizer" not in text,
                  "no sanitizer reports in the node log (when built with EXO_SANITIZE)")
            tail = text.splitlines()[-8:]
            print("node log (tail):\n    " + "\n    ".join(tail))
        cleanup()
    print("PASS" if not FAILURES else f"FAILED: {len(FAILURES)}")
    return 0 if not FAILURES else 1


if __name__ == "__main__":
    sys.exit(main())
