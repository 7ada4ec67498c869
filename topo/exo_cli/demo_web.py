"""`exo demo-web` (`make demo-web`): a real web app cached by the cluster (docs/web-demo.md).

In a Mininet cluster, one client host runs exo-proxy (root: it needs CAP_NET_RAW) and the
catalogue app (examples/webapp: FastAPI under uvicorn, several workers) as an unprivileged user
reaching the proxy through its unix socket (group = the user's group, mode 0660). wrk drives the
app from the same host with Zipf-popular item URLs, in segments:

  warm-up   pages read through: misses load from SQLite and write to the cluster; db nodes
            REPORT the hot items and the cache nodes fill themselves
  before    steady state
  kill      the same load; `kill_at` seconds in, the cache node that answered the most GETs in
            "before" is SIGKILLed; the controller withdraws its rules, its keys go to db nodes

Prints a table, writes results/demo_web.json (headline fields: demo_web_report.py), and exits
non-zero when any HTTP request failed. Everything started is stopped in `finally` blocks, also
on Ctrl-C.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from rich.console import Console
from rich.table import Table

from exo_common.config import ClusterConfig, load_config
from exo_topo.cluster import EmulatedCluster
from exo_topo.configgen import emulation_config
from exo_topo.process import terminate

from . import demo_web_host as web
from .demo_web_report import headline, numeric_delta, segment_figures, unprivileged
from .demo_web_wrk import Load, run_segment

console = Console()
MEASURED = ("before", "kill")


@dataclass
class WebDemo:
    run_dir: Path = Path("/tmp/exo/demo-web")
    out: Path = Path("results/demo_web.json")
    config: Optional[Path] = None   # default: 2 cache nodes, 2 db nodes, 1 client host
    openflow_port: int = 6676       # for the generated config
    items: int = 10_000
    alpha: float = 0.99
    workers: int = 4
    user: str = "exoweb"
    port: int = 8000
    threads: int = 2
    connections: int = 16
    wrk_timeout_s: float = 5.0
    warmup_s: float = 20.0
    before_s: float = 10.0
    kill_s: float = 15.0
    kill_at_s: float = 5.0
    kill: bool = True
    proxy_timeout_ms: int = 250
    proxy_retries: int = 4
    fault_item: Optional[int] = None  # test switch: the app answers 500 for /item/<this>

    def check(self) -> None:
        for name, lo in (("items", 1), ("workers", 1), ("threads", 1), ("connections", 1), ("port", 1)):
            if getattr(self, name) < lo:
                raise ValueError(f"--{name.replace('_', '-')}: must be at least {lo} (got {getattr(self, name)})")
        if self.connections < self.threads:
            raise ValueError(f"--connections: must be at least --threads ({self.threads}), as wrk requires")
        for name in ("warmup_s", "before_s", "kill_s"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name[:-2]}: must be at least 1 s (got {getattr(self, name)})")
        if self.kill and not 0 < self.kill_at_s < self.kill_s:
            raise ValueError(f"--kill-at: must be inside the kill segment, 0 < kill-at < {self.kill_s:g} "
                             f"(got {self.kill_at_s:g})")
        if not 0 < self.alpha < 5:
            raise ValueError(f"--alpha: must be in (0, 5) (got {self.alpha})")


def cluster_config(d: WebDemo) -> ClusterConfig:
    if d.config is not None:
        cfg = load_config(d.config)
        if not cfg.clients or not cfg.cache_nodes:
            raise ValueError(f"--config {d.config}: the web demo needs a client host and a cache node")
        return cfg
    # A bridge name of its own, so that this run never touches another cluster's switch.
    return emulation_config(n_cache=2, n_db=2, n_clients=1, run_dir=d.run_dir,
                            controller={"openflow_port": d.openflow_port},
                            switch={"bridge": f"exo-w{d.openflow_port}"})


def _alive_node_stats(cl: EmulatedCluster, dead: set[str]) -> dict[str, dict[str, int]]:
    return {n.name: cl.stubs.stats(n.name) for n in [*cl.cfg.cache_nodes, *cl.cfg.db_nodes] if n.name not in dead}


def _served_by(after: dict, before: dict, cfg: ClusterConfig) -> dict[str, int]:
    """Requests each node answered during a segment (cache nodes: GETs from memory)."""
    caches = {c.name for c in cfg.cache_nodes}
    return {n: after[n].get("hits" if n in caches else "requests_served", 0)
            - before.get(n, {}).get("hits" if n in caches else "requests_served", 0) for n in after}


def _wait_until(check, timeout: float, step: float = 0.05) -> Optional[float]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if check():
                return time.monotonic() - t0
        except Exception:  # an RPC refused for a moment: ask again
            pass
        time.sleep(step)
    return None


def run_demo_web(d: WebDemo) -> dict:
    d.check()
    web.check_prerequisites()
    pw = web.ensure_user(d.user)
    cfg = cluster_config(d)
    host = cfg.clients[0].name
    for node in cfg.db_nodes:  # a fresh store every run: the first reads of an item miss
        shutil.rmtree(node.data_dir, ignore_errors=True)
    d.run_dir.mkdir(parents=True, exist_ok=True)
    paths = web.stage(d.run_dir / "web", d.items)
    sock = d.run_dir / "web" / "exo-proxy.sock"
    wrk_log = d.run_dir / "wrk.log"
    wrk_log.unlink(missing_ok=True)
    console.print(f"[bold]Exoskeleton web demo[/]: {len(cfg.cache_nodes)} cache nodes, {len(cfg.db_nodes)} db "
                  f"nodes; the catalogue ({d.items:,} items) on {host} as user {d.user} (uid {pw.pw_uid}), "
                  f"{d.workers} uvicorn workers; logs in {d.run_dir}")
    proxy_args = ["--unix-group", d.user, "--unix-mode", "0660", "--timeout-ms", str(d.proxy_timeout_ms),
                  "--retries", str(d.proxy_retries)]
    app_env = {"EXO_WEB_PROXY": str(sock), "EXO_WEB_DB": str(paths["db"]), "EXO_WEB_MTU": str(cfg.cluster.mtu),
               "EXO_WEB_TIMEOUT_MS": str(d.proxy_timeout_ms), "EXO_WEB_RETRIES": str(d.proxy_retries)}
    if d.fault_item is not None:
        app_env["EXO_WEB_FAULT_ITEM"] = str(d.fault_item)
    load = Load(url=f"http://127.0.0.1:{d.port}", lua=paths["lua"], items=d.items, alpha=d.alpha,
                threads=d.threads, connections=d.connections, timeout_s=d.wrk_timeout_s)
    from exo_proxy import rig  # experiments/exo_proxy: starts exo-proxy in a host, waits for it

    t0 = time.monotonic()
    segments: dict[str, dict] = {}
    dead: set[str] = set()
    kill_info: Optional[dict] = None
    with EmulatedCluster(cfg, d.run_dir, config_path=d.config) as cl:
        console.print(f"cluster up in {time.monotonic() - t0:.1f} s")
        with rig.proxy(cl, host, unix_path=sock, extra_args=proxy_args) as proxy_proc:
            socket_info = web.socket_file(sock)
            app_log = d.run_dir / "web-app.log"
            app = cl.popen_in(host, web.app_command(d.user, paths, app_env, d.port, d.workers), "web-app")
            procs: list[dict] = []
            try:
                health = web.wait_healthy(app, cl.host(host).pid, d.port, d.workers, app_log)
                workers = sorted(h["pid"] for h in health)  # the processes that answer requests
                # the uvicorn master, the workers and multiprocessing's resource tracker
                procs = [{**web.identity(p), "role": "master" if p == app.pid else
                          "worker" if p in workers else "helper"} for p in [app.pid, *web.children(app.pid)]]
                if not all(unprivileged(p) for p in procs):
                    raise web.WebHostError(f"a web process is privileged: {procs}")
                console.print(f"web app up: uvicorn pid {app.pid}, workers {workers}, user {procs[-1]['user']}, "
                              f"CapEff {procs[-1]['CapEff']:016x}; exo-proxy socket {socket_info}")

                # Where the CPU goes (the machine's cores are shared by every process here).
                cpu_of = {**{n: [p.pid] for n, p in cl.node_procs.items()},
                          "controller": [cl.controller_proc.pid], "exo-proxy": [proxy_proc.pid],
                          "web workers": workers, **_ovs_pids()}

                def segment(name: str, seconds: float, seed: int, **kw) -> dict:
                    p0, n0 = web.proxy_stats(sock), _alive_node_stats(cl, dead)
                    c0 = {n: web.cpu_seconds(pids) for n, pids in cpu_of.items()}
                    console.print(f"[bold]{name}[/]: wrk for {seconds:g} s ...")
                    seg = run_segment(cl, host, load, seconds, seed, wrk_log, **kw)
                    seg["proxy_delta"] = numeric_delta(web.proxy_stats(sock), p0)
                    seg["served_by"] = _served_by(_alive_node_stats(cl, dead), n0, cfg)
                    c1 = {n: web.cpu_seconds(pids) for n, pids in cpu_of.items()}
                    seg["cpu_s"] = {n: round(c1[n] - c0[n], 2) for n in cpu_of
                                    if c0[n] is not None and c1[n] is not None}
                    seg["started_s"] = seg.pop("started") - t0
                    f = segment_figures(seg["wrk"], seg["proxy_delta"])
                    seg["figures"] = f
                    console.print(f"  {f['http_requests']:,} requests, {f['http_errors']} errors, "
                                  f"{f['requests_per_s']:,.0f} req/s, p99 {f['p99_ms']} ms, "
                                  f"{100 * f['cache_share']:.1f}% of the app's GETs from cache nodes")
                    segments[name] = seg
                    return seg

                segment("warmup", d.warmup_s, 1)
                cached = {c.name: len(cl.stubs.cached_keys(c.name)) for c in cfg.cache_nodes}
                console.print(f"  keys cached after warm-up: {cached}")
                before = segment("before", d.before_s, 2)
                victim = max(cfg.cache_nodes, key=lambda c: before["served_by"].get(c.name, 0)).name

                def kill() -> dict:
                    stats = cl.stubs.controller_stats
                    w0 = stats().get("cache_node_withdrawals", 0)
                    keys = len(cl.stubs.cached_keys(victim))
                    cl.kill_node(victim)  # SIGKILL
                    dead.add(victim)
                    withdrawn = _wait_until(lambda: stats().get("cache_node_withdrawals", 0) > w0, timeout=10)
                    console.print(f"  killed {victim} (it held {keys} keys); controller withdrew its rules "
                                  f"after {withdrawn if withdrawn is None else round(withdrawn, 2)} s")
                    return {"node": victim, "cached_keys": keys, "withdrawn_after_s": withdrawn}

                if d.kill:
                    seg = segment("kill", d.kill_s, 3, action_at=d.kill_at_s, action=kill)
                    kill_info = {**seg.pop("action"), "at_s_into_segment": seg.pop("action_at_s"),
                                 "window_s": {"before_kill": d.kill_at_s, "after_kill": d.kill_s - d.kill_at_s}}
                proxy_final = web.proxy_stats(sock)
                cached_end = {c.name: len(cl.stubs.cached_keys(c.name)) for c in cfg.cache_nodes if c.name not in dead}
            finally:
                terminate(app, "web app")
                for p in procs:  # spawned workers outlive a master that was killed hard
                    if p["role"] != "master":
                        _kill_if_owned(p["pid"], pw.pw_uid)
            proxy_identity = None if proxy_proc.poll() is not None else web.identity(proxy_proc.pid)

    measured = [n for n in MEASURED if n in segments]
    summary = {
        **headline(segments, measured),
        "http_errors_during_cache_kill": segments["kill"]["figures"]["http_errors"] if "kill" in segments else None,
        "measured_segments": measured,
        "warmup_http_errors": segments["warmup"]["figures"]["http_errors"],
        "segments": {n: {**s["figures"], "started_s": round(s["started_s"], 2), "served_by": s["served_by"],
                         "proxy_delta": s["proxy_delta"], "cpu_s": s["cpu_s"], "wrk_command": " ".join(s["command"]),
                         "wrk_summary": s["wrk_text"],
                         "wrk": {k: v for k, v in s["wrk"].items() if k != "histogram_us"}}
                     for n, s in segments.items()},
        "kill": kill_info,
        "cached_keys_after_warmup": cached,
        "cached_keys_at_end": cached_end,
        "web": {"user": d.user, "uid": pw.pw_uid, "gid": pw.pw_gid, "workers": d.workers,
                "worker_pids": workers, "healthz": health,
                "processes": procs, "worker_cap_eff": [f"{p['CapEff']:016x}" for p in procs if p["role"] == "worker"],
                "unprivileged": all(unprivileged(p) for p in procs),
                "server": "catalogue_web.serve (uvicorn workers), /usr/bin/python3", "fault_item": d.fault_item},
        "proxy": {"socket": socket_info, "args": proxy_args, "process": proxy_identity, "stats_at_end": proxy_final},
        "load": {"tool": _wrk_version(), "threads": d.threads, "connections": d.connections,
                 "timeout_s": d.wrk_timeout_s, "items": d.items, "alpha": d.alpha, "urls": "/item/<1..items>",
                 "retries": 0},
        "cluster": {"cache_nodes": [c.name for c in cfg.cache_nodes], "db_nodes": [n.name for n in cfg.db_nodes],
                    "host": host, "config": str(d.config) if d.config else "generated (2 cache, 2 db, 1 client)"},
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(d).items()},
    }
    d.out.parent.mkdir(parents=True, exist_ok=True)
    d.out.write_text(json.dumps(summary, indent=1) + "\n")
    print_summary(summary, d.out)
    return summary


def _ovs_pids() -> dict[str, list[int]]:
    """The switch's userspace datapath (ovs-vswitchd), if it runs."""
    proc = subprocess.run(["pgrep", "-x", "ovs-vswitchd"], capture_output=True, text=True)
    pids = [int(p) for p in proc.stdout.split()]
    return {"ovs-vswitchd": pids} if pids else {}


