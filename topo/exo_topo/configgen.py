"""Generate an emulation cluster config: n cache nodes, n db nodes, n clients, with MACs,
IPs, switch ports, gRPC unix sockets and RocksDB directories laid out under one run dir.
`exo config generate` writes one as YAML; tests build them in memory.

Address plan (kind = 1 cache, 2 db, 3 client; i counts from 1):
    MAC 02:00:00:00:<kind>:<i>    IP 10.0.<kind>.<i>/8    switch ports 1.. in the order cache, db, client

With `emulator="emu0"` the db nodes are emulated wimpies (thesis 4.1.1) in one exo-emulator
process on Mininet host emu0: they keep their own MACs and gRPC sockets but share db0's IP and
switch port and the interface emu0-eth0.

Certificates (docs/security.md) go to <run dir>/pki (security.cert_dir): the emulation issues
them there itself (exo_topo/tls_setup.py), TLS on unless a caller passes
security={"insecure_dev_mode": True}.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from exo_common.config import ClusterConfig, parse_config

from .mgmt_net import assign_addresses

KIND = {"cache": 1, "db": 2, "client": 3}


def emulation_config_dict(n_cache: int = 2, n_db: int = 4, n_clients: int = 2,
                          run_dir: str | Path = "/tmp/exo/demo", cache_capacity: int = 1000,
                          emulator: str | None = None, **sections: Any) -> dict:
    run_dir = Path(run_dir)
    port = 0

    def node(kind: str, i: int) -> dict:
        nonlocal port
        port += 1
        k = KIND[kind]
        prefix = {"cache": "cache", "db": "db", "client": "client"}[kind]
        return {"name": f"{prefix}{i}", "mac": f"02:00:00:00:{k:02x}:{i + 1:02x}",
                "ip": f"10.0.{k}.{i + 1}", "switch_port": port}

    caches = []
    for i in range(n_cache):
        n = node("cache", i)
        n.update(grpc=f"unix:{run_dir}/{n['name']}.sock", capacity=cache_capacity, lcores=str(i % 2))
        caches.append(n)
    dbs = []
    for i in range(n_db):
        n = node("db", i)
        n.update(grpc=f"unix:{run_dir}/{n['name']}.sock", data_dir=str(run_dir / "data" / n["name"]),
                 threads=1, sync_writes=False)
        if emulator is not None:
            if dbs:  # one host: db0's address and port; this node's switch port stays unused
                n.update(ip=dbs[0]["ip"], switch_port=dbs[0]["switch_port"])
                port -= 1
            n.update(emulator=emulator, iface=f"{emulator}-eth0")
        dbs.append(n)
    clients = [node("client", i) for i in range(n_clients)]
    cfg: dict = {
        "cluster": {"name": run_dir.name or "exo"},
        "controller": {"grpc": f"unix:{run_dir}/controller.sock"},
        "cache_nodes": caches, "db_nodes": dbs, "clients": clients,
        "security": {"cert_dir": str(run_dir / "pki")},
        # Factor 1 unless a caller asks for chains: the thesis figures are factor 1, and the
        # tests and benchmarks built on this generator measure one thing at a time (the
        # replicated ones pass replication={"factor": 3}). A user's config gets `auto`.
        "replication": {"factor": 1},
    }
    for section, values in sections.items():
        cfg.setdefault(section, {}).update(values)
    return assign_addresses(cfg)  # Prometheus /metrics addresses (exo_topo/mgmt_net.py)


def emulation_config(*args: Any, **kwargs: Any) -> ClusterConfig:
    return parse_config(emulation_config_dict(*args, **kwargs), "<generated>")
