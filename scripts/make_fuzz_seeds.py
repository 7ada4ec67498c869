#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (scripts/sanitize.sh): frames from proto/wire_vectors.json
(valid and malformed), cluster configs, lcore lists, and control-plane request sequences
encoded with the generated protobuf classes (proto/exoproto/control_pb2.py)."""
import json
import pathlib
import struct
import sys

root = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root / "proto"))
sys.path.insert(0, str(root / "controller"))
from exoproto import control_pb2 as pb  # noqa: E402

out = pathlib.Path(sys.argv[1])


def seeds(target, items):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(items):
        (d / f"seed{i}").write_bytes(data)


# ---- data-plane frames ----
vectors = json.loads((root / "proto" / "wire_vectors.json").read_text())
frames = [bytes.fromhex(v["frame_hex"]) for v in vectors["frames"] + vectors["malformed"]]
seeds("wire_parse_fuzz", frames)
seeds("db_request_handler_fuzz", frames)
# emulator_fuzz (emulator/fuzz/emulator_fuzz.cc): [lane][time step][frame]; also the frames sent
# to a hosted node's MAC (02:00:00:00:02:01) and seen with a hosted node's MAC as source.
node_mac, other_mac = bytes.fromhex("020000000201"), bytes.fromhex("020000000202")
seeds("emulator_fuzz", [bytes([i % 2, 3 + i % 200]) + f for i, f in enumerate(frames)]
      + [bytes([1, 0]) + node_mac + f[6:] for f in frames[:8]]
      + [bytes([0, 250]) + f[:6] + other_mac + f[12:] for f in frames[:4]])
# request_handler_fuzz frames: [len][extra_cap/4][bytes]
seeds("request_handler_fuzz", [bytes([len(f), 128]) + f for f in frames if len(f) < 256])

# ---- cluster config (what `exo config resolve` writes) ----
# Python's resolved output (common/cpp/tests/data, kept current by tests/unit/test_config.py),
# also shrunk to a 2-slot table with small hot_keys/cache_fill values.
full = json.loads((root / "common" / "cpp" / "tests" / "data" / "defaults.resolved.json").read_text())
minimal = json.loads(json.dumps(full))
minimal["switch"]["partition_bits"] = 1
minimal["partitions"] = ["db0", "db1"]
minimal["chains"] = [{"nodes": ["db0"]}, {"nodes": ["db1"]}]
minimal["hot_keys"].update(top_k=7, sample_rate=0.5, segment_ms=100, segments=2, weights=[3, 1],
                           report_interval_ms=50, report_keys=5)
minimal["cache_fill"].update(interval_ms=20, min_rate=2.5, report_ttl_ms=900, max_fetch_batch=9)
# ... and with chains of two (replication.factor 2) and a spare db node.
chained = json.loads(json.dumps(minimal))
chained["replication"]["factor"] = 2
chained["chains"] = [{"nodes": ["db0", "db1"]}, {"nodes": ["db1", "db0"]}]
chained["db_nodes"].append(dict(chained["db_nodes"][1], name="db2", member=False))
configs = [full, minimal, chained]
try:  # the demo cluster, resolved by the controller's schema (needs its Python dependencies)
    from exo_common.config import load_config, resolve
    configs.append(resolve(load_config(root / "configs" / "demo.yaml")))
except Exception as e:  # noqa: BLE001 - seeds are a help, not a requirement
    print(f"make_fuzz_seeds: demo config not resolved ({e}); fixture configs only", file=sys.stderr)
texts = [json.dumps(c, separators=(",", ":")).encode() for c in configs]
texts += [json.dumps(minimal, indent=1).encode(), b"{}", b"[]", b'{"cluster": {"mtu": 1e20}}',
          b'{"cache_fill": {"min_rate": "NaN"}}']
seeds("cluster_parse_fuzz", texts)

# ---- EAL args: [mtu:2][lcores] ----
seeds("eal_args_fuzz", [struct.pack(">H", m) + s for m, s in
                        [(1500, b"0"), (1500, b"0-3"), (9000, b"0,2-3,7"), (0, b"3-1"),
                         (1, b"1,"), (2, b"1023"), (3, b"0-1024")]])

# ---- cache node control plane: [op:1][len:2][message] steps (cache-node/fuzz/control_fuzz.cc) ----
(CACHE, EVICT, PREPARE, COMMIT, ABORT, DROP, REPORT, RESET, LIST_STATS, FILL, RETIRE,
 DURING_FETCH, FAULTS, CLOCK, GET) = range(15)


def step(op, payload=b""):
    if not isinstance(payload, bytes):
        payload = payload.SerializeToString()
    return struct.pack(">BH", op, len(payload)) + payload


def keys(*ks):
    return pb.KeysRequest(keys=[k.encode() for k in ks])


def report(db, *kr):
    return pb.ReportRequest(db_node=db, keys=[pb.KeyLoad(key=k.encode(), rate=r) for k, r in kr])


def prep(k, txid, value=b"", is_delete=False):
    return pb.PrepareRequest(key=k.encode(), txid=txid, value=value, is_delete=is_delete)


def tx(k, txid):
    return pb.TxRequest(key=k.encode(), txid=txid)


stats = pb.StatsRequest()
control = [
    step(CACHE, keys("a", "b", "c")) + step(GET, b"a") + step(PREPARE, prep("b", 7, b"B2"))
    + step(GET, b"b") + step(COMMIT, tx("b", 7)) + step(GET, b"b") + step(RESET, stats)
    + step(GET, b"a") + step(LIST_STATS, stats),
    step(REPORT, report("db0", ("a", 50), ("b", 40), ("c", 30), ("d", 20), ("e", 10)))
    + step(FILL) + step(CLOCK, b"\x00\x64") + step(FILL)
    + step(REPORT, report("db0", ("f", 500), ("g", 400), ("h", 300), ("k", 200))) + step(FILL)
    + step(FAULTS, b"\x04") + step(RETIRE) + step(RESET, stats) + step(RETIRE) + step(FILL),
    step(DURING_FETCH) + step(RESET, stats) + step(CACHE, keys("a", "b")) + step(CACHE, keys("a")),
    step(DURING_FETCH) + step(PREPARE, prep("a", 3, b"A3")) + step(CACHE, keys("a"))
    + step(GET, b"a") + step(COMMIT, tx("a", 3)) + step(ABORT, tx("a", 3)) + step(GET, b"a"),
    step(DURING_FETCH) + step(EVICT, keys("a")) + step(CACHE, keys("a", "b"))
    + step(PREPARE, prep("b", 1, is_delete=True)) + step(COMMIT, tx("b", 1)) + step(RETIRE),
    step(CACHE, keys("", "x" * 251, "big", "empty", "nope", "a", "a")) + step(DROP, keys("a", "q"))
    + step(EVICT, keys("a", "empty")),
    step(REPORT, report("db9", ("a", 1))) + step(REPORT, report("db0", ("a", -1)))
    + step(REPORT, report("db0", ("", 1))) + step(FAULTS, b"\x41a") + step(REPORT, report("db0", ("a", 9)))
    + step(FILL) + step(FAULTS, b"\x01") + step(CACHE, keys("b")) + step(FILL),
    step(CACHE, keys(*"abcdefgh")) + step(CACHE, keys("k")) + step(DURING_FETCH) + step(FILL)
    + step(REPORT, report("db0", ("a", 9))) + step(FILL),
]
seeds("control_fuzz", control)

# ---- cache node key table: [op][arg] pairs (cache-node/fuzz/key_table_fuzz.cc) ----
(K_CACHE, K_FILL, K_VICTIM, K_TAKE, K_REMOVED, K_DONE, K_EVICT, K_DROP, K_RESET, K_PREPARE, K_COMMIT,
 K_ABORT, K_COMMIT_PREPARED, K_ABORT_PREPARED, K_FETCH_DONE, K_STRAY) = range(16)
NEW_BATCH, ROOM = 0x80, 0x04


def ev(*pairs):
    return bytes(b for p in pairs for b in p)


def txarg(key, txid):
    return key | txid << 2


seeds("key_table_fuzz", [
    # fill three keys, retire one through the retire thread's steps, a write on another, then an
    # insert that pushes an entry out
    ev((K_CACHE, 0 | NEW_BATCH), (K_CACHE, 1), (K_FILL, 2 | ROOM), (K_FETCH_DONE, 0), (K_VICTIM, 0),
       (K_TAKE, 0), (K_PREPARE, txarg(1, 5)), (K_COMMIT_PREPARED, 1), (K_REMOVED, 0), (K_DONE, 0),
       (K_CACHE, 3 | NEW_BATCH), (K_CACHE, 0), (K_FETCH_DONE, 0), (K_DONE, 0), (K_STRAY, 1)),
    # writes prepared and committed while fetching, an older Prepare refused, a DELETE committed
    ev((K_CACHE, 0 | NEW_BATCH), (K_CACHE, 1), (K_PREPARE, txarg(0, 8)), (K_PREPARE, txarg(0, 6)),
       (K_COMMIT_PREPARED, 0), (K_PREPARE, txarg(1, 9)), (K_COMMIT_PREPARED, 1), (K_FETCH_DONE, 0),
       (K_PREPARE, txarg(0, 12)), (K_ABORT, txarg(0, 13)), (K_ABORT_PREPARED, 0)),
    # Evict and Reset during FETCHes, a removal in flight across a Reset
    ev((K_FILL, 0 | ROOM | NEW_BATCH), (K_FILL, 1 | ROOM | NEW_BATCH), (K_EVICT, 0), (K_FETCH_DONE, 1),
       (K_VICTIM, 1), (K_TAKE, 0), (K_CACHE, 2 | NEW_BATCH), (K_RESET, 0), (K_FETCH_DONE, 0),
       (K_CACHE, 1), (K_REMOVED, 1), (K_DONE, 0), (K_DONE, 0), (K_CACHE, 1 | NEW_BATCH)),
])

# ---- db node cached-write coordinator: one byte per step (db-node/fuzz/coordinator_model.h:
# low 3 bits the step, bits 4-5 the key a/b/c, bit 7 a flag), a fault step takes 3 more bytes ----
C_WRITE, C_ROUND, C_FETCH, C_EVICT, C_RESET, C_CRASH, C_FAULTS = 0, 2, 3, 4, 5, 6, 7
CA, CB, CC, FLAG = 0x00, 0x10, 0x20, 0x80


def faults(prepare=0, commit=0, abort=0, store=0, crash=None, os_crash=False):
    """Network modes 0 deliver, 1 lose the request, 2 lose the reply; `store` the failure bits
    (1 begin, 2 txn, 4 commit, 8 rollback, 16 synced batch, 32 relaxed batch); a crash after
    `crash` actions."""
    f = prepare | commit << 2 | abort << 4 | store << 6
    c = 0 if crash is None else 0x10 | crash | (0x20 if os_crash else 0)
    return bytes([C_FAULTS, f & 0xFF, f >> 8, c])


seeds("db_coordinator_fuzz", [
    # a cached PUT and DELETE, then a resolver round
    bytes([C_FETCH | CA, C_WRITE | CA, C_WRITE | CA | FLAG, C_ROUND]),
    # the Commit lost: OK, left to the resolver; the next write settles it first
    bytes([C_FETCH | CB]) + faults(commit=1) + bytes([C_WRITE | CB, C_WRITE | CB]) + faults()
    + bytes([C_WRITE | CB, C_ROUND]),
    # the Prepare's reply lost: BUSY, Abort queued; the db node is killed, recovery queues it again
    bytes([C_FETCH | CC]) + faults(prepare=2) + bytes([C_WRITE | CC, C_CRASH]) + faults()
    + bytes([C_ROUND, C_WRITE | CC]),
    # an OS crash in the middle of a cached write, then a crash during recovery
    bytes([C_FETCH | CA]) + faults(crash=3, os_crash=True) + bytes([C_WRITE | CA])
    + faults(crash=1) + bytes([C_CRASH, C_WRITE | CA]),
    # the local commit fails after the cache node prepared: ERROR and Abort; ForgetCacheNode
    bytes([C_FETCH | CB]) + faults(store=4) + bytes([C_WRITE | CB]) + faults()
    + bytes([C_RESET | CB, C_FETCH | CB, C_WRITE | CB]),
])

# ---- db node control plane: same step format (db-node/fuzz/control_fuzz.cc) ----
D_FETCH, D_EVICT, D_FORGET, D_STATS, D_HOTKEYS, D_FAULTS, D_SEED, D_DECISION = range(8)


def fetch(node, *ks):
    return pb.FetchRequest(cache_node=node, keys=[k.encode() for k in ks])


def evict(node, *ks):
    return pb.EvictRequest(cache_node=node, keys=[k.encode() for k in ks])


def forget(node):
    return pb.ForgetCacheNodeRequest(cache_node=node)


seeds("db_control_fuzz", [
    step(D_FETCH, fetch("cache0", "a", "b", "missing", "", "x" * 251)) + step(D_STATS, stats)
    + step(D_EVICT, evict("cache0", "a", "zz")) + step(D_EVICT, evict("cache9", "b"))
    + step(D_FORGET, forget("cache0")) + step(D_STATS, stats),
    step(D_SEED, b"\x02k2value") + step(D_FETCH, fetch("cache0", "k2", "c"))
    + step(D_DECISION, b"\x07\x01c") + step(D_DECISION, b"\x08\x00k2")
    + step(D_FORGET, forget("cache0")) + step(D_FORGET, forget("nobody")),
    step(D_FAULTS, b"\x02") + step(D_FETCH, fetch("cache0", "a")) + step(D_FAULTS, b"\x01")
    + step(D_FETCH, fetch("cache0", "b")) + step(D_FAULTS, b"\x00") + step(D_FETCH, fetch("cache0", "a", "b"))
    + step(D_FAULTS, b"\x02") + step(D_EVICT, evict("cache0", "a")) + step(D_HOTKEYS, stats),
    step(D_FETCH, fetch("cache9", "a")) + step(D_FETCH, fetch("", "a")),
])

# ---- exo-proxy's memcached text/meta parser: [limits:4][split seed:1][stream]
# (proxy/fuzz/text_protocol_fuzz.cc; an odd first byte keeps the default limits) ----
memcache = [
    b"get a b c\r\nset k 5 100 5\r\nhe\r\nl\r\ngets k\ncas k 0 0 1 77 noreply\r\nx\r\n",
    b"incr n 5\r\ndecr n 9 noreply\r\ntouch k 10\r\ngat 5 a b\r\ngats 0 a\r\ndelete k 0 noreply\r\n",
    b"flush_all 10 noreply\r\nverbosity 1\r\nversion\r\nstats items\r\nquit\r\n",
    b"set k 0 0 3\r\nabcd\r\nset k 0 0 -1\r\nbogus noreply\r\n\r\n GET a\r\n",
    b"mg Zm9v b v k Oop t c f s q\r\nms foo 3 T60 F9 MA I c\r\nbar\r\nms foo 2 MX\r\nhi\r\n",
    b"md foo q C12 I T30 x\r\nma foo D7 MD N30 J1 v\r\nme foo\r\nmn\r\nmg foo v v\r\n",
    b"set k 0 0 9\r\n" + b"v" * 9 + b"\r\nget " + b"k" * 40 + b"\r\n\x80\x01\x00",
]
seeds("text_protocol_fuzz", [b"\x01\x00\x00\x00\x07" + m for m in memcache]
      + [b"\x06\x10\x08\x02\x03" + m for m in memcache])
