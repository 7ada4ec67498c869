"""A cluster that fails half-way leaves nothing behind: no bridge, no node processes, no
Mininet hosts, no network namespaces."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from exo_common.config import parse_config
from exo_topo.cluster import ClusterStartError, EmulatedCluster
from exo_topo.configgen import emulation_config, emulation_config_dict

pytestmark = pytest.mark.mininet


def leftovers(bridge: str) -> list[str]:
    found = []
    bridges = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True).stdout.split()
    if bridge in bridges:
        found.append(f"bridge {bridge}")
    for pattern in ("exo-db-node", "exo-cache-node", "exo_controller", "mininet:"):
        pg = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
        if pg.returncode == 0:
            found.append(f"process {pg.stdout.strip()}")
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.strip()
    if netns:
        found.append(f"netns {netns}")
    return found


def test_failure_inside_a_running_cluster_tears_everything_down(tmp_path: Path):
    cfg = emulation_config(n_cache=1, n_db=1, n_clients=1, run_dir=tmp_path / "run",
                           controller={"openflow_port": 6664}, switch={"bridge": "exo-td"})
    with pytest.raises(RuntimeError, match="boom"):
        with EmulatedCluster(cfg, tmp_path / "run") as cl:
            with cl.client() as c:
                c.set(b"k", b"v")
                assert c.get(b"k") == b"v"
            raise RuntimeError("boom")
    assert leftovers("exo-td") == []


def test_node_that_fails_to_start_tears_everything_down(tmp_path: Path):
    """The cache node gets an lcore this machine does not have, so DPDK refuses to start
    after the controller, switch, hosts and db node are already up."""
    d = emulation_config_dict(n_cache=1, n_db=1, n_clients=1, run_dir=tmp_path / "run",
                              controller={"openflow_port": 6665}, switch={"bridge": "exo-tf"})
    d["cache_nodes"][0]["lcores"] = "63"
    cfg = parse_config(d)
    with pytest.raises(ClusterStartError, match="cache0 exited"):
        with EmulatedCluster(cfg, tmp_path / "run", start_timeout=30):
            pass
    assert leftovers("exo-tf") == []
