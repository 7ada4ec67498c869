"""The cases of one bench run, in order, and the two passes over them: first each server's
ceiling (search.py's loss rule) with perf evidence at 0.9 x that ceiling, then every server at
one common offered rate (half the lowest node ceiling) for latency. Each case builds its own
link and processes and removes them before the next starts. Every case is driven by exo-loadgen
except the proxy, which speaks memcached over TCP and is driven by exo-mcload (mcload.py); its
latency pass also runs exo-loadgen straight at the same cache node, for the latency it adds."""
from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from . import evidence, ovs_rules
from .loadgen import Loadgen, Target
from .mcload import McLoad
from .net import veth_link
from .procs import GEN_CORE, SRV_CORE, Procs, pinned
from .search import Ceiling, Run, find_ceiling
from .servers import (CACHE_NAME, CLIENT_NAME, DB_NAME, PROXY_CACHE_PLACEMENT, Bench, node_addrs, proxy_stats,
                      start_cache_node, start_db_node, start_memcached, start_miss_reflector, start_proxy,
                      start_reflector, warm_page_cache, write_config)


@dataclass
class Case:
    name: str                 # the key in bench_dataplane.json's "cases"
    title: str
    start: Callable           # servers.start_*
    server_node: str          # whose MAC/IP the server end of the link takes
    start_rate: float         # where the bracketing starts
    ovs: Optional[str] = None  # None: bare veth; "forward" / "exo" / "thesis": ovs_rules layouts
    evidence: bool = True
    generator: str = "exo-loadgen"  # or "exo-mcload" (memcached over TCP: the proxy)
    placement: dict = field(default_factory=dict)  # write_config's cache_core / idle_sleep_us


CASES = [
    Case("raw", "raw I/O ceiling (dpdk-testpmd macswap, af_packet vdev)", start_reflector, CACHE_NAME, 50_000),
    Case("cache_node", "cache node (GET hits, 1 lcore, no idle back-off)", start_cache_node, CACHE_NAME, 50_000),
    Case("memcached", "memcached 1.6 (1 worker thread, UDP)", start_memcached, CACHE_NAME, 25_000),
    Case("db_node", "db node (RocksDB, 1 packet thread)", start_db_node, DB_NAME, 25_000),
    # The proxy takes the server core; the cache node behind it shares the generator's core.
    Case("proxy", "exo-proxy (memcached TCP, many connections) in front of the cache node", start_proxy,
         CACHE_NAME, 25_000, generator="exo-mcload", placement=PROXY_CACHE_PLACEMENT),
    Case("ovs_forward", "Open vSwitch forwarding ceiling (reflector behind it)", start_reflector, CACHE_NAME,
         25_000, ovs="forward", evidence=False),
    Case("ovs_cache_node", "hot GETs through Open vSwitch (cluster rules) to the cache node",
         start_cache_node, CACHE_NAME, 25_000, ovs="exo", evidence=False),
    # GETs over 10^8 keys, nearly all missing Ruleset 2, reflected: what OVS's slow path costs
    # under each rule layout (docs/switch-rules.md, "Why this layout").
    Case("ovs_miss", "GETs that miss, 10^8 keys, through Open vSwitch (cluster rules) to a reflector",
         start_miss_reflector, CACHE_NAME, 25_000, ovs="exo", evidence=False),
    Case("ovs_miss_thesis", "the same with the thesis's rule layout (exact-MAC Ruleset 2 on top)",
         start_miss_reflector, CACHE_NAME, 10_000, ovs="thesis", evidence=False),
]
NODE_CASES = ("raw", "cache_node", "memcached", "db_node")  # their lowest ceiling sets the common rate


@dataclass
class Plan:
    run_s: float = 3.0
    drain_ms: int = 300
    max_runs: int = 12  # a failing rate costs two runs (search.py)
    max_rate: float = 2_000_000
    latency_s: float = 5.0
    client_s: float = 3.0
    proxy_connections: int = 128  # exo-mcload's connections to the proxy
    proxy_depth: int = 1          # requests in flight per connection (1: a web worker's blocking get)
    proxy_max_wait_ms: int = 50   # the generator's bounded queue (mcload.py)
    only: Optional[set[str]] = None


