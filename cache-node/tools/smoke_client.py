"""Smoke-test client: drives a running cache node over gRPC and raw frames on IFACE.

    smoke_client.py IFACE CACHE_GRPC CACHE_MAC
Sends GETs from an AF_PACKET socket, checks: a miss comes back with prefix 0xAE + FORWARDED,
a hit (after Cache()) is answered in place with FROM_CACHE and the value, malformed frames are
counted, DropEntries makes the key miss again. Exits non-zero on the first failed check.
"""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../client-lib"))
import grpc  # noqa: E402
from exoproto import control_pb2 as pb  # noqa: E402
from exoproto import control_pb2_grpc as pbg  # noqa: E402
from exoskeleton import wire  # noqa: E402

IFACE, ADDR, CACHE_MAC = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3].replace(":", ""))
CLIENT_MAC = bytes.fromhex("020000000301")
CLIENT_IP = bytes([10, 0, 3, 1])

sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
sock.bind((IFACE, 0))
sock.settimeout(0.2)
stub = pbg.CacheNodeStub(grpc.insecure_channel(ADDR))
seq = 0


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit(1)


def get(key: bytes, raw: bytes | None = None):
    """Sends a GET (or raw bytes) and returns the first frame back that is not our own."""
    global seq
    seq += 1
    if raw is None:
        msg = wire.Message(wire.OP_GET, 0, 0, 0xABCD, seq, key)
        raw = wire.encode_frame(wire.request_dst_mac(wire.OP_GET, key), CLIENT_MAC, CLIENT_IP,
                                wire.request_dst_ip(key), 40000, 7777, msg)
    sock.send(raw)
    deadline = time.time() + 1.0
    while time.time() < deadline:
        try:
            data = sock.recv(4096)
        except socket.timeout:
            continue
        if data == raw:
            continue
        return data
    return None


def stats():
    return {c.name: c.value for c in stub.Stats(pb.StatsRequest(), timeout=2).counters}


miss = get(b"hot1")
check(miss is not None, "miss came back")
check(miss[0] == 0xAE, "miss forwarded with prefix 0xAE")
f = wire.decode_frame(miss)
check(f.msg.flags & wire.FLAG_FORWARDED, "FORWARDED flag set")
check(f.eth_src == CLIENT_MAC, "src MAC still the client's")

rep = stub.Cache(pb.KeysRequest(keys=[b"hot1", b"cold1"]), timeout=5)
check(rep.done == 1 and list(rep.skipped) == [b"cold1"] and not rep.error, f"Cache(): {rep}")
check(list(stub.ListKeys(pb.StatsRequest(), timeout=2).keys) == [b"hot1"], "ListKeys")

hit = get(b"hot1")
check(hit is not None, "hit reply came back")
f = wire.decode_frame(hit)
check(f.eth_dst == CLIENT_MAC and f.eth_src == CACHE_MAC, "reply addressed client <- cache")
check(f.msg.opcode == 0x81 and f.msg.status == 0 and f.msg.flags == wire.FLAG_FROM_CACHE,
      "reply opcode/status/FROM_CACHE")
check(f.msg.value == b"V:hot1" and f.msg.seq == seq and f.udp_dst == 40000, "reply value/seq/port")

p = stub.Prepare(pb.PrepareRequest(key=b"hot1", txid=5, value=b"new"), timeout=2)
check(p.ok and p.cached, "Prepare on held key")
check(get(b"hot1")[0] == 0xAE, "pending key forwarded")
check(stub.Commit(pb.TxRequest(key=b"hot1", txid=5), timeout=2).ok, "Commit")
check(wire.decode_frame(get(b"hot1")).msg.value == b"new", "committed value served")

before = stats()["malformed_dropped"]
good = wire.encode_frame(wire.request_dst_mac(wire.OP_GET, b"hot1"), CLIENT_MAC, CLIENT_IP,
                         wire.request_dst_ip(b"hot1"), 40000, 7777, wire.Message(wire.OP_GET, 0, 0, 1, 1, b"hot1"))
bad_magic = good[:42] + b"\x00\x00" + good[44:]
truncated = good[:50]
put = wire.encode_frame(wire.request_dst_mac(wire.OP_GET, b"hot1"), CLIENT_MAC, CLIENT_IP,
                        wire.request_dst_ip(b"hot1"), 40000, 7777, wire.Message(wire.OP_PUT, 0, 0, 1, 1, b"hot1", b"v"))
for raw in (bad_magic, truncated, put):
    check(get(b"", raw) is None, "malformed frame gets no answer")
time.sleep(0.3)
check(stats()["malformed_dropped"] - before == 3, "3 malformed frames counted")

stub.DropEntries(pb.KeysRequest(keys=[b"hot1"]), timeout=2)
check(get(b"hot1")[0] == 0xAE, "after DropEntries the GET is forwarded")
ev = stub.Evict(pb.KeysRequest(keys=[b"hot1"]), timeout=5)
check(not ev.error, "Evict() of a dropped key talks to controller + db without error")
s = stats()
print({k: v for k, v in s.items()}, flush=True)
check(s["hits"] == 2 and s["gets"] == 5 and s["forwarded_misses"] == 3 and s["rx_frames"] == 8
      and s["tx_frames"] == 5 and s["entries"] == 0, "counters add up")
print("SMOKE OK", flush=True)
