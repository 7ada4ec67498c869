"""A real Prometheus server (Debian's `prometheus`) scraping a cluster's /metrics listeners
(docs/operations.md, "Metrics"), and queries through its HTTP API.

    scrape_config(cfg)  -> the prometheus.yml contents (pure): one job per kind of component,
                           exo-controller, exo-cache, exo-db, exo-proxy; each target's
                           `instance` label is the component's name (`exo config prometheus
                           FILE` prints it, for a deployment's Prometheus: docs/deploy.md)
    with PrometheusServer(cfg, run_dir) as prom:    # started in the root namespace
        prom.wait_targets_up(timeout=20)
        prom.query('sum(rate(exo_cache_hits_total[30s]))')

Used by tests/integration/test_prometheus.py (an emulated cluster) and by the deployment
rehearsal (scripts/rehearsal/metrics.py, which runs the scrape config the installed `exo`
printed). The server, its TSDB and its log live under run_dir; it is stopped (and waited for) on
exit, also on an exception or Ctrl-C.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Optional

import yaml

from .lifecycle import StartStop
from .process import terminate

JOBS = ("exo-controller", "exo-cache", "exo-db", "exo-proxy")


class PrometheusError(RuntimeError):
    pass


def targets(cfg) -> dict[str, list[tuple[str, str]]]:
    """job -> [(component name, metrics address)] of every component with a metrics address."""
    out: dict[str, list[tuple[str, str]]] = {job: [] for job in JOBS}
    if cfg.controller.metrics:
        out["exo-controller"].append(("controller", cfg.controller.metrics))
    out["exo-cache"] += [(n.name, n.metrics) for n in cfg.cache_nodes if n.metrics]
    out["exo-db"] += [(n.name, n.metrics) for n in cfg.db_nodes if n.metrics]
    out["exo-proxy"] += [(p.name, p.metrics) for p in cfg.proxies if p.metrics]
    return {job: t for job, t in out.items() if t}


def duration(seconds: float) -> str:
    """Seconds as a Prometheus duration, which takes whole numbers only: 5 -> "5s", 0.5 -> "500ms"."""
    ms = round(seconds * 1000)
    if ms < 1:
        raise ValueError(f"{seconds!r} s: a scrape interval must be at least 1 ms")
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def scrape_config(cfg, interval_s: float = 5.0) -> dict:
    """prometheus.yml as a dict: every component's /metrics, `instance` = its name."""
    iv = duration(interval_s)
    return {
        "global": {"scrape_interval": iv, "scrape_timeout": iv, "evaluation_interval": iv,
                   "external_labels": {"cluster": cfg.cluster.name}},
        "scrape_configs": [
            {"job_name": job, "metrics_path": "/metrics",
             "static_configs": [{"targets": [addr], "labels": {"instance": name}} for name, addr in ts]}
            for job, ts in targets(cfg).items()],
    }


def target_count(scrape: dict) -> int:
    """How many targets a prometheus.yml (as a dict) scrapes."""
    return sum(len(sc.get("targets", [])) for job in scrape.get("scrape_configs", [])
               for sc in job.get("static_configs", []))


def up_by_instance(active_targets: list[dict]) -> dict[str, int]:
    """/api/v1/targets' activeTargets -> {instance label: 1 if its last scrape worked, else 0}."""
    return {t["labels"].get("instance", t["scrapeUrl"]): int(t["health"] == "up") for t in active_targets}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrometheusServer(StartStop):
    def __init__(self, cfg, run_dir: str | Path, interval_s: float = 1.0, binary: Optional[str] = None,
                 scrape: Optional[dict] = None):
        """scrape: the prometheus.yml to run, as a dict (default: scrape_config(cfg, interval_s))."""
        self.cfg = cfg
        self.dir = Path(run_dir) / "prometheus"
        self.scrape = scrape if scrape is not None else scrape_config(cfg, interval_s)
        self.binary = binary or shutil.which("prometheus")
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        if self.binary is None:
            raise PrometheusError("prometheus is not installed (Debian package prometheus: scripts/install-deps.sh)")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        config = self.dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.scrape, sort_keys=False))
        self.port = _free_port()
        self._log = open(self.dir / "prometheus.log", "ab")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not self._ready():
            if self.proc.poll() is not None:
                raise PrometheusError(f"prometheus exited with {self.proc.returncode}: see {self.dir / 'prometheus.log'}")
            if time.monotonic() > deadline:
                raise PrometheusError(f"prometheus not ready on {self.url} within 30 s")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc, "prometheus", grace=10.0)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def api(self, path: str, **params) -> dict:
        """GET /api/v1/<path>; the `data` of a success, else PrometheusError with its error."""
        url = f"{self.url}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as err:  # Prometheus' API errors come as 4xx/5xx with a JSON body
            try:
                body = json.load(err)
            except ValueError:
                raise PrometheusError(f"{path} {params}: HTTP {err.code} {err.reason}") from None
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, promql: str, at: Optional[float] = None) -> dict:
        """An instant query: {"resultType": ..., "result": [...]}."""
        return self.api("query", query=promql, **({"time": f"{at:.3f}"} if at is not None else {}))

    def targets(self) -> list[dict]:
        return self.api("targets")["activeTargets"]

    def wait_targets_up(self, timeout: float = 30.0) -> list[dict]:
        """Until every configured target has been scraped successfully; PrometheusError naming
        the ones that are not up (with their last error) after `timeout`."""
        want = target_count(self.scrape)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise PrometheusError(f"prometheus is not running: see {self.dir / 'prometheus.log'}")
            ts = self.targets()
            if len(ts) == want and all(t["health"] == "up" for t in ts):
                return ts
            if time.monotonic() > deadline:
                bad = [f"{t['labels'].get('instance')} ({t['scrapeUrl']}): {t['health']} {t['lastError']}"
                       for t in ts if t["health"] != "up"]
                raise PrometheusError(f"{len(ts)}/{want} targets, not up: {bad}")
            time.sleep(0.5)
