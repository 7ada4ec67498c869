"""What one rehearsal run holds and its steps share: the stand-in rack's names and addresses, the
scratch root, the lab (everything made, for teardown), the cluster config, the running services,
and the figures the report is made of. The step modules (install, rack, switch, services,
metrics, checks) read and fill it; main.py creates it, runs the steps and writes the report.
"""
from __future__ import annotations

import time
from pathlib import Path

from launcher import Service
from netlab import Lab

PREFIX = "exo-rh"              # namespaces exo-rh-<machine>, bridges exo-rh and exo-rh-m
SWITCH_BRIDGE = "exo-rh"
MGMT_BRIDGE = "exo-rh-m"
ADMIN_IP = "172.30.0.254"      # the admin host (root namespace): operator tools, Prometheus, the switch's mgmt port
MGMT_PREFIX_LEN = 24
CONTROLLER_HOST = "ctl"        # the controller's machine (namespace exo-rh-ctl)
SERVICE_USER = "exo"
READY_TIMEOUT = 30.0
UNIT_FILES = ("exo-controller.service", "exo-cache-node@.service", "exo-db-node@.service", "exo-proxy.service")


class StepFailed(RuntimeError):
    pass


def wait_for(check, what: str, timeout: float = READY_TIMEOUT, alive=None) -> float:
    """Polls check() until true; returns the seconds it took. alive(): raises if a process died.
    An exception from check() means "not ready yet"; the last one is named if it times out."""
    t0 = time.monotonic()
    last = ""
    while time.monotonic() - t0 < timeout:
        if alive is not None:
            alive()
        try:
            if check():
                return time.monotonic() - t0
            last = ""
        except Exception as err:  # noqa: BLE001 - not ready yet (connection refused, ...); kept for the message
            last = f" (last: {type(err).__name__}: {err})"
        time.sleep(0.2)
    raise StepFailed(f"timed out after {timeout:.0f} s waiting for {what}{last}")


class Run:
    def __init__(self, args):
        self.args = args
        self.work: Path = args.work
        self.root = self.work / "root"       # stands in for "/" of every machine
        self.lab = Lab(PREFIX)
        self.services: dict[str, Service] = {}
        self.cfg = None
        self.stubs = None                    # exo_topo.grpc_clients.Stubs, from step 6 on
        self.prometheus = None               # exo_topo.prometheus.PrometheusServer, from step 10 on
        self.deb: Path | None = None
        self.deb_files: list[str] = []
        self.summary: dict = {"ops": 0, "errors": 0, "acked": 0, "bad_reads": 0, "lost_acked_writes": None}
        self.tls_checks: dict[str, bool] = {}
        self.metrics: dict = {}
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def rendered_config(self, write_to: Path) -> Path:
        """The --config file with @ROOT@ replaced by the scratch root, written to `write_to`."""
        text = self.args.config.read_text().replace("@ROOT@", str(self.root))
        write_to.parent.mkdir(parents=True, exist_ok=True)
        write_to.write_text(text)
        return write_to

    def add_ops(self, out: dict) -> None:
        """A workload run's figures (workload.py's JSON line) into the totals."""
        for k in ("ops", "errors", "acked", "bad_reads"):
            self.summary[k] += out.get(k, 0)

    def installed(self, path: str) -> str:
        """An installed file's path in the scratch root: "/usr/bin/exo" -> "<root>/usr/bin/exo"."""
        return str(self.root / path.lstrip("/"))
