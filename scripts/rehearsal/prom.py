"""Prometheus for the rehearsal: the scrape config an operator would write (targets = every
`metrics` address of the cluster config), a real Debian `prometheus` server run on it, and its
HTTP API asked which targets are up.

scrape_config(cfg) is pure and is the file docs/deploy.md shows; Prometheus runs in the root
namespace, which reaches every machine's metrics address over the management bridge.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml


def targets(cfg) -> dict[str, str]:
    """component name -> its metrics address, for every component that has one."""
    out = {}
    if cfg.controller.metrics:
        out["controller"] = cfg.controller.metrics
    for group in (cfg.cache_nodes, cfg.db_nodes, cfg.proxies):
        out.update({n.name: n.metrics for n in group if n.metrics})
    return out


def scrape_config(cfg, interval_s: int = 1) -> dict:
    """prometheus.yml: one job, one target per component, labelled with its name."""
    return {
        "global": {"scrape_interval": f"{interval_s}s", "evaluation_interval": f"{interval_s}s"},
        "scrape_configs": [{
            "job_name": f"exo-{cfg.cluster.name}",
            "static_configs": [{"targets": [addr], "labels": {"component": name}}
                               for name, addr in targets(cfg).items()],
        }],
    }


class Prometheus:
    def __init__(self, cfg, work: Path, listen: str = "127.0.0.1:19090"):
        self.cfg, self.work, self.listen = cfg, work, listen
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        exe = shutil.which("prometheus")
        if exe is None:
            raise RuntimeError("prometheus is not installed (Debian package prometheus; make deps)")
        self.work.mkdir(parents=True, exist_ok=True)
        conf = self.work / "prometheus.yml"
        conf.write_text(yaml.safe_dump(scrape_config(self.cfg), sort_keys=False))
        log = open(self.work / "prometheus.log", "ab")
        self.proc = subprocess.Popen([exe, f"--config.file={conf}", f"--storage.tsdb.path={self.work / 'data'}",
                                      f"--web.listen-address={self.listen}"], stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def query(self, promql: str) -> list[dict]:
        url = f"http://{self.listen}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=3) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"query {promql!r}: {body}")
        return body["data"]["result"]

    def wait_up(self, timeout: float = 20.0) -> dict[str, int]:
        """component -> 1/0 from the `up` series once every target reports 1, or at the deadline."""
        want = set(targets(self.cfg))
        deadline = time.monotonic() + timeout
        up: dict[str, int] = {}
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode} (log {self.work / 'prometheus.log'})")
            try:
                up = {r["metric"].get("component", "?"): int(float(r["value"][1])) for r in self.query("up")}
            except OSError:
                up = {}
            if set(up) >= want and all(up[n] == 1 for n in want):
                break
            time.sleep(0.5)
        return up

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None


def main(argv: list[str] | None = None) -> int:
    """python scripts/rehearsal/prom.py --config cluster.yaml: prints prometheus.yml for the cluster."""
    import argparse
    import sys
    ap = argparse.ArgumentParser(description="print the Prometheus scrape config of a cluster")
    ap.add_argument("--config", required=True)
    ap.add_argument("--interval", type=int, default=15, help="scrape interval, seconds")
    args = ap.parse_args(argv)
    try:
        import exo_common  # noqa: F401
    except ImportError:  # a machine with the .deb only: its private Python tree
        sys.path.append("/usr/lib/exoskeleton/python")
    from exo_common.config import ConfigError, load_config
    try:
        cfg = load_config(args.config)
    except ConfigError as err:
        print(f"prom: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump(scrape_config(cfg, args.interval), sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
