"""The rule limiter's checker rejects a known-bad controller (issue 11, item 4).

A few hundred keys are cached at once through the Cache RPC on a cluster with R = 50, once with
the controller as shipped and once with `--fault no-rate-limit` (the limiter off). The switch's
own record (exo_topo.switch_audit: ovs-vswitchd's snoop copy of the controller connection and
its flow monitor) must show the shipped controller at most R Ruleset 2 flow-mods in any second,
running at the full rate, and the broken one well above R; in both runs the switch's record and
the controller's journal must agree flow-mod for flow-mod.
"""
from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from exo_topo.cluster import EmulatedCluster
from exo_topo.configgen import emulation_config
from exo_topo.switch_audit import RuleAudit, audit_problems
from exoproto import control_pb2 as pb
from exoskeleton import wire
from exoskeleton.client import Request

from .helpers import cache_for

pytestmark = pytest.mark.mininet

N_KEYS = 300
R = 50
RESULTS = Path(__file__).resolve().parents[2] / "results"


def cache_at_once(cl, fault):
    with cl.client("client0", window=32) as c:
        c.execute([Request(wire.OP_PUT, b"rl:%d" % i, b"v%d" % i) for i in range(N_KEYS)], timeout=5.0)
    by_node = defaultdict(list)
    for i in range(N_KEYS):
        key = b"rl:%d" % i
        by_node[cache_for(cl.cfg, key)].append(key)
    with RuleAudit(cl, name=f"audit-{fault or 'shipped'}") as audit:
        for node, keys in sorted(by_node.items()):
            rep = cl.stubs.cache(node).Cache(pb.KeysRequest(keys=keys), timeout=60)
            assert rep.done == len(keys), (node, rep)
    return audit.result


@pytest.mark.parametrize("fault", [None, "no-rate-limit"])
def test_switch_record_rejects_a_controller_without_rate_limit(fault):
    run_dir = Path(f"/tmp/exo/test/rule_limit_{fault or 'shipped'}")
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = emulation_config(n_cache=2, n_db=2, n_clients=1, run_dir=run_dir,
                           controller={"openflow_port": 6671 if fault else 6670},
                           cache_fill={"enabled": False}, switch={"rule_update_rate": R})
    args = ["--fault", fault] if fault else []
    with EmulatedCluster(cfg, run_dir, controller_args=args) as cl:
        res = cache_at_once(cl, fault)
        stats = cl.stubs.controller_stats()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"rule_limit_audit-{fault or 'shipped'}.json").write_text(json.dumps(res, indent=1) + "\n")
    ctl, sw, agree = res["controller"], res["switch"], res["agreement"]
    problems = audit_problems(res, R, cfg.switch.cache_rule_capacity)

    # Both records are complete and agree, whichever controller ran.
    assert sw["flow_mods"] == ctl["flow_mods"] == N_KEYS, res
    assert agree["matched"] == N_KEYS and agree["missing_at_switch"] == agree["unknown_to_controller"] == 0
    assert sw["record_complete"] and sw["ruleset2_at_end"] == sw["ruleset2_dumped_at_end"] == N_KEYS
    assert sw["ruleset2_max"] == ctl["ruleset2_max"] == N_KEYS
    assert stats["fault_no_rate_limit"] == (1 if fault else 0)
    if fault is None:
        assert problems == [], problems
        # The bound is met at full speed, not by idling: 300 adds take about 6 s at R = 50.
        assert R - 5 <= sw["rule_updates_per_s_max"] <= R
        assert res["window_s"] >= (N_KEYS - R) / R
    else:
        assert sw["rule_updates_per_s_max"] > 2 * R, res
        assert any(p.startswith("switch received") for p in problems), problems
