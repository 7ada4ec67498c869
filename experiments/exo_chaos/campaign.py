"""`make chaos`: a bounded fault-injection campaign on a Mininet cluster, checked for
linearizability. Writes results/chaos.json and prints a table.

    python -m exo_chaos.campaign [--repeats 3] [--quick] [--out results/chaos.json]
    python -m exo_chaos.campaign --mutant skip-prepare --out results/chaos-mutant-skip-prepare.json

    client0..client2  exo_chaos.worker: bursts of GET/PUT/DELETE on 8 keys, all workers' bursts
                      starting together, histories recorded
    client3           this process: preloads the keys, reads them all at the end
    cache0, cache1    40 entries each, filling themselves (sample_rate 1: the keys are hot at once)
    db0, db1          RocksDB, WAL without fsync (survives kill -9; docs/two-phase-commit.md)
    controller        one process, or with --controllers 2 two instances (c1, c2) and an etcd
                      electing the master (`make chaos` runs that)

Schedule: warm-up (until every key has been cached), then `repeats` rounds of: link loss + delay,
duplicated and reordered frames, kill -9 of a cache node, of a db node, of the controller (every
instance), and with 2 controllers of the master instance alone (each healed and followed by a
quiet period). With --replication 3 (three db nodes, every slot a chain of all three) a round
also kills a db node and deletes its disk (kill_db_disk), removes one (remove_node) and adds it
back (add_node) (exo_chaos.membership). Then the workers stop, every key is read once more,
every key's history is checked against a register model (exo_chaos.linearizability), and at
replication > 1 every chain's members must hold the same data (exo_chaos.convergence).

--mutant NAME runs the same campaign against the mutant test build (docs/chaos.md, "Mutants"):
skip-prepare on both db nodes, serve-stale on both cache nodes. Exit status: 0 when the run
passes (no violation, no lost acknowledged write; with --mutant: at least one violation, the
mutant caught), 1 when it does not, 3 when the checker left some key undecided (its budget ran
out), which proves nothing either way.
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from exo_common.partitions import slot_of
from exo_harness.history import History
from exo_topo import ovs
from exo_topo.cluster import EmulatedCluster
from exo_common.config import parse_config
from exo_topo.configgen import emulation_config_dict
from exoskeleton.keyhash import key_hash

from . import linearizability, metrics
from .convergence import chain_digests
from .faults import MEMBERSHIP_FAULTS, Fault, Links, controller_stats, now_ns, run_fault
from .membership import settled_chains
from .worker import chaos_key

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger("exo.chaos")
N_KEYS = 8
WORKERS = ("client0", "client1", "client2")
CAMPAIGN_CLIENT = "client3"
# The workload (docs/chaos.md): every worker sends BURST requests each TICK seconds, all
# workers on the same ticks, so operations on one key overlap (overlap_share).
BURST, TICK = 6, 0.02
# Mutant name -> the kind of node that runs it (docs/chaos.md, "Mutants").
MUTANTS = {"skip-prepare": "db", "serve-stale": "cache", "ack-at-head": "db"}
# A mutant that breaks only replication needs chains of more than one node to show.
MUTANT_REPLICATION = {"ack-at-head": 3}
BASELINE_S = 3.0  # throughput baseline: the 3 s before each injection
# kill_master_controller: the target for takeover_s (docs/chaos.md); a run above it fails.
TAKEOVER_LIMIT_S = 1.0
# With controllers > 1, instance i listens for OpenFlow on openflow_port + 100 * i.
INSTANCE_PORT_STEP = 100


def build_config(run_dir: Path, openflow_port: int, replication: int = 1, cache_fill: bool = True,
                 controllers: int = 1):
    """replication > 1: three db nodes in chains of `replication`, and 16 slots instead of 256
    (two Ruleset 3 rules per slot at R = 50/s: docs/design/replication.md, "Rule budget").
    cache_fill False: no key is ever cached, so every GET is served by a chain's tail.
    controllers > 1: that many controller instances c1, c2, ... (OpenFlow ports openflow_port,
    openflow_port + 100, ...) and an etcd for their election (exo_topo.controller_group)."""
    if controllers < 1:
        raise ValueError(f"controllers: {controllers} (at least 1)")
    extra: dict = {}
    if not cache_fill:
        extra["cache_fill"] = {"enabled": False}
    switch = {"cache_rule_capacity": 256}
    if replication > 1:
        extra["replication"] = {"factor": replication}
        switch["partition_bits"] = 4
    data = emulation_config_dict(
        n_cache=2, n_db=max(2, replication), n_clients=len(WORKERS) + 1, run_dir=run_dir,
        cache_capacity=40, controller={"openflow_port": openflow_port}, switch=switch,
        hot_keys={"sample_rate": 1.0}, **extra)
    if controllers > 1:
        # Per-instance addresses replace the single controller's (config.py refuses both); the
        # etcd URL is a placeholder: the emulation starts its own etcd (controller_group.py).
        data["controller"] = {
            "etcd": ["https://127.0.0.1:2379"],
            "instances": [{"name": f"c{i + 1}", "openflow_port": openflow_port + INSTANCE_PORT_STEP * i,
                           "grpc": f"unix:{run_dir}/ctl-c{i + 1}.sock"} for i in range(controllers)]}
    return parse_config(data, "<chaos campaign>")


def slot_rules(cfg, slot: int, chain: list[str], read_server: str) -> dict:
    """Slot `slot`'s chain (the live one: failovers and membership changes reorder it) and its
    Ruleset 3 rules as the switch holds them: the read rule (prefixes AA/AE, to the read
    server's port, the tail) and the write rule (BA, to the head's port)."""
    from exo_controller.flows import make_cookie
    ports = {d.name: d.switch_port for d in cfg.db_nodes}
    return {"slot": slot, "chain": chain, "read_server": read_server, "head_port": ports[chain[0]],
            "tail_port": ports[read_server],
            "dump_flows": ovs.dump_flows(cfg.switch.bridge,
                                         [make_cookie(3, slot), make_cookie(3, 1 << 16 | slot)])}


def key_ids(cfg, n: int = N_KEYS) -> list[int]:
    """n key numbers, as many owned by each db node (the first ones in chaos:000, 001, ...
    order), so that killing either db node, or the cache node serving it, hits as many keys."""
    owners, bits = cfg.partitions(), cfg.switch.partition_bits
    names = [d.name for d in cfg.db_nodes]
    quota = {name: n // len(names) + (j < n % len(names)) for j, name in enumerate(names)}
    out: list[int] = []
    for i in range(100_000):
        owner = owners[slot_of(key_hash(chaos_key(i)), bits)]
        if quota[owner] > 0:
            quota[owner] -= 1
            out.append(i)
            if len(out) == n:
                return out
    raise ValueError(f"no {n} keys spread over {names}: does every db node own a partition?")


def node_faults(cfg, mutant: Optional[str]) -> dict[str, str]:
    if mutant is None:
        return {}
    if mutant not in MUTANTS:
        raise ValueError(f"unknown mutant {mutant!r} (known: {', '.join(MUTANTS)})")
    nodes = cfg.db_nodes if MUTANTS[mutant] == "db" else cfg.cache_nodes
    return {n.name: mutant for n in nodes}


def schedule(repeats: int, quick: bool, controllers: int = 1, replication: int = 1) -> list[Fault]:
    """controllers > 1 adds kill_master_controller to every round (its target is whichever
    instance is master at the time); replication > 1 adds the membership faults (three db
    nodes: kill_db, kill_db_disk and remove/add_node each take another one, turning with the
    round)."""
    hold, settle = (4.0, 4.0) if quick else (6.0, 5.0)
    out = []
    for r in range(repeats):
        out += [
            Fault("link_loss", "client links", hold_s=hold, settle_s=settle),
            Fault("dup_reorder", "client links", hold_s=hold, settle_s=settle),
            Fault("kill_cache", f"cache{r % 2}", hold_s=3.0, settle_s=settle + 2),
        ]
        if replication > 1:
            n_db = max(2, replication)
            out += [
                Fault("kill_db", f"db{r % n_db}", hold_s=1.5, settle_s=settle),
                *membership_faults(f"db{(r + 1) % n_db}", f"db{(r + 2) % n_db}", settle),
            ]
        else:
            out.append(Fault("kill_db", f"db{r % 2}", hold_s=1.5, settle_s=settle))
        out.append(Fault("kill_ctl", "controller", hold_s=3.0, settle_s=settle))
        if controllers > 1:
            out.append(Fault("kill_master_controller", "the master", hold_s=3.0, settle_s=settle))
    return out


def membership_faults(disk_target: str, member_target: str, settle: float) -> list[Fault]:
    """kill_db_disk of one db node (down 3 s: the failover is over before its replacement
    starts), then remove_node and add_node of another (exo_chaos.membership)."""
    return [Fault("kill_db_disk", disk_target, hold_s=3.0, settle_s=settle),
            Fault("remove_node", member_target, hold_s=0.0, settle_s=settle),
            Fault("add_node", member_target, hold_s=0.0, settle_s=settle)]


def start_workers(cl: EmulatedCluster, run_dir: Path, keys: list[int], tick: float,
                  workers: tuple[str, ...] = WORKERS) -> dict:
    procs = {}
    cfg = cl.cfg
    for i, name in enumerate(workers):
        node = cfg.node(name)
        cmd = [sys.executable, "-m", "exo_chaos.worker", "--iface", node.interface, "--name", name,
               "--history", str(run_dir / f"history-{name}.jsonl"),
               "--key-ids", ",".join(map(str, keys)), "--burst", str(BURST), "--tick", str(tick),
               "--seed", str(i + 1), "--impair-file", str(run_dir / f"impair-{name}.json"),
               "--mtu", str(cfg.cluster.mtu), "--udp-port", str(cfg.cluster.udp_port),
               "--service-ip", cfg.cluster.service_ip]
        procs[name] = cl.popen_in(name, cmd, f"chaos-{name}")
    return procs


def stop_workers(procs: dict, timeout: float = 30.0) -> None:
    for p in procs.values():
        if p.poll() is None:
            p.terminate()
    for name, p in procs.items():
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise RuntimeError(f"chaos worker {name} did not stop")
        if rc != 0:
            raise RuntimeError(f"chaos worker {name} exited with {rc}")


def wait_cached(cl: EmulatedCluster, keys: list[bytes], timeout: float) -> tuple[float, int]:
    """Seconds until every key has been seen held by a cache node (at most timeout), and how
    many were. Not "all at once": a committed DELETE retires a key's rule and the key comes
    back later, so at any moment a key may be out of the cache for a while."""
    t0 = time.monotonic()
    seen: set[bytes] = set()
    while True:
        try:
            seen |= set(keys) & {k for c in cl.cfg.cache_nodes for k in cl.stubs.cached_keys(c.name)}
        except Exception as err:  # a node busy starting: ask again
            log.info("cached keys: %s", err)
        if len(seen) == len(keys) or time.monotonic() - t0 >= timeout:
            return time.monotonic() - t0, len(seen)
        time.sleep(0.1)


def run_campaign(out: Path, repeats: int = 3, quick: bool = False, openflow_port: int = 6667,
                 run_dir: Path = Path("/tmp/exo/chaos"), progress=print, mutant: Optional[str] = None,
                 faults: Optional[list[Fault]] = None, load_s: float = 0.0,
                 rate: Optional[float] = None, replication: Optional[int] = None,
                 cache_fill: bool = True, controllers: int = 1) -> dict:
    """faults: instead of schedule(repeats, quick); load_s: seconds of load after the warm-up
    and before the first fault (a mutant round with no faults needs some); rate: requests/s per
    worker (default BURST / TICK), set by spacing the bursts; replication: the db chains'
    length (default 1, or what the mutant needs); cache_fill False: nothing is cached (a round
    aimed at the db nodes alone); controllers: controller instances (2+: a failover group with
    etcd, and kill_master_controller in the schedule)."""
    tick = TICK if rate is None else BURST / rate
    if replication is None:
        replication = MUTANT_REPLICATION.get(mutant or "", 1)
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    cfg = build_config(run_dir, openflow_port, replication, cache_fill, controllers)
    keys = key_ids(cfg)
    faults = schedule(repeats, quick, controllers, replication) if faults is None else faults
    if replication < 2 and any(f.kind in MEMBERSHIP_FAULTS for f in faults):
        raise ValueError(f"faults {', '.join(MEMBERSHIP_FAULTS)} need --replication 2 or more "
                         f"(replication: {replication})")
    t_start = time.monotonic()
    events: list[dict] = []
    campaign_history = History()
    final: dict[bytes, bytes | None] = {}
    with EmulatedCluster(cfg, run_dir, node_faults=node_faults(cfg, mutant)) as cl:
        links = Links(cl, list(WORKERS), {c: run_dir / f"impair-{c}.json" for c in WORKERS})
        links.use_netem = Links.netem_available(cl, WORKERS[0])
        with cl.client(CAMPAIGN_CLIENT, history=campaign_history, history_name="campaign",
                       retries=12) as c:
            for i in keys:
                c.set(chaos_key(i), b"initial:%d" % i)
        procs = start_workers(cl, run_dir, keys, tick)
        try:
            warm = 15.0 if quick else 20.0
            # The first fault needs a throughput baseline before it.
            load = max(load_s, BASELINE_S) if faults else load_s
            progress(f"chaos: warm-up (until each of the {len(keys)} keys was cached, at most {warm:g} s), "
                     f"then {load:g} s of load and {len(faults)} faults")
            warmup_s, cached = (wait_cached(cl, [chaos_key(i) for i in keys], warm) if cache_fill
                                else (0.0, 0))
            time.sleep(load)
            for n, f in enumerate(faults, 1):
                progress(f"chaos: [{n}/{len(faults)}] {f.kind} {f.target} ...")
                ev = run_fault(f, cl, links)
                events.append(ev)
                time.sleep(f.settle_s)
        finally:
            links.clear()
            workers_stop_ns = now_ns()
            stop_workers(procs)
        # Every fault healed and every worker stopped: these reads see the final state.
        with cl.client(CAMPAIGN_CLIENT, history=campaign_history, history_name="campaign",
                       retries=12) as c:
            for i in keys:
                final[chaos_key(i)] = c.get(chaos_key(i))
        node_stats = cl.stubs.node_stats()
        ctl_stats = controller_stats(cl)
        convergence = slot0_rules = None
        if replication > 1:
            # Compare only once the controller has finished re-adding (no learner left), on the
            # live chains, which the faults above have reordered.
            settle_s, chains, readers = settled_chains(cl)
            convergence = {**chain_digests(chains, cl.stubs.slot_digests), "chains": chains,
                           "settled_s": None if settle_s is None else round(settle_s, 2)}
            if settle_s is None:
                convergence["converged"] = False
                convergence["why"] = "learners left or a member in no chain after 60 s"
            slot0_rules = slot_rules(cfg, 0, chains[0], readers[0])
    campaign_history.save(run_dir / "history-campaign.jsonl")
    progress("chaos: checking histories ...")
    ops = History.merge([History.load(run_dir / f"history-{n}.jsonl")
                         for n in (*WORKERS, "campaign")])
    result = summarize(ops, events, final, node_stats, ctl_stats, links.use_netem, workers_stop_ns)
    result["duration_s"] = round(time.monotonic() - t_start, 1)
    result["repeats"] = repeats
    result["mutant"] = mutant
    result["node_faults"] = node_faults(cfg, mutant)
    result["replication_factor"] = replication
    result["controllers"] = controllers
    result["chain_convergence"] = convergence
    result["ruleset3_slot0"] = slot0_rules
    result["keys"] = [chaos_key(i) for i in keys]
    result["warmup_s"] = round(warmup_s, 2)
    result["keys_seen_cached_in_warmup"] = cached
    result["workload"] = {"workers": len(WORKERS), "burst": BURST, "tick_s": tick,
                          "offered_per_s": round(len(WORKERS) * BURST / tick)}
    result["exit_status"] = exit_status(result)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=_hex))
    shutil.copy(run_dir / "history-campaign.jsonl", out.with_name(out.stem + "-history-campaign.jsonl"))
    return result


def summarize(ops, events, final, node_stats, ctl_stats, netem: bool,
              end_ns: Optional[int] = None) -> dict:
    op_dicts = [o if isinstance(o, dict) else o.as_dict() for o in ops]
    t_check = time.monotonic()
    check = linearizability.check_history(op_dicts)
    check_s = time.monotonic() - t_check
    lost = metrics.lost_acked_writes(op_dicts, final)
    counts = metrics.outcome_counts(op_dicts)
    ok_times = metrics.ok_completions(op_dicts)
    recovery: dict[str, list] = {}
    from_inject: dict[str, list] = {}
    depth: dict[str, list] = {}
    length: dict[str, list] = {}
    for n, ev in enumerate(events):
        # Each fault is judged up to the next injection (or the end of the load): what comes
        # after belongs to the next fault.
        until = events[n + 1]["inject_ns"] if n + 1 < len(events) else end_ns
        base_from = ev["inject_ns"] - int(BASELINE_S * 1e9)
        ref = ev["inject_ns"] if ev["kind"] == "kill_cache" else ev["heal_ns"]
        ev["throughput_recovery_s"] = metrics.recovery_s(
            ok_times, ref, base_from, baseline_to_ns=ev["inject_ns"], end_ns=until)
        d = metrics.dip(ok_times, ev["inject_ns"], ev["heal_ns"], base_from, end_ns=until)
        ev.update(d)
        if ev["kind"] == "kill_ctl":
            # Forwarding never depends on the controller; what comes back is rule updates.
            value = ev.get("programmed_s")
        elif ev["kind"] == "kill_master_controller":
            # What comes back is rule updates through another instance (docs/chaos.md).
            value = ev.get("takeover_s")
        else:
            value = ev["throughput_recovery_s"]
        recovery.setdefault(ev["kind"], []).append(None if value is None else round(value, 3))
        from_inject.setdefault(ev["kind"], []).append(d["recovery_from_inject_s"])
        depth.setdefault(ev["kind"], []).append(d["depth"])
        length.setdefault(ev["kind"], []).append(d["length_s"])
        in_window = [o for o in op_dicts
                     if ev["inject_ns"] <= o["invoke_ns"] <= ev["heal_ns"] + 2_000_000_000]
        ev["ops_in_window"] = len(in_window)
        ev["errors_in_window"] = sum(o["outcome"] != "ok" for o in in_window)
    t0 = min(o["invoke_ns"] for o in op_dicts)
    for ev in events:
        ev["t_s"] = round((ev["inject_ns"] - t0) / 1e9, 2)
        for k, v in ev.items():
            if isinstance(v, float):
                ev[k] = round(v, 3)
    per_key = check.results
    cache_hits = sum(s.get("hits", 0) for n, s in node_stats.items() if n.startswith("cache"))
    return {
        "ops": len(op_dicts),
        "histories_checked": check.keys_checked,
        "linearizability_violations": len(check.violations),
        "lost_acked_writes": len(lost),
        "unknown_outcomes": counts["unknown"],
        "recovery_s": recovery,
        "recovery_from_inject_s": from_inject,
        "dip_depth": depth,
        "dip_length_s": length,
        "recovered_all": all(v is not None for vs in from_inject.values() for v in vs),
        "overlap_share": metrics.overlap_share(op_dicts),
        "concurrency": metrics.concurrency(op_dicts),
        "client_errors_after_retry": counts["fail"] + counts["unknown"],
        "failed_ops": counts["fail"],
        "get_ops": sum(o["op"] == "get" for o in op_dicts),
        "cache_hits": cache_hits,
        "checker": {"budget_exceeded": len(check.budget_exceeded),
                    "budget_exceeded_detail": check.budget_exceeded[:5],
                    "violations": check.violations[:5],
                    "max_steps": linearizability.DEFAULT_MAX_STEPS,
                    "time_budget_s": linearizability.DEFAULT_TIME_BUDGET_S,
                    "key_steps_max": max((r.steps for r in per_key), default=0),
                    "key_elapsed_s_max": round(max((r.elapsed_s for r in per_key), default=0.0), 3),
                    "key_ops_max": max((r.ops for r in per_key), default=0),
                    "elapsed_s": round(check_s, 2)},
        "lost_acked_writes_detail": lost[:10],
        "link_faults_via": "tc netem" if netem else "client-side shim (kernel has no sch_netem)",
        "events": events,
        "node_counters": {n: {k: v for k, v in s.items() if k in _COUNTERS} for n, s in node_stats.items()},
        "controller": {k: v for k, v in ctl_stats.items() if k.startswith(("cache_node", "withdraw", "switch_"))},
    }


def exit_status(r: dict) -> int:
    """0 pass, 1 fail, 3 undecided keys (see the module docstring)."""
    if r["checker"]["budget_exceeded"]:
        return linearizability.EXIT_UNDECIDED
    if r.get("mutant"):
        return 0 if r["linearizability_violations"] >= 1 else 1
    converged = (r.get("chain_convergence") or {"converged": True})["converged"]
    return 0 if (r["linearizability_violations"] == 0 and r["lost_acked_writes"] == 0 and converged
                 and not takeover_failures(r) and not membership_failures(r)) else 1


# Per membership fault, the fact that must come (None: not within membership.CHANGE_TIMEOUT_S).
MEMBERSHIP_FACTS = {"kill_db_disk": ("failover_s", "rejoin_s"), "remove_node": ("removed_s",),
                    "add_node": ("caught_up_s",)}


def membership_failures(r: dict) -> list[str]:
    """Membership faults that never completed: the failover, the rejoin on the empty disk, the
    removal or the new member's catch-up did not happen (docs/chaos.md)."""
    return [f"{ev['kind']} {ev.get('target')}: no {fact}"
            for ev in r.get("events", []) for fact in MEMBERSHIP_FACTS.get(ev.get("kind"), ())
            if ev.get(fact) is None]


