"""The Prometheus scrape config of a cluster (exo_topo.prometheus.scrape_config, printed by
`exo config prometheus FILE`): one target per metrics address, named by `instance`, and a file
Prometheus' own checker (`promtool check config`) accepts. The emulation's test
(tests/integration/test_prometheus.py) and the deployment rehearsal (scripts/rehearsal/metrics.py)
run Prometheus on it."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest_ci import missing_or_fail
from exo_common.config import load_config
from exo_topo.prometheus import duration, scrape_config, target_count, up_by_instance

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "demo.yaml"


def instances(conf: dict) -> dict[str, tuple[str, str]]:
    """instance -> (job, address)."""
    return {sc["labels"]["instance"]: (job["job_name"], sc["targets"][0])
            for job in conf["scrape_configs"] for sc in job["static_configs"]}


def promtool_check_config(conf: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    if shutil.which("promtool") is None:
        missing_or_fail("promtool is missing (Debian package prometheus: scripts/install-deps.sh)")
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(conf, sort_keys=False))
    return subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True, timeout=30)


def test_every_metrics_address_is_one_target_of_its_kind_of_component():
    cfg = load_config(DEMO)
    conf = scrape_config(cfg)
    want = {"controller": ("exo-controller", cfg.controller.metrics)}
    want.update({n.name: ("exo-cache", n.metrics) for n in cfg.cache_nodes if n.metrics})
    want.update({n.name: ("exo-db", n.metrics) for n in cfg.db_nodes if n.metrics})
    want.update({p.name: ("exo-proxy", p.metrics) for p in cfg.proxies if p.metrics})
    assert len(want) > 3 and instances(conf) == want
    assert target_count(conf) == len(want)
    assert conf["global"]["external_labels"] == {"cluster": cfg.cluster.name}


def test_promtool_accepts_the_config_and_rejects_a_broken_one(tmp_path):
    conf = scrape_config(load_config(DEMO), interval_s=0.5)
    good = promtool_check_config(conf, tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    conf["global"]["scrape_interval"] = "0.5s"  # what "{:g}s" used to write: not a Prometheus duration
    bad = promtool_check_config(conf, tmp_path)
    assert bad.returncode != 0 and "0.5s" in bad.stdout + bad.stderr


def test_durations_are_whole_numbers_as_prometheus_wants():
    assert [duration(s) for s in (1, 5.0, 15, 0.5, 0.25, 3600)] == ["1s", "5s", "15s", "500ms", "250ms", "3600s"]
    with pytest.raises(ValueError, match="at least 1 ms"):
        duration(0)


def test_up_by_instance_reads_the_targets_api():
    active = [{"labels": {"instance": "cache0"}, "scrapeUrl": "http://a/metrics", "health": "up"},
              {"labels": {"instance": "db0"}, "scrapeUrl": "http://b/metrics", "health": "down"},
              {"labels": {}, "scrapeUrl": "http://c/metrics", "health": "unknown"}]
    assert up_by_instance(active) == {"cache0": 1, "db0": 0, "http://c/metrics": 0}


def test_exo_config_prometheus_prints_it_and_refuses_a_bad_interval():
    cmd = [sys.executable, "-m", "exo_cli.main", "config", "prometheus", str(DEMO)]
    res = subprocess.run([*cmd, "--interval", "2"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert yaml.safe_load(res.stdout) == scrape_config(load_config(DEMO), 2)
    for interval in ("-1", "0.0001"):
        bad = subprocess.run([*cmd, "--interval", interval], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and "--interval" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
