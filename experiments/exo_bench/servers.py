"""Each server under test: how to start it in the server namespace (pinned to the server core),
fill it, and aim the generator at it. Every server is started inside a `Procs` block, so it is
stopped when the block ends.

    reflector   Debian's dpdk-testpmd, macswap, on the same af_packet vdev as the cache node:
                the raw I/O ceiling of that port (frames/s the generator gets back)
    cache node  exo-cache-node, one lcore, no idle back-off, holding `hot_keys` keys that it
                FETCHed from a real db node (which is stopped before measuring)
    memcached   Debian's memcached 1.6, one worker thread, UDP, holding the same keys and values
    db node     exo-db-node, one packet thread, over the loaded RocksDB directory
    proxy       exo-proxy on the server core in the generator's namespace (a client-side
                sidecar), in front of the same cache node moved to the generator's core with
                idle back-off; exo-mcload speaks memcached over TCP to it on 127.0.0.1
"""
from __future__ import annotations

import math
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from exo_common.config import parse_config, write_resolved
from exo_topo.configgen import emulation_config_dict
from exo_topo.tls_setup import issue_certificates

from .loadgen import Target
from exo_topo.netns import in_named_netns

from .net import Link
from .procs import GEN_CORE, SRV_CORE, Procs, wait_until

MEMCACHED_PORT = 11211
PREFILL_BATCH = 1000
PROXY_LISTEN = ("127.0.0.1", 11211)  # exo-proxy's default, in the generator's namespace
# The cache node behind the proxy: only two cores exist and the proxy takes the server core, so
# the cache node shares the generator's core and must not busy-poll it (idle_sleep_us > 0: the
# deployment default of cluster configs, common/exo_common/config.py).
PROXY_CACHE_PLACEMENT = {"cache_core": GEN_CORE, "idle_sleep_us": 20}


@dataclass
class Bench:
    """What every case shares in one run."""
    build: Path
    run_dir: Path
    db_dir: Path          # RocksDB directory loaded with db_keys keys (exo-db-load)
    db_keys: int
    hot_keys: list[bytes]  # the keys the cache node and memcached hold (ids 0..len-1)
    value_size: int = 512


# ---------------------------------------------------------------- the cluster config

CACHE_NAME, DB_NAME, CLIENT_NAME = "cache0", "db0", "client0"


def node_addrs() -> dict[str, tuple[str, str]]:
    """name -> (mac, ip) as emulation_config_dict lays them out (topo/exo_topo/configgen.py)."""
    d = emulation_config_dict(1, 1, 1, "/tmp/exo/bench")
    return {n["name"]: (n["mac"], n["ip"]) for n in (*d["cache_nodes"], *d["db_nodes"], *d["clients"])}


def write_config(b: Bench, link: Link, tag: str, cache_core: int = SRV_CORE, idle_sleep_us: int = 0):
    """One cache node, one db node and one client on this link, with no controller and no
    switch: the cache node keeps what it FETCHed although its rule requests fail, which is all a
    bare link needs (there is no switch to route by rules). The cache node runs on `cache_core`
    (its one lcore), busy-polling unless idle_sleep_us > 0."""
    run = b.run_dir / tag
    cap = max(1, len(b.hot_keys))
    d = emulation_config_dict(
        1, 1, 1, run, cap,
        switch=dict(cache_rule_capacity=math.ceil(cap / 0.9) + 8),
        cache_fill=dict(enabled=False),
        controller=dict(grpc=f"unix:{run}/no-controller.sock", heartbeat_interval_ms=60_000))
    c, db, cl = d["cache_nodes"][0], d["db_nodes"][0], d["clients"][0]
    c.update(iface=link.srv.iface, lcores=str(cache_core), idle_sleep_us=idle_sleep_us)
    db.update(iface=link.srv.iface, data_dir=str(b.db_dir), threads=1, sync_writes=False)
    cl.update(iface=link.gen.iface)
    # No /metrics listeners: the bench's namespaces have no management network to bind them on.
    c["metrics"] = db["metrics"] = d["controller"]["metrics"] = ""
    cfg = parse_config(d, "<bench>")
    issue_certificates(cfg)  # the nodes' mutual TLS (docs/security.md), in <run>/pki
    return write_resolved(cfg, run / "cluster.json"), cfg


