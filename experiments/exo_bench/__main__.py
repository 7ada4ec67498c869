"""`python -m exo_bench` (`make bench`): the data-plane benchmark. Writes
<out>/bench_dataplane.json and .png and prints a table, then the replication cost cases
(chain_rf1, chain_rf3: <out>/bench_replication.json and a table); --smoke is the few-seconds-per-case run
`make test` uses to check the harness and the JSON (not the speed)."""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import chain_report, net, report
from .cases import CASES, NODE_CASES, Plan, Runner
from .chain import CHAIN_CASES, DB_NAMES, PARTITION_BITS, ChainRunner, repeats_for
from .servers import Bench

FULL = dict(db_keys=1_000_000, hot_keys=10_000, plan=Plan())
SMOKE = dict(db_keys=20_000, hot_keys=2_000,
             plan=Plan(run_s=1.0, drain_ms=200, max_runs=2, latency_s=1.0, client_s=0.5))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m exo_bench", description=__doc__)
    p.add_argument("--out", type=Path, default=Path("results"))
    p.add_argument("--run-dir", type=Path, default=Path("/tmp/exo/bench"), help="logs, configs, the RocksDB dir")
    p.add_argument("--build", type=Path, default=Path(os.environ.get("EXO_BUILD", "build")))
    p.add_argument("--smoke", action="store_true", help="a few seconds per case: checks the harness, not the speed")
    p.add_argument("--only", default=None,
                   help="comma-separated cases (" + ",".join(c.name for c in (*CASES, *CHAIN_CASES)) + ",rocksdb,client)")
    p.add_argument("--db-keys", type=int, default=None, help="keys in the db node's RocksDB (default 1,000,000)")
    p.add_argument("--hot-keys", type=int, default=None, help="keys the cache node and memcached hold (10,000)")
    p.add_argument("--run-s", type=float, default=None, help="seconds per generator run")
    p.add_argument("--common-rate", type=float, default=None,
                   help="offer every case this rate in the latency pass (default: half the lowest node ceiling); "
                        "e.g. the full run's rate when only some cases run")
    p.add_argument("--proxy-connections", type=int, default=None,
                   help="exo-mcload's connections to exo-proxy (default 128)")
    return p


