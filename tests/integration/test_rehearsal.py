"""`make rehearsal` as a test (docs/deploy.md, "The rehearsal"): the .deb built and unpacked, the
guide's steps on namespaces and an OVS bridge, every service from its installed unit, TLS on,
Prometheus scraping, every service restarted under a memcached workload, nothing acknowledged
lost. ~1 min. The rehearsal's JSON goes to the test's temp dir, its logs to /tmp/exo-rehearsal-test."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.mininet
def test_rehearsal_follows_the_deploy_guide_and_loses_nothing(tmp_path):
    out = tmp_path / "rehearsal.json"
    # Not under tmp_path: pytest's directory is private to root, and the services run as `exo`.
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "rehearsal" / "main.py"), "--out", str(out),
                          "--work", "/tmp/exo-rehearsal-test"], capture_output=True, text=True, timeout=600)
    print(res.stdout[-4000:], res.stderr[-2000:])
    assert out.exists(), res.stderr
    report = json.loads(out.read_text())
    failed = [s for s in report["steps"] if s["outcome"] != "ok"]
    assert not failed, failed
    assert res.returncode == 0
    assert report["tls"] is True
    assert report["lost_acked_writes"] == 0 and report["bad_reads"] == 0
    assert report["acked_writes"] > 100
    assert [s["key"] for s in report["steps"] if s["step"] not in ("0", "check")] == [
        "install", "config", "certs", "firewall", "switch", "controller", "db_nodes", "cache_nodes", "proxies",
        "metrics", "smoke"]
    # every service ran twice (its start and its restart), from the installed units
    assert {n: s["starts"] for n, s in report["services"].items()} == {
        "exo-controller.service": 2, "exo-db-node@db0.service": 2, "exo-db-node@db1.service": 2,
        "exo-cache-node@cache0.service": 2, "exo-proxy.service": 2}
