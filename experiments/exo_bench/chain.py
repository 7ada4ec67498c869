"""The replication cost cases, chain_rf1 and chain_rf3 (issue 15, outcome 5; the setup is
docs/design/replication.md, section 7): the same three exo-db-nodes, each in a namespace of
its own and all pinned to the server core, so a chain of three pays its CPU where a chain of
one does not; only the resolved config differs. Every slot's chain is [db0] (rf 1) or
[db0, db1, db2] (rf 3): db0 is every slot's head, so every generated key's write reaches it,
and db0 (rf 1) or db2 (rf 3) is every slot's read server. The C++ reader accepts any
consistent table (partitions.check_chains), so no key has to be chosen per slot.

At rf 3 the bench then pushes that table to the three nodes (DbNode.SetChains, as the controller
would: push_chain_table); a node takes no chain role before. The generator has one veth, to the node the phase measures: db0 for writes (the head), the
read server for reads; the other two nodes get a dummy interface (net.stub_netns) and talk to
the chain over gRPC on unix sockets, which cross namespaces. Per case:

    put     the PUT ceiling (--get-ratio 0, the loss rule of search.py), then `repeats` runs at
            the rate that passed: its spread. Empty RocksDB directories.
    get     the GET ceiling (--get-ratio 1, uniform over the loaded keys: the db_node case's
            workload) at the read server, which opens a hard-linked copy of the loaded RocksDB
            directory (SST files are immutable), then `repeats` runs at the rate that passed.
    latency (pass 2, once both PUT ceilings are known) `repeats` runs at one PUT rate, the
            same for both cases (chain_report.common_put_rate), for p50 and p99.

Every measured run starts once a short run at SETTLE_RATE is answered in full (the seconds that
took are kept in the run's `extra.settle_s_before`): an overloaded head works off its backlog for
many seconds, and the loss rule assumes runs that do not inherit each other's load.

No cache node runs: on a bare link there is no switch to send a GET to a cache node or a db
node by its rules. A cache node's hits never reach a db node at any replication factor, and
the cache_node case measures them."""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from exo_common.config import check_resolved, parse_config, resolve
from exo_topo.configgen import emulation_config_dict
from exo_topo.tls_setup import issue_certificates

from .cases import Plan, Runner
from .loadgen import Loadgen, Target
from .net import stub_netns, veth_link
from .procs import SRV_CORE, Procs, wait_until
from .search import find_ceiling
from .servers import CLIENT_NAME, Bench, warm_page_cache

DB_NAMES = ("db0", "db1", "db2")
PARTITION_BITS = 4  # the chaos rf-3 cluster's (two Ruleset 3 rules per slot at R = 50/s)
PUT_START_RATE, GET_START_RATE = 1_000, 25_000
SETTLE_RATE = 300  # requests/s of the short run that shows a node has worked off earlier load


@dataclass
class ChainCase:
    name: str   # the key in bench_replication.json's "cases"
    rf: int
    title: str

    @property
    def chain(self) -> list[str]:
        return list(DB_NAMES[:self.rf])

    @property
    def read_server(self) -> str:
        return self.chain[-1]


CHAIN_CASES = [
    ChainCase("chain_rf1", 1, "3 db nodes, every slot's chain [db0]: no replication"),
    ChainCase("chain_rf3", 3, "3 db nodes, every slot's chain [db0, db1, db2]: head db0, tail db2"),
]


def chain_addrs() -> dict[str, tuple[str, str]]:
    """name -> (mac, ip) of the three db nodes and the client, as emulation_config_dict lays them out."""
    d = emulation_config_dict(1, len(DB_NAMES), 1, "/tmp/exo/bench")
    return {n["name"]: (n["mac"], n["ip"]) for n in (*d["db_nodes"], *d["clients"])}


def resolved_with_chain(cfg, chain: list[str]) -> dict:
    """cfg's resolved JSON with every slot's chain set to `chain` (and its head as the owner),
    held to the same checks resolve() holds its own output to."""
    out = resolve(cfg)
    slots = 1 << cfg.switch.partition_bits
    out["partitions"] = [chain[0]] * slots
    out["chains"] = [{"nodes": list(chain)} for _ in range(slots)]
    check_resolved(out)
    return out


