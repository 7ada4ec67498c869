"""Step 11 of docs/deploy.md (the cluster checked through the proxy, and TLS where it matters)
and the checks after the guide's steps: every service restarted once under a memcached workload
(workload.py in the client machine's namespace), then every acknowledged write read back.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import metrics
from netlab import run
from run_state import Run, StepFailed, wait_for
from services import wait_service

HERE = Path(__file__).resolve().parent


def workload(r: Run, cmd: str, *extra: str) -> list[str]:
    """The command line of workload.py `cmd` in the proxy's client machine."""
    client = r.cfg.proxies[0].client
    return ["ip", "netns", "exec", r.lab.netns(client), sys.executable, str(HERE / "workload.py"), cmd,
            "--state", str(r.work / "acked.json"), *extra]


def last_json_line(text: str, what: str) -> dict:
    lines = text.strip().splitlines()
    if not lines:
        raise StepFailed(f"{what} printed nothing (want one JSON line)")
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise StepFailed(f"{what}: its last line is not JSON: {lines[-1][:200]!r}") from None


# ---------------------------------------------------------------- step 11
def step_smoke(r: Run) -> dict:
    out = last_json_line(run(*workload(r, "run", "--duration", "4", "--rate", "300"), timeout=60).stdout,
                         "workload.py run")
    r.add_ops(out)
    if out["acked"] == 0 or out["bad_reads"]:
        raise StepFailed(f"through the proxy: {out}")
    # The hot keys were cached: the cache node answered GETs (its counter, through Prometheus).
    wait_for(lambda: metrics.cache_hits(r) > 0, "cache hits in Prometheus (exo_cache_hits_total)", timeout=10)
    r.metrics["cache_hits_after_smoke"] = metrics.cache_hits(r)
    # The operator's own check: the installed `exo` through the proxy's unix socket.
    exo, sock = r.installed("/usr/bin/exo"), r.installed("/run/exo-proxy/proxy.sock")
    run(exo, "set", "rehearsal:hello", "world", "--socket", sock)
    got = run(exo, "get", "rehearsal:hello", "--socket", sock).stdout.strip()
    if got != "world":
        raise StepFailed(f"exo get rehearsal:hello through {sock}: {got!r}, want 'world'")
    r.tls_checks = check_tls(r)
    if not all(r.tls_checks.values()):
        raise StepFailed(f"TLS checks: {r.tls_checks}")
    return {"workload": out, "cache_hits": r.metrics["cache_hits_after_smoke"], "exo_get": got,
            "tls": r.tls_checks}


def check_tls(r: Run) -> dict:
    """TLS is on where it matters: the switch's controller connection is ssl: and up; the
    controller's gRPC refuses a plaintext caller and a TLS caller without a client certificate,
    and counts each in tls_handshake_refused."""
    conn = run("ovs-vsctl", "--timeout=5", "--columns=target,is_connected", "list", "Controller").stdout
    out = {"openflow_ssl_connected": "ssl:" in conn and "is_connected        : true" in conn}
    out["grpc_plaintext_refused"] = _refused_and_counted(r, credentials=None)
    import grpc
    ca = (Path(r.cfg.security.cert_dir) / "ca.crt").read_bytes()
    out["grpc_no_client_cert_refused"] = _refused_and_counted(r, credentials=grpc.ssl_channel_credentials(ca))
    return out


def _refused_and_counted(r: Run, credentials) -> bool:
    """A Controller.Stats call on a channel with `credentials` (None: plaintext) fails, and the
    controller's tls_handshake_refused goes up (a dead controller would fail the call too)."""
    import grpc
    from exoproto import control_pb2 as pb
    from exoproto import control_pb2_grpc as rpc
    before = r.stubs.controller_stats()["tls_handshake_refused"]
    address = r.cfg.controller.grpc
    ch = (grpc.insecure_channel(address) if credentials is None else
          grpc.secure_channel(address, credentials, options=[("grpc.ssl_target_name_override", "controller")]))
    try:
        rpc.ControllerStub(ch).Stats(pb.StatsRequest(), timeout=2)
        return False
    except grpc.RpcError:
        pass
    finally:
        ch.close()
    deadline = time.monotonic() + 5
    while r.stubs.controller_stats()["tls_handshake_refused"] <= before:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


# ---------------------------------------------------------------- after the steps
def check_restarts(r: Run) -> dict:
    """A workload runs through the proxy while every service is stopped (SIGTERM, as systemctl
    restart does) and started again from its unit, one at a time, in the start order."""
    load = subprocess.Popen(workload(r, "run", "--duration", "300", "--rate", "200"),
                            stdout=subprocess.PIPE, text=True)
    detail = {}
    try:
        time.sleep(1.0)
        for name in list(r.services):
            svc = r.services[name]
            t0 = time.monotonic()
            code = svc.stop(sig=r.args.restart_signal)
            svc.start()
            wait_service(r, name)
            detail[name] = {"exit_status": code, "back_in_s": round(time.monotonic() - t0, 1)}
            time.sleep(1.0)
    finally:
        load.send_signal(signal.SIGTERM)
        try:
            stdout, _ = load.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # it ignored SIGTERM: no figures, but nothing left running
            load.kill()
            stdout, _ = load.communicate()
    out = last_json_line(stdout, "workload.py run (during the restarts)")
    r.add_ops(out)
    detail["workload"] = out
    detail["signal"] = signal.Signals(r.args.restart_signal).name
    if out["bad_reads"]:
        raise StepFailed(f"{out['bad_reads']} reads lost an acknowledged write during the restarts")
    # Every restarted component is scraped again, and the counters are there.
    detail["metrics"] = metrics.targets_up_again(r)
    if not detail["metrics"]["exo_series"]:
        raise StepFailed(f"after the restarts Prometheus has no exo_ series: {detail['metrics']}")
    return detail


def check_read_back(r: Run) -> dict:
    out = last_json_line(run(*workload(r, "verify"), timeout=120).stdout, "workload.py verify")
    r.summary["lost_acked_writes"] = out["lost_acked_writes"]
    r.summary["errors"] += out["errors"]
    if out["lost_acked_writes"] or out["errors"]:
        raise StepFailed(f"read back {out['ops']} acknowledged keys: {out}")
    return out