# ---------------------------------------------------------------- servers

def start_reflector(b: Bench, link: Link, procs: Procs, tag: str, cfg_path: Path, cfg) -> tuple[Target, dict]:
    """testpmd forwards on one lcore (the server core); its main lcore only prints stats and
    sleeps, so it shares the generator's core at no measurable cost."""
    cmd = ["dpdk-testpmd", "--no-huge", "-m", "256", "--no-pci", f"--file-prefix=exob-{tag}",
           f"--vdev=net_af_packet0,iface={link.srv.iface}", "-l", f"0,{SRV_CORE}", "--main-lcore", "0",
           "--log-level=*:warning", "--",
           "--forward-mode=macswap", "--auto-start", "--no-mlockall", "--nb-cores=1",
           # testpmd sizes its default pool for every possible port: too much for -m 256.
           "--total-num-mbufs=16384",
           # With a stats period testpmd loops until a signal instead of reading stdin.
           "--stats-period=3600"]
    # stdbuf: testpmd's stdout is a file here; line-buffer it so the log is readable live.
    proc = procs.start(tag, link.srv.netns, None, ["stdbuf", "-oL", *cmd])
    time.sleep(1.0)
    procs.check_alive(tag, proc)  # readiness: the bench's probe run (cases.py) sees it reflect
    return Target("reflect", keys=len(b.hot_keys)), {"pid": proc.pid, "program": "dpdk-testpmd macswap"}


MISS_KEYS = 10**8  # the figures' key space: nearly every GET misses Ruleset 2


def start_miss_reflector(b: Bench, link: Link, procs: Procs, tag: str, cfg_path: Path, cfg) -> tuple[Target, dict]:
    """The reflector, sent GETs for keys drawn from 10^8 (key-hash MAC and IP per request)."""
    _, info = start_reflector(b, link, procs, tag, cfg_path, cfg)
    return Target("reflect", keys=MISS_KEYS), info


def start_cache_node(b: Bench, link: Link, procs: Procs, tag: str, cfg_path: Path, cfg) -> tuple[Target, dict]:
    """The cache node filled the way the cluster fills it: Cache RPCs, FETCHed from a real db
    node over gRPC. The db node is then stopped: on a bare link it would answer the GETs too."""
    from exo_topo.grpc_clients import Stubs
    from exoproto import control_pb2 as pb

    core = cache_core_of(cfg)  # the config's one lcore; the whole process stays on it
    db = procs.start(f"{tag}-db0", link.srv.netns, core,
                     [str(b.build / "db-node/exo-db-node"), "--cluster", str(cfg_path), "--name", DB_NAME])
    cache = procs.start(f"{tag}-cache0", link.srv.netns, core,
                        [str(b.build / "cache-node/exo-cache-node"), "--cluster", str(cfg_path),
                         "--name", CACHE_NAME])
    stubs = Stubs(cfg)
    try:
        def alive():
            procs.check_alive(f"{tag}-db0", db)
            procs.check_alive(f"{tag}-cache0", cache)
        wait_until(lambda: stubs.stats(DB_NAME, timeout=1) is not None, "db node", alive=alive)
        wait_until(lambda: stubs.stats(CACHE_NAME, timeout=1) is not None, "cache node", alive=alive)
        t0 = time.monotonic()
        errors: set[str] = set()
        stub = stubs.cache(CACHE_NAME)
        for i in range(0, len(b.hot_keys), PREFILL_BATCH):
            rep = stub.Cache(pb.KeysRequest(keys=b.hot_keys[i:i + PREFILL_BATCH]), timeout=120)
            if rep.error:
                errors.add(rep.error.split(":")[0])
        held = len(stubs.cached_keys(CACHE_NAME, timeout=30))
        if held != len(b.hot_keys):
            raise RuntimeError(f"cache node holds {held} of {len(b.hot_keys)} keys after the prefill "
                               f"(errors: {sorted(errors)})")
        fill = {"keys": held, "seconds": round(time.monotonic() - t0, 2),
                "rule_errors": sorted(errors),
                "note": "no controller runs on a bare link: the cache node's rule requests fail and it keeps the entries"}
    finally:
        stubs.close()
        procs.stop(db)
    return Target("exo", keys=len(b.hot_keys)), {"pid": cache.pid, "fill": fill, "core": core,
                                                 "idle_sleep_us": cfg.cache_nodes[0].idle_sleep_us}


