#!/usr/bin/env python3
"""Manual end-to-end smoke test of exo-emulator in a private network namespace (needs root).

    .venv/bin/python emulator/scripts/smoke_netns.py build/emulator/exo-emulator

Re-runs itself under `unshare -n` (a throwaway namespace that disappears with the process), makes
a veth pair there, `emut0` (the "client") <-> `emu0-eth0` (the emulator's shared iface), runs
the emulator with two emulated db nodes and a fake cache node (Python gRPC on a unix socket),
sends real frames with the Python wire implementation over AF_PACKET and checks replies, the
per-node rate limit, REPORTs, a two-phase write and DbNode.Stats of each node. Nothing outside
the namespace is touched but WORK (removed afterwards).
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
from exoskeleton import keyhash, wire  # noqa: E402

CLIENT_IF, EMU_IF = "emut0", "emu0-eth0"
WORK = Path("/tmp/exoemu-smoke")
PORT = 7777
CLIENT_IP, SERVICE_IP = bytes([10, 0, 3, 1]), bytes([10, 0, 0, 254])
MACS = {"db0": "02:00:00:00:02:01", "db1": "02:00:00:00:02:02"}
PARTITIONS = ["db0", "db1", "db0", "db1"]  # partition_bits 2
RATE, BURST, VALUE_SIZE = 20.0, 4, 512
FAILURES: list[str] = []


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


def check(cond: bool, what: str) -> None:
    print(("  ok   " if cond else "  FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def cluster_json(emulator: str = "emu0") -> dict:
    node = lambda name: {  # noqa: E731
        "name": name, "mac": MACS[name], "ip": "10.0.2.64", "switch_port": 2, "iface": EMU_IF,
        "grpc": f"unix:{WORK}/{name}.sock", "data_dir": f"{WORK}/{name}", "threads": 1,
        "sync_writes": False, "cache_node": "cache0", "emulator": emulator}
    return {
        "cluster": {"name": "exoemu", "mtu": 1500, "udp_port": PORT, "service_ip": "10.0.0.254"},
        "switch": {"partition_bits": 2},
        "controller": {"grpc": f"unix:{WORK}/controller.sock"},
        "hot_keys": {"top_k": 16, "sample_rate": 1.0, "segment_ms": 1000, "segments": 4,
                     "weights": [8, 4, 2, 1], "load_ewma_alpha": 0.5, "report_interval_ms": 100,
                     "report_keys": 4, "confidence_z": 0},
        "emulation": {"value_size": VALUE_SIZE, "db_rate_limit_rps": RATE, "lcores": "0",
                      "burst": BURST, "idle_sleep_us": 20, "eal_args": []},
        "cache_nodes": [{"name": "cache0", "mac": "02:00:00:00:01:01", "ip": "10.0.1.1", "switch_port": 1,
                         "iface": "none", "grpc": f"unix:{WORK}/cache0.sock", "capacity": 10,
                         "lcores": "1", "burst": 32, "idle_sleep_us": 20, "eal_args": []}],
        "db_nodes": [node("db0"), node("db1")],
        "clients": [],
        "partitions": PARTITIONS,
    }


def key_of(owner: str, stem: str = "key") -> bytes:
    for i in range(10000):
        k = f"{stem}{i}".encode()
        if PARTITIONS[keyhash.key_hash(k) >> 38] == owner:
            return k
    raise RuntimeError("no key")


class FakeCache(pbg.CacheNodeServicer):
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.reports: list = []

    def Report(self, req, ctx):
        self.reports.append(req)
        return pb.ReportReply(accepted=True)

    def Prepare(self, req, ctx):
        self.calls.append(("prepare", req.key, req.value))
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
        self.sock.bind((CLIENT_IF, 0))
        self.sock.settimeout(0.1)
        self.mac = self.sock.getsockname()[4]  # (sysfs shows the host's namespace, not ours)
        self.seq = 0

    def frame(self, op: int, key: bytes, value: bytes = b"") -> bytes:
        self.seq += 1
        msg = wire.Message(op, 0, 0, 0xC0FFEE, self.seq, key, value)
        return wire.encode_frame(wire.request_dst_mac(op, key), self.mac, CLIENT_IP, SERVICE_IP,
                                 40001, PORT, msg)

    def replies(self, timeout: float) -> dict:
        got, end = {}, time.time() + timeout
        while time.time() < end:
            try:
                data = self.sock.recv(65535)
            except socket.timeout:
                continue
            if data[0:6] != self.mac:
                continue  # our own requests (AF_PACKET sees outgoing frames too)
            try:
                f = wire.decode_frame(data)
            except wire.MalformedFrame:
                continue
            if f.msg.is_reply:
                got[f.msg.seq] = f
        return got

    def call(self, op: int, key: bytes, value: bytes = b""):
        self.sock.send(self.frame(op, key, value))
        return self.replies(0.5).get(self.seq)


def stats(name: str) -> dict:
    stub = pbg.DbNodeStub(grpc.insecure_channel(f"unix:{WORK}/{name}.sock"))
    return {c.name: c.value for c in stub.Stats(pb.StatsRequest(), timeout=2).counters}


def run(binary: str) -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    sh("ip", "link", "set", "lo", "up")
    sh("ip", "link", "add", CLIENT_IF, "type", "veth", "peer", "name", EMU_IF)
    for ifc in (CLIENT_IF, EMU_IF):
        Path(f"/proc/sys/net/ipv6/conf/{ifc}/disable_ipv6").write_text("1")
        sh("ip", "link", "set", ifc, "up")
    cfg = WORK / "cluster.json"
    cfg.write_text(json.dumps(cluster_json()))

    print("config errors:")
    r = sh(binary, "--config", str(cfg), "--emulator", "emu9", check=False)
    check(r.returncode == 2 and "no db node has emulator 'emu9'" in r.stderr and r.stderr.count("\n") == 1,
          f"unknown emulator -> exit 2, one line ({r.returncode}: {r.stderr.strip()})")

    fake = FakeCache()
    cache_srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pbg.add_CacheNodeServicer_to_server(fake, cache_srv)
    cache_srv.add_insecure_port(f"unix:{WORK}/cache0.sock")
    cache_srv.start()

    log = open(WORK / "emu.log", "w")
    emu = subprocess.Popen([binary, "--config", str(cfg), "--emulator", "emu0"], stderr=log)
    for _ in range(100):
        if all((WORK / f"{n}.sock").exists() for n in MACS) or emu.poll() is not None:
            break
        time.sleep(0.1)
    try:
        time.sleep(0.5)
        c = Client()
        check(emu.poll() is None, "emulator running")
        print("data plane:")
        for name in MACS:
            k = key_of(name)
            f = c.call(wire.OP_GET, k)
            check(f is not None and f.msg.status == wire.ST_OK and len(f.msg.value) == VALUE_SIZE
                  and f.eth_src == bytes.fromhex(MACS[name].replace(":", "")) and f.ip_src == bytes([10, 0, 2, 64]),
                  f"GET {k!r} (owned by {name}) -> OK, {VALUE_SIZE}-byte value from {name}'s MAC "
                  f"({f and (f.msg.status, len(f.msg.value), f.eth_src.hex(':'))})")
            time.sleep(0.25)  # let the bucket refill
        f = c.call(wire.OP_PUT, key_of("db1", "p"), b"v")
        check(f is not None and f.msg.status == wire.ST_OK, "PUT of an uncached key -> OK")
        print("two-phase write to a key the cache node fetched:")
        hot = key_of("db0", "hot")
        stub = pbg.DbNodeStub(grpc.insecure_channel(f"unix:{WORK}/db0.sock"))
        rep = stub.Fetch(pb.FetchRequest(keys=[hot], cache_node="cache0"), timeout=2)
        check(rep.values[0].found and len(rep.values[0].value) == VALUE_SIZE, "Fetch -> the fixed value")
        time.sleep(0.25)
        f = c.call(wire.OP_PUT, hot, b"new")
        check(f is not None and f.msg.status == wire.ST_OK, "PUT cached key -> OK")
        check(fake.calls == [("prepare", hot, b"new"), ("commit", hot)], f"cache node saw Prepare, Commit ({fake.calls})")

        print("rate limit (%.0f req/s, bucket %d):" % (RATE, BURST))
        time.sleep(0.5)
        before = {n: stats(n) for n in MACS}
        k = key_of("db0", "burst")
        first = c.seq + 1
        for _ in range(40):
            c.sock.send(c.frame(wire.OP_GET, k))
        t0 = time.time()
        got = c.replies(1.0)
        took = time.time() - t0
        answered = len([s for s in got if s >= first])
        after = {n: stats(n) for n in MACS}
        limited = after["db0"]["rate_limited"] - before["db0"]["rate_limited"]
        check(BURST <= answered <= BURST + RATE * (took + 0.2) + 1 and answered + limited == 40,
              f"40 GETs at once: {answered} answered, {limited} rate_limited")
        check(after["db1"]["rate_limited"] == before["db1"]["rate_limited"], "db1 not charged for db0's frames")

        print("REPORTs:")
        nodes = {r.db_node for r in fake.reports}
        check(nodes == {"db0", "db1"}, f"both emulated nodes REPORT to the cache node ({sorted(nodes)})")

        print("stats:")
        for n in MACS:
            s = after[n]
            print(f"    {n}:", {k: v for k, v in s.items() if v})
        s0, s1 = after["db0"], after["db1"]
        check(s0["gets"] == 1 + answered and s1["gets"] == 1 and s1["puts"] == 1 and s0["puts"] == 1,
              "gets/puts per node")
        check(s0["requests_served"] == s0["gets"] + s0["puts"] and s1["requests_served"] == 2,
              "requests_served = answered requests")
        check(s0["writes_propagated"] == 1 and s0["cached_keys"] == 1, "db0: 1 write propagated, 1 cached key")
        check(s0["misrouted"] == 0 and s1["misrouted"] == 0 and s0["malformed_dropped"] == 0, "no misrouted, no malformed")
    finally:
        t0 = time.time()
        emu.send_signal(signal.SIGTERM)
        try:
            rc = emu.wait(timeout=15)
        except subprocess.TimeoutExpired:
            emu.kill()
            rc = -9
        cache_srv.stop(0)
    check(rc == 0 and time.time() - t0 < 5, f"SIGTERM -> exit {rc} in {time.time() - t0:.2f}s")


def main() -> int:
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build/emulator/exo-emulator"))
    if os.environ.get("EXOEMU_SMOKE_NS") != "1":  # re-run inside a private network namespace
        env = dict(os.environ, EXOEMU_SMOKE_NS="1")
        return subprocess.run(["unshare", "-n", sys.executable, __file__, binary], env=env).returncode
    try:
        run(binary)
    finally:
        log = WORK / "emu.log"
        if log.exists():
            print("emulator log:\n    " + "\n    ".join(log.read_text().splitlines()[-14:]))
        shutil.rmtree(WORK, ignore_errors=True)
    print("PASS" if not FAILURES else f"FAILED: {len(FAILURES)}")
    return 0 if not FAILURES else 1


if __name__ == "__main__":
    sys.exit(main())
