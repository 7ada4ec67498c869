"""`make chaos`: a bounded fault-injection campaign on a Mininet cluster, checked for
linearizability. Writes results/chaos.json and prints a table.

    python -m exo_chaos.campaign [--repeats 3] [--quick] [--out results/chaos.json]

    client0, client1  exo_chaos.worker: GET/PUT/DELETE on 24 hot keys, histories recorded
    client2           this process: preloads the keys, reads them all at the end
    cache0, cache1    40 entries each, filling themselves (sample_rate 1: the keys are hot at once)
    db0, db1          RocksDB, WAL without fsync (survives kill -9; docs/two-phase-commit.md)

Schedule: warm-up (the caches fill), then `repeats` rounds of: link loss + delay, duplicated
and reordered frames, kill -9 of a cache node, of a db node, of the controller (each healed
and followed by a quiet period). Then the workers stop, every key is read once more, and every
key's history is checked against a register model (exo_chaos.linearizability).
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

from exo_topo.cluster import EmulatedCluster
from exo_topo.configgen import emulation_config
from exoskeleton.history import History

from . import linearizability, metrics
from .faults import Fault, Links, now_ns, run_fault
from .worker import chaos_key

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger("exo.chaos")
N_KEYS = 24
WORKERS = ("client0", "client1")


def build_config(run_dir: Path, openflow_port: int):
    return emulation_config(
        n_cache=2, n_db=2, n_clients=3, run_dir=run_dir, cache_capacity=40,
        controller={"openflow_port": openflow_port}, switch={"cache_rule_capacity": 256},
        hot_keys={"sample_rate": 1.0})


def schedule(repeats: int, quick: bool) -> list[Fault]:
    hold, settle = (4.0, 4.0) if quick else (6.0, 5.0)
    out = []
    for r in range(repeats):
        out += [
            Fault("link_loss", "client links", hold_s=hold, settle_s=settle),
            Fault("dup_reorder", "client links", hold_s=hold, settle_s=settle),
            Fault("kill_cache", f"cache{r % 2}", hold_s=3.0, settle_s=settle + 2),
            Fault("kill_db", f"db{r % 2}", hold_s=1.5, settle_s=settle),
            Fault("kill_ctl", "controller", hold_s=3.0, settle_s=settle),
        ]
    return out


def start_workers(cl: EmulatedCluster, run_dir: Path, rate: float) -> dict:
    procs = {}
    cfg = cl.cfg
    for i, name in enumerate(WORKERS):
        node = cfg.node(name)
        cmd = [sys.executable, "-m", "exo_chaos.worker", "--iface", node.interface, "--name", name,
               "--history", str(run_dir / f"history-{name}.jsonl"), "--keys", str(N_KEYS),
               "--rate", str(rate), "--seed", str(i + 1),
               "--impair-file", str(run_dir / f"impair-{name}.json"),
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


def run_campaign(out: Path, repeats: int = 3, quick: bool = False, openflow_port: int = 6667,
                 run_dir: Path = Path("/tmp/exo/chaos"), rate: float = 150.0, progress=print) -> dict:
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    cfg = build_config(run_dir, openflow_port)
    faults = schedule(repeats, quick)
    t_start = time.monotonic()
    events: list[dict] = []
    campaign_history = History()
    final: dict[bytes, bytes | None] = {}
    with EmulatedCluster(cfg, run_dir) as cl:
        links = Links(cl, list(WORKERS), {c: run_dir / f"impair-{c}.json" for c in WORKERS})
        links.use_netem = Links.netem_available(cl, WORKERS[0])
        with cl.client("client2", history=campaign_history, history_name="campaign", retries=12) as c:
            for i in range(N_KEYS):
                c.set(chaos_key(i), b"initial:%d" % i)
        procs = start_workers(cl, run_dir, rate)
        try:
            warm = 6.0 if quick else 10.0
            progress(f"chaos: warm-up {warm:g} s (caches fill), then {len(faults)} faults")
            time.sleep(warm)
            for n, f in enumerate(faults, 1):
                progress(f"chaos: [{n}/{len(faults)}] {f.kind} {f.target} ...")
                ev = run_fault(f, cl, links)
                events.append(ev)
                time.sleep(f.settle_s)
        finally:
            links.clear()
            stop_workers(procs)
        # Every fault healed and every worker stopped: these reads see the final state.
        with cl.client("client2", history=campaign_history, history_name="campaign", retries=12) as c:
            for i in range(N_KEYS):
                final[chaos_key(i)] = c.get(chaos_key(i))
        node_stats = cl.stubs.node_stats()
        ctl_stats = cl.stubs.controller_stats()
    campaign_history.save(run_dir / "history-campaign.jsonl")
    progress("chaos: checking histories ...")
    ops = History.merge([History.load(run_dir / f"history-{n}.jsonl")
                         for n in (*WORKERS, "campaign")])
    result = summarize(ops, events, final, node_stats, ctl_stats, links.use_netem)
    result["duration_s"] = round(time.monotonic() - t_start, 1)
    result["repeats"] = repeats
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=_hex))
    shutil.copy(run_dir / "history-campaign.jsonl", out.with_name("chaos-history-campaign.jsonl"))
    return result


def summarize(ops, events, final, node_stats, ctl_stats, netem: bool) -> dict:
    op_dicts = [o if isinstance(o, dict) else o.as_dict() for o in ops]
    check = linearizability.check_history(op_dicts)
    lost = metrics.lost_acked_writes(op_dicts, final)
    counts = metrics.outcome_counts(op_dicts)
    ok_times = metrics.ok_completions(op_dicts)
    recovery: dict[str, list] = {}
    for ev in events:
        ref = ev["inject_ns"] if ev["kind"] == "kill_cache" else ev["heal_ns"]
        ev["throughput_recovery_s"] = metrics.recovery_s(ok_times, ref, ev["inject_ns"] - 3_000_000_000)
        if ev["kind"] == "kill_ctl":
            # Forwarding never depends on the controller; what comes back is rule updates.
            value = ev.get("programmed_s")
        else:
            value = ev["throughput_recovery_s"]
        recovery.setdefault(ev["kind"], []).append(None if value is None else round(value, 3))
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
    return {
        "ops": len(op_dicts),
        "histories_checked": check.keys_checked,
        "linearizability_violations": len(check.violations),
        "lost_acked_writes": len(lost),
        "unknown_outcomes": counts["unknown"],
        "recovery_s": recovery,
        "client_errors_after_retry": counts["fail"] + counts["unknown"],
        "failed_ops": counts["fail"],
        "checker": {"budget_exceeded": len(check.budget_exceeded),
                    "budget_exceeded_detail": check.budget_exceeded[:5],
                    "violations": check.violations[:5]},
        "lost_acked_writes_detail": lost[:10],
        "link_faults_via": "tc netem" if netem else "client-side shim (kernel has no sch_netem)",
        "events": events,
        "node_counters": {n: {k: v for k, v in s.items() if k in _COUNTERS} for n, s in node_stats.items()},
        "controller": {k: v for k, v in ctl_stats.items() if k.startswith(("cache_node", "withdraw", "switch_"))},
    }


_COUNTERS = {"malformed_dropped", "duplicate_writes", "txns_recovered", "resolver_resolved",
             "writes_propagated", "hits", "forwarded_misses", "resets", "errors"}


def _hex(v):
    if isinstance(v, bytes):
        return v.decode(errors="backslashreplace")
    raise TypeError(type(v))


def print_table(r: dict) -> None:
    rows = [("ops", r["ops"]), ("histories checked (keys)", r["histories_checked"]),
            ("linearizability violations", r["linearizability_violations"]),
            ("lost acknowledged writes", r["lost_acked_writes"]),
            ("unknown outcomes", r["unknown_outcomes"]),
            ("client errors after retry", r["client_errors_after_retry"]),
            ("link faults via", r["link_faults_via"])]
    for kind, vals in r["recovery_s"].items():
        shown = ", ".join("-" if v is None else f"{v:.2f}" for v in vals)
        rows.append((f"recovery_s {kind}", shown))
    w = max(len(k) for k, _ in rows)
    print("\n".join(f"  {k:<{w}}  {v}" for k, v in rows))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "results" / "chaos.json")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="shorter holds and settles (the make test version)")
    ap.add_argument("--openflow-port", type=int, default=6667)
    ap.add_argument("--rate", type=float, default=150.0, help="requests/s per worker")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    r = run_campaign(a.out, a.repeats, a.quick, a.openflow_port, rate=a.rate)
    print_table(r)
    print(f"wrote {a.out}")
    return 0 if r["linearizability_violations"] == 0 and r["lost_acked_writes"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