def _kill_if_owned(pid: int, uid: int) -> None:
    """SIGKILL a process of the web user still running after its master stopped (never a pid
    that has been reused by someone else's process)."""
    try:
        if web.identity(pid)["Uid"][0] == uid:
            os.kill(pid, signal.SIGKILL)
    except (OSError, KeyError):  # gone already
        pass


def _wrk_version() -> str:
    proc = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
    return (proc.stdout + proc.stderr).splitlines()[0].strip() if (proc.stdout + proc.stderr) else "wrk"


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.1f}"


def print_summary(s: dict, out: Path) -> None:
    t = Table(title="Exoskeleton web demo: catalogue pages read through the cluster", show_header=True)
    t.add_column("segment")
    for col in ("s", "requests", "failed", "req/s", "p50 ms", "p99 ms", "cache share"):
        t.add_column(col, justify="right")
    for name, seg in s["segments"].items():
        t.add_row(name, f"{seg['duration_s']:.0f}", f"{seg['http_requests']:,}", f"{seg['http_errors']}",
                  f"{seg['requests_per_s']:,.0f}", _ms(seg["p50_ms"]), _ms(seg["p99_ms"]),
                  f"{100 * seg['cache_share']:.1f}%")
    t.add_row(f"[bold]{'+'.join(s['measured_segments'])}", "", f"[bold]{s['http_requests']:,}",
              f"[bold]{s['http_errors']}", f"[bold]{s['requests_per_s']:,.0f}", f"[bold]{_ms(s['p50_ms'])}",
              f"[bold]{_ms(s['p99_ms'])}", f"[bold]{100 * s['cache_share']:.1f}%")
    console.print(t)
    console.print("cache share: of the GETs the app sent through exo-proxy, those a cache node answered")
    for name in ("before", "kill"):
        if name in s["segments"]:
            seg = s["segments"][name]
            use = sorted(seg["cpu_s"].items(), key=lambda kv: -kv[1])
            console.print(f"CPU during {name} (cores busy; wrk not counted): "
                          + ", ".join(f"{n} {v / seg['duration_s']:.2f}" for n, v in use))
    w = s["web"]
    console.print(f"web: {w['workers']} uvicorn workers as {w['user']} (uid {w['uid']}), CapEff "
                  f"{', '.join(sorted(set(w['worker_cap_eff'])))}; exo-proxy socket mode "
                  f"{s['proxy']['socket']['mode'][2:]}, group {s['proxy']['socket']['group']}")
    if s["kill"]:
        k = s["kill"]
        withdrawn = "never" if k["withdrawn_after_s"] is None else f"after {k['withdrawn_after_s']:.2f} s"
        resent = s["segments"]["kill"]["proxy_delta"].get("cluster_resent", 0)
        console.print(f"kill: SIGKILL {k['node']} ({k['cached_keys']} keys cached) {k['at_s_into_segment']:.1f} s "
                      f"into the kill segment; its rules withdrawn {withdrawn}; exo-proxy resent {resent} "
                      f"requests; failed HTTP requests in the segment: {s['http_errors_during_cache_kill']}")
    failed = s["http_errors"] + s["warmup_http_errors"]
    console.print("[green]no HTTP request failed" if failed == 0 else
                  f"[red]{failed} HTTP requests failed (warm-up {s['warmup_http_errors']}, "
                  f"measured {s['http_errors']})")
    console.print(f"wrote {out}")