def _check_prerequisites(build: Path) -> None:
    need = [build / "emulator/exo-loadgen", build / "cache-node/exo-cache-node", build / "db-node/exo-db-node",
            build / "db-node/exo-db-load", build / "db-node/exo-rocksdb-bench", build / "emulator/exo-mcload",
            build / "proxy/exo-proxy"]
    missing = [str(p) for p in need if not p.exists()]
    for tool in ("dpdk-testpmd", "memcached", "ovs-vsctl", "perf", "taskset", "ethtool"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            missing.append(tool)
    if os.geteuid() != 0:
        missing.append("root (namespaces, AF_PACKET, DPDK)")
    if missing:
        raise SystemExit(f"exo_bench: missing prerequisites: {', '.join(missing)} (run `make build` as root)")


def _hot_keys(build: Path, n: int) -> list[bytes]:
    """Key ids 0..n-1 as the generator names them (its --print-keys, so the format is defined once)."""
    r = subprocess.run([str(build / "emulator/exo-loadgen"), "--print-keys", str(n), "--keys", str(n)],
                       capture_output=True, text=True, check=True)
    return [line.encode() for line in r.stdout.split()]


def _load_db(build: Path, db_dir: Path, keys: int, value_size: int, say) -> dict:
    stamp = db_dir / "exo-bench-loaded.json"
    if stamp.exists():
        doc = json.loads(stamp.read_text())
        say(f"db: reusing {db_dir} ({keys:,} keys x {value_size} B)")
        return {**doc, "reused": True}
    subprocess.run(["rm", "-rf", str(db_dir)], check=True)
    say(f"db: loading {keys:,} keys x {value_size} B into {db_dir} (exo-db-load)")
    r = subprocess.run([str(build / "db-node/exo-db-load"), "--data-dir", str(db_dir), "--keys", str(keys),
                        "--key-size", "16", "--value-size", str(value_size), "--compact"],
                       stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"exo-db-load exited {r.returncode}")
    doc = json.loads(r.stdout)
    # Write the loaded files back to disk now, so the writeback of 0.5 GB of dirty pages does not
    # run during (and stall) the first measured reads.
    subprocess.run(["sync", "-f", str(db_dir)], check=False)
    stamp.write_text(json.dumps(doc) + "\n")
    return {**doc, "reused": False}


def _machine() -> dict:
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), "?")
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(), "loadavg": os.getloadavg()}


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    mode = SMOKE if args.smoke else FULL
    plan: Plan = mode["plan"]
    if args.run_s:
        plan.run_s = args.run_s
    if args.common_rate is not None and not args.common_rate > 0:
        raise SystemExit("exo_bench: --common-rate: must be > 0 requests/s")
    if args.proxy_connections is not None:
        if not 1 <= args.proxy_connections <= 10_000:
            raise SystemExit("exo_bench: --proxy-connections: must be in 1..10000")
        plan.proxy_connections = args.proxy_connections
    only = {x.strip() for x in args.only.split(",")} if args.only else None
    known = {c.name for c in (*CASES, *CHAIN_CASES)} | {"rocksdb", "client"}
    if only is not None and not only <= known:
        raise SystemExit(f"exo_bench: --only: unknown case(s) {', '.join(sorted(only - known))} "
                         f"(known: {', '.join(sorted(known))})")
    # --only naming chain cases alone leaves bench_dataplane.json as an earlier run wrote it.
    dataplane = only is None or bool(only - {c.name for c in CHAIN_CASES})
    chains = [c for c in CHAIN_CASES if only is None or c.name in only]
    plan.only = only
    db_keys = args.db_keys or mode["db_keys"]
    hot = args.hot_keys or mode["hot_keys"]
    build = args.build.resolve()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    # SIGTERM unwinds like Ctrl-C, so every namespace, bridge and process is removed.
    signal.signal(signal.SIGTERM, _interrupt)
    _check_prerequisites(build)
    stale = net.sweep_stale()
    if stale:
        say(f"removed what an earlier run left: {', '.join(stale)}")
    run_dir = args.run_dir.resolve()
    db_dir = run_dir / f"db-{db_keys}x512"
    doc: dict = {"schema": report.SCHEMA, "smoke": args.smoke, "machine": _machine(),
                 "params": {"key_size": 16, "value_size": 512, "hot_keys": hot, "db_keys": db_keys,
                            "run_s": plan.run_s, "drain_ms": plan.drain_ms, "latency_s": plan.latency_s,
                            "loss_limit": 0.01, "key_choice": "uniform over the case's keys",
                            "cores": {"generator": 0, "server": 1,
                                      "proxy_case": "exo-proxy on the server core; exo-mcload and the cache node "
                                                    "(idle back-off) share the generator core (cases.proxy.server.cores)"},
                            "generator": "exo-loadgen (AF_PACKET, sendmmsg/recvmmsg), the same for every case but "
                                         "the proxy, which speaks memcached over TCP: exo-mcload (epoll; the same "
                                         "pacing, per-second series and latency histogram code)"},
                 "cases": {}}
    try:
        doc["db_load"] = _load_db(build, db_dir, db_keys, 512, say)
        bench = Bench(build=build, run_dir=run_dir, db_dir=db_dir, db_keys=db_keys, hot_keys=_hot_keys(build, hot))
        if dataplane:
            _dataplane(doc, bench, plan, out, only, args, say, t0)
        if chains:
            _replication(doc, bench, plan, out, chains, args.smoke, say, t0)
        return 0
    except KeyboardInterrupt:
        say("interrupted: everything the bench started has been removed")
        return 130
    finally:
        left = net.leftovers()
        if left:
            say(f"WARNING: still present after teardown: {left}")


