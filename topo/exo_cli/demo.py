"""`exo demo`: bring up the cluster of configs/demo.yaml in Mininet, load the keys, run a Zipf
GET/PUT mix against caches that start empty and fill themselves (docs/cache-fill.md), print a
summary table and write results/demo.json. Everything is torn down at the end, also on error or
Ctrl-C. `--hot N` pre-warms the caches with the N hottest keys through the Cache RPC instead."""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from exo_common.config import ClusterConfig, load_config
from exo_common.partitions import slot_of
from exo_topo.cluster import EmulatedCluster
from exo_topo.switch_audit import RuleAudit, audit_problems
from exo_topo.switch_audit import summary as audit_summary
from exo_harness.keyspace import ZipfRanks, key_name
from exoproto import control_pb2 as pb
from exoskeleton.keyhash import key_hash

from .workers import Workers

console = Console()


def hot_keys_by_cache_node(cfg: ClusterConfig, n_hot: int) -> dict[str, list[bytes]]:
    """The n hottest keys, each assigned to the cache node serving its owning db node."""
    table = cfg.partitions()
    out: dict[str, list[bytes]] = defaultdict(list)
    for rank in range(n_hot):
        key = key_name(rank)
        owner = table[slot_of(key_hash(key), cfg.switch.partition_bits)]
        out[cfg.cache_node_for_db(owner)].append(key)
    return dict(out)


def _progress_bar(label: str) -> Progress:
    return Progress(TextColumn(f"[bold]{label}"), BarColumn(), TextColumn("{task.description}"),
                    TimeElapsedColumn(), console=console, transient=False)


def _follow(workers: Workers, label: str, total: float, describe, combine=sum) -> None:
    """One progress bar for all workers; `combine` folds their progress (sum of keys loaded,
    min of seconds run)."""
    with _progress_bar(label) as bar:
        task = bar.add_task("", total=total)
        while workers.running():
            done = combine(p.get("progress", 0) for p in workers.progress.values())
            bar.update(task, completed=done, description=describe(workers.progress))
            time.sleep(0.25)
        bar.update(task, completed=total, description=describe(workers.progress))


def _delta(after: dict, before: dict) -> dict:
    return {node: {k: v - before.get(node, {}).get(k, 0) for k, v in c.items()} for node, c in after.items()}


