"""Controller failover, step 9a of docs/design/replication.md (5.1, 5.4): two controller
instances and one etcd; the switch connects to both with OpenFlow 1.3 roles. kill -9 the master
under light load: the standby takes over within 1 s (takeover_s: kill -> its first
AddCacheRules confirmed by the switch, which needs ROLE_REPLY(MASTER), the table adopted and a
flow-mod barrier-confirmed), no flow is flushed (every flow's duration keeps growing), and a
Cache through a cache node (its AddCacheRules goes to the new master) succeeds afterwards.
Known-bad: a flow-mod the standby sends (--standby-writes, TESTS ONLY) is refused IS_SLAVE.
Results: results/controller_failover.json and a printed table."""
from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from exo_topo.cluster import EmulatedCluster
from exo_common.config import parse_config
from exo_topo.configgen import emulation_config_dict
from exo_topo.takeover import TakeoverProbe, flow_durations, flushed
from exoproto import control_pb2 as pb

from .helpers import cache_for

pytestmark = pytest.mark.mininet
RUN_DIR = Path("/tmp/exo/test/test_controller_failover")
RESULTS = Path(__file__).resolve().parents[2] / "results" / "controller_failover.json"
IS_SLAVE = "ofp_error OFPET_BAD_REQUEST(1)/OFPBRC_IS_SLAVE(10)"
TAKEOVER_LIMIT_S = 1.0


def ping_load(cl, keys, stop: threading.Event, outcome: dict) -> None:
    """Light load: GETs of a few keys, one at a time."""
    with cl.client("client0", timeout=0.2) as c:
        while not stop.is_set():
            for k in keys:
                try:
                    c.get(k)
                    outcome["ok"] += 1
                except Exception:  # noqa: BLE001 - counted, the test reports the share
                    outcome["failed"] += 1
            time.sleep(0.005)


@pytest.fixture(scope="module")
def failover_cluster():
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    data = emulation_config_dict(n_cache=2, n_db=2, n_clients=1, run_dir=RUN_DIR, cache_fill={"enabled": False})
    # Per-instance addresses replace the single controller's (config.py refuses both at once).
    data["controller"] = {
        "etcd": ["https://127.0.0.1:2379"],  # the emulation's own etcd replaces it (controller_group.py)
        "lease_ttl_s": 1, "failover_probe_ms": 100,
        "instances": [{"name": "c1", "openflow_port": 6671, "grpc": f"unix:{RUN_DIR}/ctl-c1.sock"},
                      {"name": "c2", "openflow_port": 6672, "grpc": f"unix:{RUN_DIR}/ctl-c2.sock"}]}
    cfg = parse_config(data, "<test_controller_failover>")
    with EmulatedCluster(cfg, RUN_DIR, controller_args=["--standby-writes"]) as cl:
        yield cl


def wait_master(group, timeout=20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = group.master()
        if m is not None:
            return m
        time.sleep(0.1)
    raise AssertionError(f"no controller instance became master within {timeout}s")


def test_kill_the_master_the_standby_takes_over(failover_cluster):
    cl = failover_cluster
    cfg, group = cl.cfg, cl.group
    master = wait_master(group)
    standby = next(n for n in group.procs if n != master)
    # Known-bad: the standby's one flow-mod was refused by the switch (it is SLAVE).
    deadline = time.monotonic() + 5
    while group.stats(standby).get(IS_SLAVE, 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    standby_is_slave = group.stats(standby).get(IS_SLAVE, 0)
    assert standby_is_slave >= 1, "the standby's flow-mod was not refused IS_SLAVE: it is not SLAVE"
    assert group.stats(master).get(IS_SLAVE, 0) == 0

    # A rule the old master installed, through a cache node.
    key_a, key_b = b"failover-a", b"failover-b"
    with cl.client("client0") as c:
        for k in (b"load1", b"load2", key_a, key_b):
            c.set(k, b"v-" + k)
    node_a = cache_for(cfg, key_a)
    rep = cl.stubs.cache(node_a).Cache(pb.KeysRequest(keys=[key_a]), timeout=15)
    assert rep.done == 1 and not rep.error, rep

    stop, load = threading.Event(), {"ok": 0, "failed": 0}
    loader = threading.Thread(target=ping_load, args=(cl, [b"load1", b"load2", key_a], stop, load), daemon=True)
    loader.start()
    time.sleep(0.5)
    before = flow_durations(cfg.switch.bridge)

    # The survivor, called directly as cache node node_a would (its certificate): the first
    # AddCacheRules it confirms marks the takeover (exo_topo.takeover, shared with the chaos
    # fault kill_master_controller).
    probe = TakeoverProbe(cfg, node_a, standby)
    refused_before = int(probe.refused_as_standby(master))

    t_kill = time.monotonic()
    group.kill(master)
    took = probe.measure(t_kill, lambda: group.stats(standby, 0.5))
    add_s, role_s, attempts = took["takeover_s"], took["role_master_s"], took["add_attempts"]
    time.sleep(0.3)
    after = flow_durations(cfg.switch.bridge)
    stop.set()
    loader.join(5)

    # No flush: every flow that was there is still there and older than before.
    gone, reset = flushed(before, after)
    # And a cache node's Cache goes to the new master (its controller list, peers.cc).
    node_b = cache_for(cfg, key_b)
    rep_b = cl.stubs.cache(node_b).Cache(pb.KeysRequest(keys=[key_b]), timeout=15)
    new = group.stats(standby)
    probe.remove()
    probe.close()

    result = {"master": master, "standby": standby, "takeover_s": add_s, "role_master_s": role_s,
              "takeover_limit_s": TAKEOVER_LIMIT_S, "add_attempts": attempts,
              "standby_refused_before": refused_before, "standby_is_slave_errors": standby_is_slave,
              "flows_before": len(before), "flows_gone": len(gone), "flows_duration_reset": len(reset),
              "cache_after_done": rep_b.done, "cache_after_error": rep_b.error,
              "leader_revokes": new.get("leader_revokes", 0), "switch_tables_kept": new.get("switch_tables_kept", 0),
              "switch_tables_flushed": new.get("switch_tables_flushed", 0),
              "load_gets_ok": load["ok"], "load_gets_failed": load["failed"]}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print("\ncontroller failover (kill -9 the master)")
    for k, v in result.items():
        print(f"  {k:26} {v if not isinstance(v, float) else f'{v:.3f}'}")

    assert add_s is not None, f"no AddCacheRules confirmed by {standby} within 10 s of the kill"
    assert add_s < TAKEOVER_LIMIT_S, f"takeover_s {add_s:.3f} >= {TAKEOVER_LIMIT_S}"
    assert result["leader_revokes"] >= 1, "the standby did not revoke the dead master's lease"
    assert not gone and not reset, f"flushed: gone {gone[:5]}, duration reset {reset[:5]}"
    assert new.get("switch_tables_flushed", 0) == 0 and new.get("switch_tables_kept", 0) >= 1
    assert rep_b.done == 1 and not rep_b.error, rep_b