def clone_rocksdb(src: Path, dst: Path) -> None:
    """A RocksDB directory another node may open and write: SST files hard-linked (RocksDB never
    changes one in place), every other file (MANIFEST, CURRENT, OPTIONS, the WAL) copied."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file():
            (dst / f.name).hardlink_to(f) if f.suffix == ".sst" else shutil.copy2(f, dst / f.name)


class ChainRunner(Runner):
    """The chain cases' passes; reuses the node cases' readiness probe, run log and drop counts."""

    def __init__(self, bench: Bench, plan: Plan, out_dir: Path, progress: Callable[[str], None], repeats: int):
        super().__init__(bench, plan, out_dir, progress)
        self.addrs = chain_addrs()
        self.repeats = repeats

    def _write_config(self, case: ChainCase, tag: str, ifaces: dict[str, str], data: dict[str, Path],
                      gen_iface: str):
        run = self.b.run_dir / tag
        d = emulation_config_dict(
            1, len(DB_NAMES), 1, run, 100,
            switch=dict(partition_bits=PARTITION_BITS), replication=dict(factor=case.rf),
            cache_fill=dict(enabled=False),
            controller=dict(grpc=f"unix:{run}/no-controller.sock", heartbeat_interval_ms=60_000))
        for db in d["db_nodes"]:
            db.update(iface=ifaces[db["name"]], data_dir=str(data[db["name"]]), threads=1, sync_writes=False)
            db["metrics"] = ""  # no management network in the bench's namespaces
        d["cache_nodes"][0]["metrics"] = d["controller"]["metrics"] = ""
        d["clients"][0].update(iface=gen_iface)
        cfg = parse_config(d, "<bench chain>")
        issue_certificates(cfg)  # the nodes' mutual TLS, also on the Replicate RPC
        path = run / "cluster.json"
        path.write_text(json.dumps(resolved_with_chain(cfg, case.chain), indent=1) + "\n")
        return path, cfg

    @contextmanager
    def _cluster(self, case: ChainCase, phase: str) -> Iterator[tuple]:
        """The three db nodes up, the veth to db0 (phase "put") or to the read server ("get");
        yields (loadgen, target, link, node pids)."""
        tag = f"{case.name[-3:]}{phase[0]}"
        server = "db0" if phase == "put" else case.read_server
        gmac, gip = self.addrs[CLIENT_NAME]
        smac, sip = self.addrs[server]
        data_root = self.b.run_dir / tag / "data"
        subprocess.run(["rm", "-rf", str(data_root)], check=True)
        data = {n: data_root / n for n in DB_NAMES}
        for p in data.values():
            p.mkdir(parents=True)
        if phase == "get":
            clone_rocksdb(self.b.db_dir, data[server])
        with veth_link(tag, gmac, gip, smac, sip) as link, ExitStack() as stubs:
            ends = {server: link.srv}
            for n in DB_NAMES:
                if n != server:
                    ends[n] = stubs.enter_context(stub_netns(tag, n, *self.addrs[n]))
            cfg_path, cfg = self._write_config(case, tag, {n: e.iface for n, e in ends.items()}, data, link.gen.iface)
            with Procs(self.runs_dir / f"logs-{case.name}-{phase}") as procs:
                pids = self._start_nodes(procs, tag, ends, cfg_path, cfg)
                if case.rf > 1:
                    push_chain_table(cfg, case.chain)
                lg = Loadgen(self.b.build / "emulator/exo-loadgen", cfg_path, CLIENT_NAME, link.gen, self.runs_dir,
                             self.plan.run_s, self.plan.drain_ms, value_size=self.b.value_size,
                             get_ratio=0.0 if phase == "put" else 1.0)
                target = Target("exo", keys=self.b.db_keys)
                self._wait_answering(lg, target, f"{case.name}-{phase}")
                yield lg, target, link, pids

    def _start_nodes(self, procs: Procs, tag: str, ends: dict, cfg_path: Path, cfg) -> dict[str, int]:
        from exo_topo.grpc_clients import Stubs
        started = {n: procs.start(f"{tag}-{n}", ends[n].netns, SRV_CORE,
                                  [str(self.b.build / "db-node/exo-db-node"), "--cluster", str(cfg_path), "--name", n])
                   for n in DB_NAMES}
        stubs = Stubs(cfg)
        try:
            for n, p in started.items():
                wait_until(lambda n=n: stubs.stats(n, timeout=1) is not None, f"db node {n}",
                           alive=lambda n=n, p=p: procs.check_alive(f"{tag}-{n}", p), timeout=120)
        finally:
            stubs.close()
        return {n: p.pid for n, p in started.items()}

    def _settled(self, lg: Loadgen, target: Target, label: str, timeout: float = 120.0) -> float:
        """Seconds until a short run at SETTLE_RATE is answered in full: a chain's head that was
        overloaded keeps working off (and retrying) the writes it was sent for many seconds, and
        a run started meanwhile would measure that backlog, not its own rate. Every run of the
        chain cases, both factors, starts settled, so the runs are independent as the loss rule
        assumes."""
        run_s, lg.duration_s = lg.duration_s, 0.3
        t0 = time.monotonic()
        try:
            while True:
                r = lg.run(target, SETTLE_RATE, label + "-settle")
                if r.loss == 0 and r.errors == 0:
                    return round(time.monotonic() - t0, 2)
                if time.monotonic() - t0 > timeout:
                    raise TimeoutError(f"{label}: not answering in full {timeout:.0f} s after the last run")
                time.sleep(0.5)
        finally:
            lg.duration_s = run_s

    def _settled_run(self, lg: Loadgen, target: Target, rate: float, label: str, link):
        settle_s = self._settled(lg, target, label)
        r = self._run_counting_drops(lg, target, rate, label, link)
        r.extra["settle_s_before"] = settle_s
        return r

    def _ceiling_with_spread(self, case: ChainCase, phase: str, lg, target, link) -> dict:
        label = f"{case.name}-{phase}"
        start = PUT_START_RATE if phase == "put" else GET_START_RATE
        warm = lg.run(target, start, label + "-warmup")
        c = find_ceiling(lambda rate: self._settled_run(lg, target, rate, label, link), start,
                         self.plan.max_rate, max_runs=self.plan.max_runs,
                         progress=lambda r: self._log_run(label, r))
        repeats = []
        rate = c.bracket.get("pass")
        if rate:
            for _ in range(self.repeats):
                r = self._settled_run(lg, target, rate, label + "-repeat", link)
                self._log_run(label + " repeat", r)
                repeats.append(r)
        passing = [r for r in c.runs if r.passes()]
        best = max(passing, key=lambda r: r.answered_rps, default=None)
        return {"ceiling": c.as_dict(), "warmup": warm.as_dict(), "repeats": [r.as_dict() for r in repeats],
                "per_second": per_second_answered(best.extra["file"]) if best else []}

    # ---- pass 1: both ceilings of one case
    def ceilings(self, case: ChainCase) -> dict:
        out: dict = {"title": case.title, "rf": case.rf, "chain": case.chain, "read_server": case.read_server}
        for phase in ("put", "get"):
            self.say(f"{case.name}: {phase} phase ({'head db0' if phase == 'put' else 'read server ' + case.read_server}"
                     " on the veth)")
            if phase == "get":
                out["page_cache_warmed"] = warm_page_cache(self.b.db_dir)
            with self._cluster(case, phase) as (lg, target, link, pids):
                out[phase] = self._ceiling_with_spread(case, phase, lg, target, link)
                out[phase]["pids"] = pids
        return out

    # ---- pass 2: PUT latency at one rate for both cases
    def put_latency(self, case: ChainCase, rate: float) -> dict:
        self.say(f"{case.name}: PUT latency at {rate:,.0f}/s, {self.repeats} runs")
        with self._cluster(case, "put") as (lg, target, link, _):
            lg.run(target, rate, case.name + "-latency-warmup")
            lg.duration_s = self.plan.latency_s
            runs = []
            for _ in range(self.repeats):
                settle_s = self._settled(lg, target, case.name + "-put-latency")
                r = lg.run(target, rate, case.name + "-put-latency")
                r.extra["settle_s_before"] = settle_s
                self._log_run(case.name + " latency", r)
                runs.append(r.as_dict())
        return {"rate": rate, "runs": runs}


def push_chain_table(cfg, chain: list[str], version: int = 1, timeout: float = 5.0) -> None:
    """What the controller does for a new cluster at rf > 1 (a node takes no chain role until a
    table naming its incarnation is pushed: docs/design/replication.md, 4.1): every slot's chain
    `chain`, read at its last node, pushed with DbNode.SetChains to every db node, as the
    controller (its certificate). Raises naming the node that refused."""
    from exo_topo.grpc_clients import Stubs
    from exoproto import control_pb2 as pb

    stubs = Stubs(cfg, identity="controller")
    try:
        incs = {n: stubs.db(n).ChainStatus(pb.StatsRequest(), timeout=timeout).incarnation for n in DB_NAMES}
        slots = [pb.SlotChain(nodes=chain, read_server=chain[-1]) for _ in range(1 << cfg.switch.partition_bits)]
        table = pb.ChainTableMsg(version=version, slots=slots,
                                 members=[pb.NodeIncarnation(node=n, incarnation=i) for n, i in sorted(incs.items())])
        for n, inc in incs.items():
            got = stubs.db(n).SetChains(pb.SetChainsRequest(table=table, incarnation=inc), timeout=timeout).version
            if got != version:
                raise RuntimeError(f"{n}: acts on chain table version {got} after the push of {version}")
    finally:
        stubs.close()


def per_second_answered(path: str) -> list[float]:
    """Answered requests in each full second of a generator run (its JSON's `seconds`)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return []
    return [float(s["answered"]) for s in doc.get("seconds", []) if s.get("sent", 0) > 0]


def repeats_for(smoke: bool) -> int:
    return 2 if smoke else 3