def cache_core_of(cfg) -> int:
    lcores = cfg.cache_nodes[0].lcores
    if not lcores.isdigit():
        raise ValueError(f"bench config: cache_nodes[0].lcores must be one core, got {lcores!r}")
    return int(lcores)


def start_proxy(b: Bench, link: Link, procs: Procs, tag: str, cfg_path: Path, cfg) -> tuple[Target, dict]:
    """The cache node as in the cache_node case, but on the core and with the back-off the config
    gives it (PROXY_CACHE_PLACEMENT), then exo-proxy pinned to the server core in the generator's
    namespace: it sends cluster frames over the veth to the cache node, and exo-mcload reaches it
    over TCP on 127.0.0.1 from the generator core. Ready once a GET of a hot key through it
    returns the value."""
    _, cache_info = start_cache_node(b, link, procs, tag, cfg_path, cfg)
    host, port = PROXY_LISTEN
    cmd = [str(b.build / "proxy/exo-proxy"), "--config", str(cfg_path), "--client", CLIENT_NAME,
           "--iface", link.gen.iface, "--listen", f"{host}:{port}", "--log-level", "warn"]
    proxy = procs.start(f"{tag}-proxy", link.gen.netns, SRV_CORE, cmd)
    key = b.hot_keys[0]
    with in_named_netns(link.gen.netns):
        wait_until(lambda: _proxy_get(host, port, key) == b.value_size, "exo-proxy to answer a GET",
                   alive=lambda: procs.check_alive(f"{tag}-proxy", proxy))
    cores = {str(GEN_CORE): ["exo-mcload (the memcached client)",
                             f"exo-cache-node (idle_sleep_us {cache_info['idle_sleep_us']})"],
             str(SRV_CORE): ["exo-proxy"]}
    info = {"pid": proxy.pid, "program": "exo-proxy", "argv": cmd[1:], "listen": f"{host}:{port}",
            "cache_node": cache_info, "cores": cores}
    return Target("memcached-tcp", keys=len(b.hot_keys), dst={"server": f"{host}:{port}"}), info


def _proxy_get(host: str, port: int, key: bytes) -> int:
    """Bytes of the value one `get` through the proxy returns (-1 for a miss or an error)."""
    with socket.create_connection((host, port), timeout=2) as s:
        s.sendall(b"get %s\r\n" % key)
        f = s.makefile("rb")
        line = f.readline()
        if not line.startswith(b"VALUE "):
            return -1
        return int(line.split()[3])


def proxy_stats(netns: str, host: str = PROXY_LISTEN[0], port: int = PROXY_LISTEN[1]) -> dict:
    """The proxy's own counters (`stats`: cluster resends, timeouts, connections, ...);
    {"error": ...} if it cannot be asked (evidence, not a reason to stop the bench)."""
    try:
        return _stats(netns, host, port)
    except OSError as e:
        return {"error": f"stats from exo-proxy at {host}:{port}: {e}"}


