"""`exo demo`, shortened: it runs end to end and writes every field results/demo.json promises."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exo_common.config import load_config

pytestmark = pytest.mark.mininet
REPO = Path(__file__).resolve().parents[2]


def test_short_demo_writes_its_results(tmp_path: Path):
    out = tmp_path / "demo.json"
    proc = subprocess.run(
        [sys.executable, "-m", "exo_cli.main", "demo", "--keys", "3000",
         "--duration", "10", "--out", str(out), "--run-dir", str(tmp_path / "run")],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    s = json.loads(out.read_text())
    for field in ("ops", "errors", "gets", "gets_from_cache", "per_node", "latency_us", "flows",
                  "cache_fill_s", "rule_updates_per_s_max", "ruleset2_max", "series",
                  "switch_rule_updates_per_s_max", "switch_ruleset2_max", "rule_updates_per_s_max_lifetime",
                  "ruleset2_max_lifetime", "rule_audit", "rule_audit_problems"):
        assert field in s, field
    assert s["ops"] > 1000 and s["errors"] == 0
    assert 0 < s["gets_from_cache"] < s["gets"]
    # node counters and reply flags agree (a resent GET may be counted twice by the node)
    assert abs(s["gets_from_cache"] - s["gets_from_cache_reply_flag"]) <= 0.01 * s["gets"]
    assert set(s["per_node"]) == {"cache0", "cache1", "db0", "db1", "db2", "db3"}
    assert all(v > 0 for v in s["per_node"].values())
    assert s["latency_us"]["p50"] <= s["latency_us"]["p99"]
    # the clients ran the native hot path (make build builds it), and GET latency is split by
    # who answered: both sources answered some GETs
    assert s["client_native"] is True
    for src in ("cache", "db"):
        v = s[f"latency_us_{src}"]
        assert v["gets"] > 0 and v["p50"] <= v["p99"], (src, v)
    assert s["latency_us_cache"]["gets"] + s["latency_us_db"]["gets"] <= s["gets"]
    # The caches started empty and filled themselves, within the switch's limits.
    assert s["cached_hot_keys"] == {}
    # configs/demo.yaml: 4 db nodes, so replication.factor auto is 3: two Ruleset 3 rules per
    # slot (reads to the read server, writes to the head) over 2^8 slots.
    assert s["replication_factor"] == load_config(REPO / "configs" / "demo.yaml").replication.factor == 3
    assert s["flows"]["ruleset1"] == 9 and s["flows"]["ruleset3"] == 2 * 256
    # Ruleset 2 during the run, by the switch's own record (exo_topo.switch_audit), which agrees
    # flow-mod for flow-mod with the controller's journal (a broken limiter fails this:
    # test_rule_limit_audit.py)
    audit = s["rule_audit"]
    assert s["rule_audit_problems"] == [], s["rule_audit_problems"]
    assert 0 < s["switch_rule_updates_per_s_max"] <= s["rule_update_rate"]
    assert 0 < audit["switch"]["ruleset2_at_end"] <= s["switch_ruleset2_max"] <= s["cache_rule_capacity"]
    assert audit["agreement"]["matched"] == audit["controller"]["flow_mods"] == audit["switch"]["flow_mods"] > 0
    assert 0 < s["flows"]["ruleset2"] <= s["cache_rule_capacity"]
    # the lifetime figures include the start-up programming of Rulesets 1 and 3
    assert s["rule_updates_per_s_max"] <= s["rule_updates_per_s_max_lifetime"] <= s["rule_update_rate"]
    assert s["ruleset2_max"] <= s["ruleset2_max_lifetime"]
    assert s["cache_fill_s"] is not None and 0 < s["cache_fill_s"] < 10
    assert len(s["series"]) >= 10