def _dataplane(doc: dict, bench: Bench, plan: Plan, out: Path, only, args, say, t0: float) -> None:
    """The data-plane cases, the in-process RocksDB baseline and the client: bench_dataplane.json."""
    runner = Runner(bench, plan, out, say)
    cases = [c for c in CASES if only is None or c.name in only]
    for c in cases:
        doc["cases"][c.name] = runner.ceiling(c)
        if "client" in doc["cases"][c.name]:
            doc["client"] = report.client_figures(doc["cases"][c.name].pop("client"))
    if only is None or "rocksdb" in only:
        doc["rocksdb_in_process"] = runner.rocksdb()
        # Context for the db node's design: would batching its reads into MultiGet pay?
        doc["rocksdb_in_process_multiget"] = runner.rocksdb(batch=32)
    node_ceilings = [doc["cases"][n]["ceiling"]["rps"] for n in NODE_CASES
                     if n in doc["cases"] and doc["cases"][n]["ceiling"]["rps"]]
    if args.common_rate:
        doc["common_rate"] = round(args.common_rate)
        doc["common_rate_given"] = True
    elif node_ceilings:
        doc["common_rate"] = round(0.5 * min(node_ceilings))
    if doc.get("common_rate"):
        for c in cases:
            doc["cases"][c.name]["latency_at_common"] = runner.latency(c, doc["common_rate"])
    if "proxy" in doc["cases"]:
        doc["proxy"] = report.proxy_figures(doc)
    doc["ratios"] = report.compute_ratios(doc)
    doc.setdefault("client", {"error": "not measured (the cache_node case did not run)"})
    doc["machine"]["loadavg_after"] = os.getloadavg()
    doc["elapsed_s"] = round(time.monotonic() - t0, 1)
    report.write_json(doc, out / "bench_dataplane.json")
    report.plot(doc, out / "bench_dataplane.png")
    print(report.table(doc))
    say(f"wrote {out / 'bench_dataplane.json'} and .png")


def _replication(base: dict, bench: Bench, plan: Plan, out: Path, chains, smoke: bool, say, t0: float) -> None:
    """The replication cost cases (chain.py): both ceilings of each case, then PUT latency at
    one rate for both; bench_replication.json and its table (chain_report.py)."""
    repeats = repeats_for(smoke)
    doc: dict = {"schema": chain_report.SCHEMA, "smoke": smoke, "machine": _machine(),
                 "params": {"db_nodes": list(DB_NAMES), "cache_nodes": 0, "clients": 1,
                            "partition_bits": PARTITION_BITS, "key_size": 16, "value_size": bench.value_size,
                            "put_keys": bench.db_keys, "get_keys": bench.db_keys,
                            "key_choice": "uniform over the keys (the same for both cases)",
                            "run_s": plan.run_s, "latency_s": plan.latency_s, "repeats": repeats,
                            "loss_limit": 0.01, "sync_writes": False, "db_node_threads": 1,
                            "cores": {"generator": 0, "db_nodes": 1},
                            "replication_transport": "gRPC (mutual TLS) on unix sockets between namespaces",
                            "db_load": base.get("db_load")},
                 "cases": {}}
    runner = ChainRunner(bench, plan, out, say, repeats)
    for c in chains:
        doc["cases"][c.name] = runner.ceilings(c)
    rate = chain_report.common_put_rate([doc["cases"][c.name]["put"]["ceiling"]["rps"] for c in chains])
    doc["put_common_rate"] = rate
    if rate:
        for c in chains:
            doc["cases"][c.name]["put_latency"] = runner.put_latency(c, rate)
    doc["replication"] = {f"rf{c.rf}": chain_report.case_figures(doc["cases"][c.name]) for c in chains}
    if {"rf1", "rf3"} <= set(doc["replication"]):
        doc["ratios"] = chain_report.ratios(doc["replication"]["rf1"], doc["replication"]["rf3"])
    doc["elapsed_s"] = round(time.monotonic() - t0, 1)
    report.write_json(doc, out / "bench_replication.json")
    print(chain_report.table(doc))
    say(f"wrote {out / 'bench_replication.json'}")


if __name__ == "__main__":
    sys.exit(main())
