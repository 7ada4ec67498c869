"""`make rehearsal`: a deployment rehearsed without Mininet (docs/deploy.md).

Builds the .deb, unpacks it into a scratch root, and follows docs/deploy.md's steps (steps.py) on
a stand-in rack: one bare network namespace per machine, veth cables to an Open vSwitch bridge
that plays the hardware switch (userspace datapath, fail mode secure, OpenFlow 1.3 over TLS),
and a Linux bridge for the management network. Every service is started from its installed
unit file's ExecStart, as its unit's user with its unit's capabilities (units.py, launcher.py),
in the order the guide gives. Then a memcached client works through exo-proxy while every
service is restarted once, and every acknowledged write is read back.

    python scripts/rehearsal/main.py [--out results/rehearsal.json] [--deb PKG] [--work DIR]
                                     [--restart-signal TERM|KILL]

Writes results/rehearsal.json (steps with their outcome, ops, errors, lost_acked_writes, tls, ...)
and prints a table. Exit 0 when every step passed and nothing was lost; 1 otherwise; 2 for a
missing prerequisite (root, OVS, setpriv). Everything it makes is removed in `finally`, also on
Ctrl-C; logs stay in the work directory (default /tmp/exo-rehearsal).

This file runs the steps in order and tears down; each step lives in the module for its part:
rack.py (the machines and cables, the firewall), install.py (package, config, certificates),
switch.py, services.py (the units), metrics.py (Prometheus), checks.py (the workload, TLS, the
restarts, the read-back), report.py; what they share is run_state.Run.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import checks  # noqa: E402
import install  # noqa: E402
import metrics  # noqa: E402
import rack  # noqa: E402
import report  # noqa: E402
import services  # noqa: E402
import switch  # noqa: E402
from run_state import Run  # noqa: E402
from steps import STEPS  # noqa: E402

# docs/deploy.md's steps (steps.STEPS, by key) -> the function that performs each.
STEP_FUNCTIONS = {
    "install": install.step_install,
    "config": install.step_config,
    "certs": install.step_certs,
    "firewall": rack.step_firewall,
    "switch": switch.step_switch,
    "controller": services.step_controller,
    "db_nodes": services.step_db_nodes,
    "cache_nodes": services.step_cache_nodes,
    "proxies": services.step_proxies,
    "metrics": metrics.step_metrics,
    "smoke": checks.step_smoke,
}
# What a step may fail with and is reported as that step's outcome; anything else is a bug in
# the rehearsal: it fails the step too, with its type and a traceback on stderr.
STEP_ERRORS = (RuntimeError, OSError, ValueError, subprocess.SubprocessError)


class Rehearsal:
    def __init__(self, args):
        self.r = Run(args)
        self.steps: list[dict] = []

    def run(self) -> int:
        r = self.r
        ok = True
        if r.work.exists():  # the previous run's logs and scratch root
            shutil.rmtree(r.work)
        r.work.mkdir(parents=True)
        os.chmod(r.work, 0o755)
        try:
            ok = self.do("0", "rack", "Cable the stand-in rack (namespaces, veths)", rack.prepare_rack, ok)
            for n, step in enumerate(STEPS, 1):
                ok = self.do(f"{n}", step.key, step.title, STEP_FUNCTIONS[step.key], ok)
            ok = self.do("check", "restarts", "Restart every service once under load", checks.check_restarts, ok)
            ok = self.do("check", "read_back", "Read back every acknowledged write", checks.check_read_back, ok)
        except KeyboardInterrupt:
            self.steps.append({"step": "-", "key": "interrupted", "title": "Ctrl-C", "outcome": "failed: interrupted",
                               "seconds": 0.0})
            ok = False
        finally:
            failed = self.teardown()
            if failed:
                self.steps.append({"step": "-", "key": "teardown", "title": "Tear everything down",
                                   "outcome": "failed: " + "; ".join(failed), "seconds": 0.0})
                ok = False
            written = report.write(r, self.steps, ok)
        return 0 if written["ok"] else 1

    def do(self, number: str, key: str, title: str, fn, previous_ok: bool) -> bool:
        """Runs fn(run) as step `number` unless an earlier one failed; records its outcome."""
        entry = {"step": number, "key": key, "title": title}
        if not previous_ok:
            entry.update(outcome="skipped (an earlier step failed)", seconds=0.0)
            self.steps.append(entry)
            return False
        print(f"[{self.r.elapsed():6.1f} s] step {number}: {title} ...", flush=True)
        t0 = time.monotonic()
        try:
            detail = fn(self.r) or {}
            entry.update(outcome="ok", detail=detail)
        except STEP_ERRORS as err:
            entry.update(outcome=f"failed: {err}")
        except Exception as err:  # noqa: BLE001 - a bug here; reported, and teardown still runs
            traceback.print_exc()
            entry.update(outcome=f"failed: {type(err).__name__}: {err}")
        entry["seconds"] = round(time.monotonic() - t0, 2)
        print(f"[{self.r.elapsed():6.1f} s]   {entry['outcome']}", flush=True)
        self.steps.append(entry)
        return entry["outcome"] == "ok"

    def teardown(self) -> list[str]:
        print(f"[{self.r.elapsed():6.1f} s] tearing down", flush=True)
        if self.r.stubs is not None:
            self.r.stubs.close()
        return self.r.lab.teardown()


def prerequisites() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, Open vSwitch, setpriv)"
    for tool in ("ovs-vsctl", "ovs-ofctl", "setpriv", "prlimit", "ip", "nft", "dpkg-deb", "cpack", "systemd-analyze",
                 "prometheus"):
        if shutil.which(tool) is None:
            return f"{tool} not found (make deps)"
    return None


def stop_signal(text: str) -> int:
    name = text.upper().removeprefix("SIG")
    if name not in ("TERM", "KILL"):
        raise argparse.ArgumentTypeError(f"want TERM or KILL, got {text!r}")
    return int(getattr(signal, "SIG" + name))


def _sigterm_as_interrupt(*_):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "results" / "rehearsal.json")
    ap.add_argument("--config", type=Path, default=HERE / "cluster.yaml",
                    help="the cluster config to deploy (@ROOT@ stands for the scratch root)")
    ap.add_argument("--deb", type=Path, default=None, help="use this .deb instead of building one with cpack")
    ap.add_argument("--build", default=os.environ.get("EXO_BUILD", str(REPO / "build")), help="CMake build dir")
    ap.add_argument("--restart-signal", type=stop_signal,
                    default=int(signal.SIGTERM), metavar="TERM|KILL",
                    help="how each service is stopped before its restart: TERM as systemctl restart does "
                         "(default), KILL for a crash")
    ap.add_argument("--work", type=Path, default=Path("/tmp/exo-rehearsal"), help="scratch root, logs")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    why = prerequisites()
    if why:
        print(f"rehearsal: {why}", file=sys.stderr)
        return 2
    # Ctrl-C and SIGTERM both end in run()'s teardown; SIGINT explicitly, since a shell that
    # starts us in the background leaves it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    return Rehearsal(args).run()


if __name__ == "__main__":
    sys.exit(main())