def takeover_failures(r: dict) -> list[str]:
    """Why the kill_master_controller injections fail the run: no takeover, a takeover of
    TAKEOVER_LIMIT_S or more, or a flow flushed (docs/chaos.md)."""
    out = []
    for ev in r.get("events", []):
        if ev.get("kind") != "kill_master_controller":
            continue
        took = ev.get("takeover_s")
        if took is None or took >= TAKEOVER_LIMIT_S:
            out.append(f"takeover_s {took} (limit {TAKEOVER_LIMIT_S} s)")
        if ev.get("flows_flushed") or ev.get("switch_tables_flushed"):
            out.append(f"flows flushed: {ev.get('flows_flushed')} flows, "
                       f"{ev.get('switch_tables_flushed')} tables")
    return out


_COUNTERS = {"malformed_dropped", "duplicate_writes", "txns_recovered", "resolver_resolved",
             "writes_propagated", "hits", "forwarded_misses", "resets", "errors", "prepares",
             "commits", "aborts", "chain_writes", "replicated_applied", "replicated_duplicates",
             "chain_forward_failed", "not_head_dropped", "not_reader_busy"}


def _hex(v):
    if isinstance(v, bytes):
        return v.decode(errors="backslashreplace")
    raise TypeError(type(v))


def print_table(r: dict) -> None:
    rows = [("ops", r["ops"]), ("histories checked (keys)", r["histories_checked"]),
            ("linearizability violations", r["linearizability_violations"]),
            ("undecided keys (budget exceeded)", r["checker"]["budget_exceeded"]),
            ("lost acknowledged writes", r["lost_acked_writes"]),
            ("unknown outcomes", r["unknown_outcomes"]),
            ("client errors after retry", r["client_errors_after_retry"]),
            ("overlap share", r["overlap_share"]),
            ("ops open per key (mean / max)", f"{r['concurrency']['mean_open_max']} / "
                                              f"{r['concurrency']['open_max']}"),
            ("checker: max steps / s per key", f"{r['checker']['key_steps_max']} / "
                                               f"{r['checker']['key_elapsed_s_max']}"),
            ("link faults via", r["link_faults_via"])]
    if r.get("mutant"):
        rows.insert(0, ("mutant", r["mutant"]))
    rows.insert(0, ("replication factor", r.get("replication_factor", 1)))
    rows.insert(1, ("controller instances", r.get("controllers", 1)))
    if r.get("chain_convergence"):
        cc = r["chain_convergence"]
        rows.append(("chains converged (slots checked)", f"{cc['converged']} ({cc['slots_checked']})"))
    for kind, vals in r["recovery_s"].items():
        shown = ", ".join("-" if v is None else f"{v:.2f}" for v in vals)
        rows.append((f"recovery_s {kind}", shown))
    for kind, facts in MEMBERSHIP_FACTS.items():
        for fact in facts:
            vals = [ev.get(fact) for ev in r["events"] if ev["kind"] == kind]
            if vals:
                rows.append((f"{kind} {fact}", ", ".join(_f(v) for v in vals)))
    for kind in r["recovery_from_inject_s"]:
        shown = ", ".join(
            f"{_f(a)} s (depth {_f(d)}, {_f(n)} s below)" for a, d, n in
            zip(r["recovery_from_inject_s"][kind], r["dip_depth"][kind], r["dip_length_s"][kind]))
        rows.append((f"from injection {kind}", shown))
    w = max(len(k) for k, _ in rows)
    print("\n".join(f"  {k:<{w}}  {v}" for k, v in rows))


