"""Run workload workers (python -m exo_harness.workload) in client hosts and follow their
JSON-lines progress, so the CLI can draw one progress bar for all of them."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from exo_topo.cluster import EmulatedCluster


class Workers:
    def __init__(self, cluster: EmulatedCluster, phase: str):
        self.cluster = cluster
        self.phase = phase
        self.procs: dict[str, subprocess.Popen] = {}
        self.outs: dict[str, Path] = {}
        self.progress: dict[str, dict] = {}
        self._threads: list[threading.Thread] = []

    def start(self, client: str, mode_args: list[str], window: int = 16) -> None:
        cfg = self.cluster.cfg
        node = cfg.node(client)
        out = self.cluster.run_dir / f"{self.phase}-{client}.json"
        out.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "exo_harness.workload", "--iface", node.interface,
               "--out", str(out), "--window", str(window), "--mtu", str(cfg.cluster.mtu),
               "--udp-port", str(cfg.cluster.udp_port), "--service-ip", cfg.cluster.service_ip,
               "--seed", str(len(self.procs) + 1), *mode_args]
        proc = self.cluster.popen_in(client, cmd, f"{self.phase}-{client}", stdout=subprocess.PIPE)
        self.procs[client] = proc
        self.outs[client] = out
        self.progress[client] = {}
        t = threading.Thread(target=self._follow, args=(client, proc), daemon=True)
        t.start()
        self._threads.append(t)

    def _follow(self, client: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                self.progress[client] = {**self.progress[client], **json.loads(line)}
            except ValueError:
                pass

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs.values())

    def results(self, timeout: float = 60.0) -> dict[str, dict]:
        out = {}
        for client, proc in self.procs.items():
            rc = proc.wait(timeout=timeout)
            if rc != 0 or not self.outs[client].exists():
                log = self.cluster.run_dir / f"{self.phase}-{client}.log"
                raise RuntimeError(f"workload on {client} failed (exit {rc}); see {log}")
            out[client] = json.loads(self.outs[client].read_text())
        for t in self._threads:
            t.join(timeout=5)
        return out

    def kill(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