def _stats(netns: str, host: str, port: int) -> dict:
    out: dict = {}
    with in_named_netns(netns), socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"stats\r\n")
        f = s.makefile("rb")
        for raw in iter(f.readline, b""):
            line = raw.decode(errors="replace").strip()
            if line == "END":
                break
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[0] == "STAT":
                out[parts[1]] = int(parts[2]) if parts[2].isdigit() else parts[2]
    return out


def start_memcached(b: Bench, link: Link, procs: Procs, tag: str, cfg_path: Path, cfg) -> tuple[Target, dict]:
    """memcached with one worker thread (-t 1), UDP on, the same keys and value size, loaded over
    TCP from inside the server namespace."""
    ip = link.srv.ip
    mem_mb = max(64, int(len(b.hot_keys) * (b.value_size + 200) / 2**20 * 2))
    proc = procs.start(tag, link.srv.netns, SRV_CORE,
                       ["memcached", "-u", "root", "-t", "1", "-l", ip, "-p", str(MEMCACHED_PORT),
                        "-U", str(MEMCACHED_PORT), "-m", str(mem_mb), "-c", "1024"])
    with in_named_netns(link.srv.netns):
        wait_until(lambda: socket.create_connection((ip, MEMCACHED_PORT), timeout=1).close() is None,
                   "memcached", alive=lambda: procs.check_alive(tag, proc))
        stored = _memcached_load(ip, b.hot_keys, b.value_size)
    if stored != len(b.hot_keys):
        raise RuntimeError(f"memcached stored {stored} of {len(b.hot_keys)} keys")
    return (Target("memcached", keys=len(b.hot_keys),
                   dst={"mac": link.srv.mac, "ip": ip, "port": MEMCACHED_PORT}),
            {"pid": proc.pid, "threads": 1, "memory_mb": mem_mb})


def value_of(key: bytes, size: int) -> bytes:
    """memcached's copy of a key's value: the same size as the db node's (exo-db-load)."""
    return (key * (size // len(key) + 1))[:size]


def _memcached_load(ip: str, keys: list[bytes], value_size: int) -> int:
    with socket.create_connection((ip, MEMCACHED_PORT), timeout=10) as s:
        f = s.makefile("rb")
        stored = 0
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            s.sendall(b"".join(b"set %s 0 0 %d\r\n%s\r\n" % (k, value_size, value_of(k, value_size))
                               for k in chunk))
            for _ in chunk:
                line = f.readline()
                if line == b"STORED\r\n":
                    stored += 1
                elif not line:
                    raise RuntimeError("memcached closed the connection while loading")
        return stored


def warm_page_cache(data_dir: Path) -> dict:
    """Read every file of a RocksDB directory once, so the db node and the in-process RocksDB
    bench both start with its SST files in the OS page cache. Without it the two saw different
    caches: this machine's page cache was reclaimed between the cases (the in-process bench once
    measured 26,555 Gets/s against 154,270 in an earlier run, 45% of its time waiting for the
    disk), and a ratio of the two then measured the page cache, not the node."""
    t0 = time.monotonic()
    total = 0
    for f in sorted(data_dir.iterdir()):
        if f.is_file():
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    total += len(chunk)
    return {"bytes_read": total, "seconds": round(time.monotonic() - t0, 3)}


def start_db_node(b: Bench, link: Link, procs: Procs, tag: str, cfg_path: Path, cfg) -> tuple[Target, dict]:
    from exo_topo.grpc_clients import Stubs
    warmed = warm_page_cache(b.db_dir)
    db = procs.start(f"{tag}-db0", link.srv.netns, SRV_CORE,
                     [str(b.build / "db-node/exo-db-node"), "--cluster", str(cfg_path), "--name", DB_NAME])
    stubs = Stubs(cfg)
    try:
        wait_until(lambda: stubs.stats(DB_NAME, timeout=1) is not None, "db node",
                   alive=lambda: procs.check_alive(f"{tag}-db0", db), timeout=120)
    finally:
        stubs.close()
    return Target("exo", keys=b.db_keys), {"pid": db.pid, "threads": 1, "page_cache_warmed": warmed}