def _f(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="shorter holds and settles (the make test version)")
    ap.add_argument("--openflow-port", type=int, default=6667)
    ap.add_argument("--mutant", choices=sorted(MUTANTS),
                    help="run against this mutant test build (docs/chaos.md); default out: "
                         "results/chaos-mutant-NAME.json")
    ap.add_argument("--replication", type=int,
                    help="db chain length (replication.factor; default 1, or 3 for --mutant ack-at-head)")
    ap.add_argument("--controllers", type=int, default=1,
                    help="controller instances (2+: a failover group with etcd, and the fault "
                         "kill_master_controller; `make chaos` uses 2)")
    ap.add_argument("--rate", type=float,
                    help=f"requests/s per worker (default {BURST / TICK:g}: {BURST} every {TICK:g} s)")
    a = ap.parse_args(argv)
    out = a.out or REPO / "results" / (f"chaos-mutant-{a.mutant}.json" if a.mutant else "chaos.json")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    r = run_campaign(out, a.repeats, a.quick, a.openflow_port, mutant=a.mutant, rate=a.rate,
                     replication=a.replication, controllers=a.controllers)
    print_table(r)
    print(f"wrote {out}")
    status = r["exit_status"]
    if status == linearizability.EXIT_UNDECIDED:
        print("chaos: FAIL: the checker left keys undecided (budget exceeded)", file=sys.stderr)
    elif status and a.mutant:
        print(f"chaos: FAIL: mutant {a.mutant} not caught (no violation)", file=sys.stderr)
    elif status and takeover_failures(r):
        print(f"chaos: FAIL: kill_master_controller: {'; '.join(takeover_failures(r))}", file=sys.stderr)
    elif status and membership_failures(r):
        print(f"chaos: FAIL: {'; '.join(membership_failures(r))}", file=sys.stderr)
    elif status and not (r.get("chain_convergence") or {"converged": True})["converged"]:
        print("chaos: FAIL: chains diverged (chain_convergence)", file=sys.stderr)
    elif status:
        print("chaos: FAIL: linearizability violation or lost acknowledged write", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