class Runner:
    def __init__(self, bench: Bench, plan: Plan, out_dir: Path, progress: Callable[[str], None]):
        self.b, self.plan, self.out, self.say = bench, plan, out_dir, progress
        self.runs_dir = out_dir / "bench-runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.addrs = node_addrs()

    def _link(self, case: Case, tag: str):
        gmac, gip = self.addrs[CLIENT_NAME]
        smac, sip = self.addrs[case.server_node]
        return veth_link(tag, gmac, gip, smac, sip, via_ovs=case.ovs is not None)

    def _setup(self, case: Case, link, procs: Procs, tag: str):
        cfg_path, cfg = write_config(self.b, link, tag, **case.placement)
        target, info = case.start(self.b, link, procs, tag, cfg_path, cfg)
        if case.ovs == "forward":
            info["rules"] = ovs_rules.load_forward(link.bridge)
        elif case.ovs in ovs_rules.LAYOUTS:
            info["rules"] = ovs_rules.load_cluster(link.bridge, self.addrs[CLIENT_NAME][0],
                                                   self.addrs[CACHE_NAME][0], self.b.hot_keys, case.ovs)
            info["layout"] = case.ovs
        if case.generator == "exo-mcload":
            lg = McLoad(self.b.build / "emulator/exo-mcload", link.gen.netns, self.runs_dir,
                        connections=self.plan.proxy_connections, depth=self.plan.proxy_depth,
                        max_wait_ms=self.plan.proxy_max_wait_ms,
                        duration_s=self.plan.run_s, drain_ms=self.plan.drain_ms, value_size=self.b.value_size)
        else:
            lg = self._loadgen(cfg_path, link)
        self._wait_answering(lg, target, case.name)
        return target, info, lg, cfg_path

    def _loadgen(self, cfg_path: Path, link) -> Loadgen:
        return Loadgen(self.b.build / "emulator/exo-loadgen", cfg_path, CLIENT_NAME, link.gen,
                       self.runs_dir, self.plan.run_s, self.plan.drain_ms, value_size=self.b.value_size)

    def _wait_answering(self, lg: Loadgen, target: Target, name: str, timeout: float = 30.0) -> None:
        """The same readiness rule for every server: a short low-rate run must be answered in
        full. It also warms the path up before the first measured run."""
        run_s, lg.duration_s = lg.duration_s, 0.3
        try:
            deadline = time.monotonic() + timeout
            while True:
                r = lg.run(target, 2000, name + "-probe")
                if r.extra["answered"] > 0 and r.loss == 0:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name}: the server does not answer (probe: loss {r.loss:.1%})")
                time.sleep(0.5)
        finally:
            lg.duration_s = run_s

    def _log_run(self, name: str, r: Run) -> None:
        verdict = "pass" if r.passes() else ("generator-limited" if r.generator_limited else "fail")
        self.say(f"{name}: offered {r.offered_rps:,.0f}/s (asked {r.rate:,.0f}) -> answered "
                 f"{r.answered_rps:,.0f}/s, loss {r.loss:.2%}, p99 {_us(r.p99_us)} [{verdict}]")

    # ---- pass 1
    def ceiling(self, case: Case) -> dict:
        tag = case.name[:2] + "c"
        self.say(f"{case.name}: setting up ({case.title})")
        with self._link(case, tag) as link, Procs(self.runs_dir / f"logs-{case.name}") as procs:
            target, info, lg, _ = self._setup(case, link, procs, tag)
            # The same warm-up for every server before its first measured run: one run at the
            # start rate, kept in the JSON but not used (page cache, block cache, OVS flows).
            warm = lg.run(target, case.start_rate, case.name + "-warmup")
            lookups0 = ovs_rules.datapath_lookups() if case.ovs else None
            c = find_ceiling(lambda rate: self._run_counting_drops(lg, target, rate, case.name, link),
                             case.start_rate,
                             self.plan.max_rate, max_runs=self.plan.max_runs,
                             progress=lambda r: self._log_run(case.name, r))
            doc = {"title": case.title, "ceiling": c.as_dict(), "server": info, "warmup": warm.as_dict()}
            if case.ovs and lookups0 is not None:
                doc["ovs"] = self._ovs_figures(c, lookups0)
            if case.generator == "exo-mcload":
                doc["generator"] = {"program": "exo-mcload", "connections": lg.connections, "depth": lg.depth,
                                    "max_wait_ms": lg.max_wait_ms}
            if case.evidence and c.rps and info.get("pid"):
                rate = 0.9 * c.rps
                self.say(f"{case.name}: perf evidence at {rate:,.0f}/s")
                others = {"cache_node": info["cache_node"]["pid"]} if "cache_node" in info else None
                self._last_evidence_run = None
                doc["evidence"] = evidence.measure(info["pid"], self.plan.run_s,
                                                   lambda: self._evidence_run(lg, target, rate, case.name),
                                                   self.runs_dir, case.name, others=others)
                if self._last_evidence_run is not None and "cpu_user_s" in self._last_evidence_run.extra:
                    doc["evidence"]["generator_run"] = self._last_evidence_run.as_dict()
            if case.name == "proxy":
                doc["proxy_stats"] = proxy_stats(link.gen.netns)
            if case.name == "cache_node" and "client" in (self.plan.only or {"client"}):
                doc["client"] = self.client_bench(link)
        return doc

    _last_evidence_run: Optional[Run] = None

    def _evidence_run(self, lg, target: Target, rate: float, name: str) -> Run:
        self._last_evidence_run = lg.run(target, rate, name + "-perf")
        return self._last_evidence_run

    def _run_counting_drops(self, lg, target: Target, rate: float, name: str, link) -> Run:
        """One run, with the frames the server's sockets dropped during it (None: unknown); for
        the proxy also its own (UDP) socket's, in the generator's namespace."""
        sides = {"server_socket_drops": link.srv.netns}
        if isinstance(lg, McLoad):
            sides["proxy_socket_drops"] = link.gen.netns
        before = {k: evidence.socket_drops(ns) for k, ns in sides.items()}
        r = lg.run(target, rate, name)
        for k, ns in sides.items():
            after = evidence.socket_drops(ns)
            r.extra[k] = None if before[k] is None or after is None else after - before[k]
        return r

    def _ovs_figures(self, c: Ceiling, before: dict) -> dict:
        """Upcalls per request over the whole search, and the datapath flows it left."""
        after = ovs_rules.datapath_lookups()
        sent = sum(r.extra.get("sent", 0) for r in c.runs)
        missed = after["missed"] - before["missed"]
        return {"requests_sent": sent, "datapath_missed": missed, "datapath_hit": after["hit"] - before["hit"],
                "datapath_lost": after["lost"] - before["lost"],
                "upcalls_per_request": round(missed / sent, 4) if sent else None,
                "datapath_flows_after": ovs_rules.datapath_flows()}

    # ---- pass 2
    def latency(self, case: Case, rate: float) -> dict:
        tag = case.name[:2] + "l"
        self.say(f"{case.name}: latency at {rate:,.0f}/s")
        with self._link(case, tag) as link, Procs(self.runs_dir / f"logs-{case.name}-lat") as procs:
            target, _, lg, cfg_path = self._setup(case, link, procs, tag)
            lg.run(target, rate, case.name + "-latency-warmup")
            lg.duration_s = self.plan.latency_s
            r = lg.run(target, rate, case.name + "-latency")
            self._log_run(case.name, r)
            out = {"rate": rate, **r.as_dict()}
            if case.generator == "exo-mcload":
                out["direct_same_setup"] = self._direct(cfg_path, link, target, rate, case.name)
        return out

    def _direct(self, cfg_path: Path, link, proxied: Target, rate: float, name: str) -> dict:
        """exo-loadgen straight at the cache node behind the proxy, same cache node placement
        and rate: the client the proxy is compared with. It runs on the proxy's core, so the
        cluster client sits on core 1 and the cache node on core 0 in both paths, and the only
        difference is the memcached hop (exo-mcload -> exo-proxy); the proxy idles meanwhile."""
        direct = self._loadgen(cfg_path, link)
        direct.core = SRV_CORE
        target = Target("exo", keys=proxied.keys)
        direct.run(target, rate, name + "-direct-warmup")
        direct.duration_s = self.plan.latency_s
        r = direct.run(target, rate, name + "-direct")
        self.say(f"{name}: direct exo-loadgen to the same cache node: p50 {_us(r.p50_us)}, p99 {_us(r.p99_us)}, "
                 f"loss {r.loss:.2%}")
        return {"rate": rate, "generator": "exo-loadgen", "core": direct.core, **r.as_dict()}

    # ---- the in-process baseline and the client
    def rocksdb(self, batch: int = 1) -> dict:
        """Random point reads through the node's own RocksStore (batch 1: Get, else MultiGet),
        from the same warm page cache as the db node's case (servers.warm_page_cache)."""
        warmed = warm_page_cache(self.b.db_dir)
        out = self.runs_dir / f"rocksdb-in-process-b{batch}.json"
        cmd = pinned(None, SRV_CORE, [str(self.b.build / "db-node/exo-rocksdb-bench"),
                                      "--data-dir", str(self.b.db_dir), "--keys", str(self.b.db_keys),
                                      "--duration", str(self.plan.run_s), "--warmup", "1",
                                      "--batch", str(batch), "--out", str(out)])
        self.say(f"rocksdb_in_process: random point reads, one thread, server core, batch {batch}")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=self.plan.run_s + 120)
        if r.returncode != 0:
            raise RuntimeError(f"exo-rocksdb-bench exited {r.returncode}: {r.stderr.strip()[-1500:]}")
        doc = json.loads(out.read_text())
        doc["page_cache_warmed"] = warmed
        self.say(f"rocksdb_in_process: {doc.get('gets_per_s', 0):,.0f} gets/s")
        return doc

    def client_bench(self, link) -> dict:
        """One Python process reading through exoskeleton.Client from the generator's core."""
        keys_file = self.runs_dir / "client-keys.hex"
        keys_file.write_text("".join(k.hex() + "\n" for k in self.b.hot_keys))
        out = self.runs_dir / "client-bench.json"
        py = Path(__file__).resolve().parents[2] / ".venv/bin/python"
        cmd = pinned(link.gen.netns, GEN_CORE, [str(py), "-m", "exo_harness.client_bench", "--iface", link.gen.iface,
                                                "--keys-file", str(keys_file), "--seconds", str(self.plan.client_s),
                                                "--out", str(out)])
        self.say("client: one Python process, pipelined and one-at-a-time GETs to the cache node")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=6 * self.plan.client_s + 120)
        if r.returncode != 0:
            raise RuntimeError(f"client_bench exited {r.returncode}: {r.stderr.strip()[-1500:]}")
        return json.loads(out.read_text())


def _us(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:,.0f} us"
