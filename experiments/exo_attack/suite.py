"""`make attack`: the attack suite on a Mininet cluster with TLS on (docs/security.md).
Writes results/security.json and prints a table.

    python -m exo_attack [--out results/security.json] [--quick]
    python -m exo_attack --insecure --out results/security-insecure.json

    client0, client1   honest chaos workers (exo_chaos.worker): GET/PUT/DELETE bursts on 8 keys,
                       histories recorded and checked for linearizability at the end
    client2            the attacker's host: every control-plane attack runs from here, as a
                       process on that host, with each identity of identities.py; the
                       data-plane attacks send crafted frames from its port
    root namespace     the rogue OpenFlow connections (a host on the management network)

Every attack must fail (`refused`), and be counted by the component that refused it
(`refused_by`, `counter`, `counter_delta`). `linearizability_violations` and
`lost_acked_writes` are those of the honest clients' histories, checked as in `make chaos`.

--insecure runs the same suite against a cluster with `security.insecure_dev_mode: true` (no TLS,
no caller checks): the fault switch that shows the suite catches an open cluster. Exit status 0
when every attack was refused and the history is clean (with --insecure: when at least one
attack got through, i.e. the suite noticed); 1 otherwise; 3 when the checker left a key undecided.
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from pathlib import Path

from exo_chaos import linearizability, metrics
from exo_chaos.campaign import key_ids, start_workers, stop_workers, wait_cached
from exo_chaos.worker import chaos_key
from exo_common.config import parse_config
from exo_harness.history import History
from exo_topo.cluster import EmulatedCluster
from exo_topo.configgen import emulation_config_dict

from . import plan
from .judge import Judge

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger("exo.attack")
HONEST = ("client0", "client1")
ATTACKER = "client2"
FINAL_READER = "client0"
PROXY = "web0"  # a proxy certificate: what a compromised web host holds
METER_PPS = 2000


def build_config(run_dir: Path, openflow_port: int, insecure: bool):
    d = emulation_config_dict(
        n_cache=2, n_db=2, n_clients=3, run_dir=run_dir, cache_capacity=40,
        controller={"openflow_port": openflow_port},
        # The meter at a rate the honest workers (120 requests/s each) never reach, so the flood
        # meets it and nothing else does.
        switch={"cache_rule_capacity": 256, "client_meter_pps": METER_PPS},
        hot_keys={"sample_rate": 1.0})
    d["proxies"] = [{"name": PROXY, "client": ATTACKER}]
    d["security"] = {"insecure_dev_mode": insecure, "cert_dir": str(run_dir / "pki")}
    return parse_config(d, "<attack suite>")


def run_suite(out: Path, quick: bool = False, insecure: bool = False, openflow_port: int = 6668,
              run_dir: Path = Path("/tmp/exo/attack"), progress=print) -> dict:
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    cfg = build_config(run_dir, openflow_port, insecure)
    keys = key_ids(cfg)
    history = History()
    t0 = time.monotonic()
    results: list[dict] = []
    final: dict[bytes, bytes | None] = {}
    with EmulatedCluster(cfg, run_dir) as cl:
        yaml_path = run_dir / "cluster.yaml"
        with cl.client(FINAL_READER, history=history, history_name="suite", retries=12) as c:
            for i in keys:
                c.set(chaos_key(i), b"initial:%d" % i)
        procs = start_workers_on(cl, run_dir, keys)
        try:
            progress(f"attack: warm-up until the {len(keys)} honest keys are cached")
            wait_cached(cl, [chaos_key(i) for i in keys], 15.0)
            judge = Judge(cl, run_dir, yaml_path, ATTACKER, PROXY, progress)
            attacks = plan.attacks(cfg, keys, quick)
            for n, attack in enumerate(attacks, 1):
                progress(f"attack: [{n}/{len(attacks)}] {attack.name} ...")
                results.append(judge.run(attack))
            time.sleep(1.0 if quick else 3.0)  # honest load after the last attack
        finally:
            stop_workers(procs)
        with cl.client(FINAL_READER, history=history, history_name="suite", retries=12) as c:
            for i in keys:
                final[chaos_key(i)] = c.get(chaos_key(i))
        switch_connected = cl.stubs.rules(0).switch_connected
    history.save(run_dir / "history-suite.jsonl")
    ops = History.merge([History.load(run_dir / f"history-{n}.jsonl") for n in (*HONEST, "suite")])
    op_dicts = [o if isinstance(o, dict) else o.as_dict() for o in ops]
    progress("attack: checking the honest clients' histories ...")
    check = linearizability.check_history(op_dicts)
    lost = metrics.lost_acked_writes(op_dicts, final)
    counts = metrics.outcome_counts(op_dicts)
    result = {
        "attacks": results,
        "linearizability_violations": len(check.violations),
        "lost_acked_writes": len(lost),
        "undecided_keys": len(check.budget_exceeded),
        "honest_ops": len(op_dicts),
        "honest_failed_ops": counts["fail"],
        "honest_unknown_outcomes": counts["unknown"],
        "switch_still_connected": switch_connected,
        "insecure_dev_mode": insecure,
        "refused_all": all(a["refused"] for a in results),
        "counted_all": all(a["counted"] for a in results),
        "violations_detail": check.violations[:5],
        "lost_acked_writes_detail": lost[:5],
        "duration_s": round(time.monotonic() - t0, 1),
    }
    result["exit_status"] = exit_status(result)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=_text))
    return result


def start_workers_on(cl: EmulatedCluster, run_dir: Path, keys: list[int]) -> dict:
    """The chaos workers, on the honest hosts only: 6 requests every 50 ms each."""
    return start_workers(cl, run_dir, keys, 0.05, workers=HONEST)


def exit_status(r: dict) -> int:
    if r["undecided_keys"]:
        return linearizability.EXIT_UNDECIDED
    if r["insecure_dev_mode"]:
        return 0 if not r["refused_all"] else 1
    clean = r["linearizability_violations"] == 0 and r["lost_acked_writes"] == 0
    vacuous = any(a["evidence"].get("flood_exceeded_meter") is False for a in r["attacks"])
    ok = clean and r["refused_all"] and r["counted_all"] and r["switch_still_connected"] and not vacuous
    return 0 if ok else 1


def _text(v):
    if isinstance(v, bytes):
        return v.decode(errors="backslashreplace")
    raise TypeError(type(v))


def print_table(r: dict) -> None:
    rows = [(a["name"], "refused" if a["refused"] else "GOT THROUGH", a["refused_by"] or "-",
             f"{a['counter'] or '-'} +{a['counter_delta']}" if a["counter_delta"] is not None else (a["counter"] or "-"))
            for a in r["attacks"]]
    widths = [max(len(str(row[i])) for row in rows + [("attack", "outcome", "refused by", "counter")]) for i in range(4)]
    head = ("attack", "outcome", "refused by", "counter")
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    print(f"linearizability violations: {r['linearizability_violations']}  lost acknowledged writes: "
          f"{r['lost_acked_writes']}  honest ops: {r['honest_ops']}  switch still connected: "
          f"{r['switch_still_connected']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--quick", action="store_true", help="one identity per control-plane attack (the make test round)")
    ap.add_argument("--insecure", action="store_true", help="against insecure_dev_mode: the suite must notice")
    ap.add_argument("--openflow-port", type=int, default=6668)
    a = ap.parse_args(argv)
    out = a.out or REPO / "results" / ("security-insecure.json" if a.insecure else "security.json")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    r = run_suite(out, a.quick, a.insecure, a.openflow_port)
    print_table(r)
    print(f"wrote {out}")
    if r["exit_status"] and a.insecure:
        print("attack: FAIL: every attack was refused although the cluster runs insecure_dev_mode", file=sys.stderr)
    elif r["exit_status"]:
        print("attack: FAIL: an attack got through or went uncounted, or the honest history broke", file=sys.stderr)
    return r["exit_status"]
