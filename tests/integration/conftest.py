"""A small real cluster (OVS userspace switch, os-ken controller, DPDK cache nodes, RocksDB db
nodes, one client host) shared by the tests of a module, always torn down."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from exo_topo.cluster import EmulatedCluster
from exo_topo.configgen import emulation_config

RUN_ROOT = Path("/tmp/exo/test")


@pytest.fixture(scope="module")
def cluster(request):
    run_dir = RUN_ROOT / request.module.__name__.rsplit(".", 1)[-1]
    shutil.rmtree(run_dir, ignore_errors=True)
    # These tests cache keys by hand (Cache/Evict RPCs); automatic filling would race them.
    # test_cache_fill.py has its own cluster with filling on.
    cfg = emulation_config(n_cache=2, n_db=2, n_clients=1, run_dir=run_dir,
                           controller={"openflow_port": 6663}, cache_fill={"enabled": False})
    with EmulatedCluster(cfg, run_dir) as cl:
        yield cl