def run_demo(config: Path, run_dir: Path, out: Path, n_keys: int, n_hot: int, duration: float,
             alpha: float, get_ratio: float, value_size: int, window: int) -> dict:
    cfg = load_config(config)
    if not cfg.clients:
        raise SystemExit(f"{config}: the demo needs at least one client")
    for d in cfg.db_nodes:  # a fresh store every run, so figures are comparable
        shutil.rmtree(d.data_dir, ignore_errors=True)
    console.print(f"[bold]Exoskeleton demo[/]: {len(cfg.cache_nodes)} cache nodes, "
                  f"{len(cfg.db_nodes)} db nodes in chains of {cfg.replication.factor} (replication.factor), "
                  f"{len(cfg.clients)} clients ({config})")
    t_start = time.monotonic()
    with EmulatedCluster(cfg, run_dir, config_path=config) as cl:
        console.print(f"cluster up in {time.monotonic() - t_start:.1f} s; logs in {run_dir}")

        # 1. load
        load = Workers(cl, "load")
        share = -(-n_keys // len(cfg.clients))
        for i, c in enumerate(cfg.clients):
            first, count = i * share, max(0, min(share, n_keys - i * share))
            load.start(c.name, ["--value-size", str(value_size), "load", "--first", str(first),
                                "--count", str(count)], window=window)
        try:
            _follow(load, "load ", n_keys, lambda p: f"{sum(x.get('progress', 0) for x in p.values())}/{n_keys} keys")
            loaded = load.results()
        finally:
            load.kill()
        load_errors = sum(r["errors"] for r in loaded.values())

        # 2. optional pre-warm through the real Cache RPC (FETCH + rule install); by default the
        #    caches start empty and the REPORT/selection loop fills them during the run
        cached = {}
        for node, keys in hot_keys_by_cache_node(cfg, n_hot).items():
            rep = cl.stubs.cache(node).Cache(pb.KeysRequest(keys=keys), timeout=120)
            cached[node] = rep.done
            if rep.error:
                console.print(f"[yellow]{node}: {rep.error}")
        if cached:
            console.print(f"pre-warmed {sum(cached.values())} hot keys: {cached}")
        else:
            console.print("caches start empty: they fill themselves from db-node REPORTs")

        # 3. the mixed workload; the Ruleset 2 figures are those of this window, from the
        #    controller's journal and from the switch's own record (exo_topo.switch_audit)
        before = cl.stubs.node_stats()
        mix = Workers(cl, "run")
        with RuleAudit(cl, name="demo-audit") as audit:
            for c in cfg.clients:
                mix.start(c.name, ["--value-size", str(value_size), "run", "--keys", str(n_keys),
                                   "--alpha", str(alpha), "--get-ratio", str(get_ratio),
                                   "--duration", str(duration)], window=window)
            try:
                _follow(mix, "run  ", duration, combine=min, describe=
                        lambda p: f"{sum(x.get('ops', 0) for x in p.values())} ops, "
                                  f"{sum(x.get('errors', 0) for x in p.values())} errors")
                results = mix.results()
            finally:
                mix.kill()
        counters = _delta(cl.stubs.node_stats(), before)
        rules = cl.stubs.rules(0)
        controller = cl.stubs.controller_stats()
        cached_at_end = {c.name: len(cl.stubs.cached_keys(c.name)) for c in cfg.cache_nodes}
        flows_dump = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", cfg.switch.bridge],
                                    capture_output=True, text=True).stdout

    lat = np.concatenate([np.load(r["latency_file"]) for r in results.values()])
    # GETs answered OK, by source (the reply's FROM_CACHE flag): what the cache buys a reader
    lat_by = {src: np.concatenate([np.load(r[f"latency_file_{src}"]) for r in results.values()])
              for src in ("cache", "db")}
    ops = sum(r["ops"] for r in results.values())
    elapsed = max(r["elapsed_s"] for r in results.values())
    by_ruleset = defaultdict(int)
    for f in rules.flows:
        by_ruleset[f"ruleset{f.ruleset}"] += 1
    cache_names = {c.name for c in cfg.cache_nodes}
    gets_from_cache = sum(c.get("hits", 0) for n, c in counters.items() if n in cache_names)
    gets = sum(r["gets"] for r in results.values())
    zipf = ZipfRanks(n_keys, alpha)
    series = merge_series([r.get("series", []) for r in results.values()])
    summary = {
        "replication_factor": cfg.replication.factor,  # db nodes per chain (auto: 3 with 4 db nodes)
        "ops": ops,
        "errors": sum(r["errors"] for r in results.values()),
        "gets": gets,
        "puts": sum(r["puts"] for r in results.values()),
        "gets_from_cache": gets_from_cache,
        "gets_from_cache_share": gets_from_cache / gets if gets else 0.0,
        "expected_share_of_hot_keys": zipf.share_of_top(sum(cached_at_end.values())),
        "cached_keys_at_end": cached_at_end,
        "cache_fill_s": cache_fill_seconds(series),
        # Inside the run window (docs/cache-fill.md, "A run's figures"); the controller's
        # lifetime figures (start-up programming included) are the *_lifetime fields.
        **audit_summary(audit.result),
        "rule_updates_per_s_max_lifetime": controller.get("rule_updates_per_s_max", 0),
        "ruleset2_max_lifetime": controller.get("ruleset2_max", 0),
        "rule_audit": audit.result,
        "rule_audit_problems": audit_problems(audit.result, cfg.switch.rule_update_rate,
                                              cfg.switch.cache_rule_capacity),
        "rule_update_rate": cfg.switch.rule_update_rate,
        "cache_rule_capacity": cfg.switch.cache_rule_capacity,
        "controller": controller,
        "series": series,
        "gets_from_cache_reply_flag": sum(r["gets_from_cache_flag"] for r in results.values()),
        "throughput_ops_s": ops / elapsed if elapsed else 0.0,
        "duration_s": elapsed,
        "per_node": {n: c.get("requests_served", 0) for n, c in counters.items()},
        "latency_us": {"p50": float(np.percentile(lat, 50)) if lat.size else None,
                       "p99": float(np.percentile(lat, 99)) if lat.size else None,
                       "mean": float(lat.mean()) if lat.size else None},
        **{f"latency_us_{src}": {"p50": float(np.percentile(v, 50)) if v.size else None,
                                 "p99": float(np.percentile(v, 99)) if v.size else None, "gets": int(v.size)}
           for src, v in lat_by.items()},
        "client_native": all(r.get("client_native") for r in results.values()),
        "flows": {k: by_ruleset.get(k, 0) for k in ("ruleset1", "ruleset2", "ruleset3")},
        "load": {"keys": n_keys, "errors": load_errors,
                 "seconds": max(r["elapsed_s"] for r in loaded.values())},
        "cached_hot_keys": cached,  # pre-warmed with --hot (empty by default)
        "node_counters": counters,
        "workload": {"alpha": alpha, "get_ratio": get_ratio, "value_size": value_size,
                     "window_per_client": window, "clients": len(cfg.clients)},
        "config": str(config),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    summary["flows_dump_file"] = str(out.with_name(out.stem + "-flows.txt"))
    Path(summary["flows_dump_file"]).write_text(flows_dump)  # the switch's own view, for reading
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print_summary(summary, out)
    return summary


def merge_series(per_client: list[list[dict]]) -> list[dict]:
    """Sum the workers' per-second rows (their clocks start within a second of each other)."""
    out: list[dict] = []
    for rows in per_client:
        for i, row in enumerate(rows):
            while len(out) <= i:
                out.append({"t_s": len(out), **dict.fromkeys(row, 0)})
            for k, v in row.items():
                out[i][k] = out[i].get(k, 0) + v
    for row in out:
        row["share_from_cache"] = round(row["gets_from_cache"] / row["gets"], 4) if row.get("gets") else 0.0
    return out


def cache_fill_seconds(series: list[dict], final_s: int = 5, reach: float = 0.9):
    """Seconds from the start of the run until the share of GETs answered by cache nodes first
    reached `reach` of its final value (the mean of the last `final_s` full seconds; the last
    row is a partial second and is left out). None if the run was too short to tell."""
    full = series[:-1]
    if len(full) <= final_s:
        return None
    final = sum(r["share_from_cache"] for r in full[-final_s:]) / final_s
    if final <= 0:
        return None
    for row in full:
        if row["share_from_cache"] >= reach * final:
            return row["t_s"] + 1  # the second in which it got there has ended by then
    return None


def print_summary(s: dict, out: Path) -> None:
    t = Table(title="Exoskeleton demo", show_header=True)
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("operations", f"{s['ops']:,}")
    t.add_row("throughput", f"{s['throughput_ops_s']:,.0f} ops/s")
    t.add_row("errors (after resends)", f"{s['errors']:,}")
    t.add_row("GETs / PUTs", f"{s['gets']:,} / {s['puts']:,}")
    t.add_row("GETs answered by cache nodes", f"{s['gets_from_cache']:,} ({100 * s['gets_from_cache_share']:.1f}%)")
    cached = sum(s["cached_keys_at_end"].values())
    t.add_row(f"  ideal share of the {cached} keys cached", f"{100 * s['expected_share_of_hot_keys']:.1f}%")
    fill = s["cache_fill_s"]
    t.add_row("cache filled (90% of final share)", "n/a (run too short)" if fill is None else f"after {fill} s")
    t.add_row("Ruleset 2 flow-mods in the busiest 1 s of the run",
              f"{s['rule_updates_per_s_max']} sent / {s['switch_rule_updates_per_s_max']} received by the switch "
              f"(R = {s['rule_update_rate']:g})")
    t.add_row("Ruleset 2 size, max during the run",
              f"{s['ruleset2_max']} controller / {s['switch_ruleset2_max']} switch (C = {s['cache_rule_capacity']})")
    t.add_row("latency p50 / p99", f"{s['latency_us']['p50']:.0f} / {s['latency_us']['p99']:.0f} us")
    for src, who in (("cache", "cache nodes"), ("db", "db nodes")):
        v = s[f"latency_us_{src}"]
        t.add_row(f"  GETs answered by {who}, p50 / p99",
                  "none" if v["p50"] is None else f"{v['p50']:.0f} / {v['p99']:.0f} us ({v['gets']:,} GETs)")
    t.add_row("client hot path", "native (C++, sendmmsg/recvmmsg)" if s["client_native"] else "pure Python")
    t.add_row("flows: ruleset 1 / 2 / 3",
              f"{s['flows']['ruleset1']} / {s['flows']['ruleset2']} / {s['flows']['ruleset3']}")
    for node, served in s["per_node"].items():
        t.add_row(f"  served by {node}", f"{served:,}")
    console.print(t)
    console.print("GETs answered by cache nodes, % per second of the run: "
                  + " ".join(f"{100 * r['share_from_cache']:.0f}" for r in s["series"]))
    for problem in s["rule_audit_problems"]:
        console.print(f"[yellow]switch audit: {problem}")
    console.print(f"wrote {out}")
