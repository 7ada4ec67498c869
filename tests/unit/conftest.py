"""Shared fixtures: for controller/config tests a small valid cluster config as a dict; for the
client tests `make` (client_fakes.py)."""
import copy

import pytest

from client_fakes import make  # noqa: F401  (the client tests' `make` fixture, client_fakes.py)

_CLUSTER = {
    "cluster": {"name": "t"},
    "switch": {"dpid": 1, "partition_bits": 8, "virtual_nodes": 16, "cache_rule_capacity": 100},
    "controller": {"openflow_port": 6699, "grpc": "unix:/tmp/exoctl-test/controller.sock"},
    "cache_nodes": [
        {"name": "cache1", "mac": "02:00:00:00:01:01", "ip": "10.0.1.1", "switch_port": 11,
         "grpc": "unix:/tmp/exoctl-test/cache1.sock", "capacity": 40},
        {"name": "cache2", "mac": "02:00:00:00:01:02", "ip": "10.0.1.2", "switch_port": 12,
         "grpc": "unix:/tmp/exoctl-test/cache2.sock", "capacity": 40},
    ],
    "db_nodes": [
        {"name": "db1", "mac": "02:00:00:00:02:01", "ip": "10.0.2.1", "switch_port": 21,
         "grpc": "unix:/tmp/exoctl-test/db1.sock", "data_dir": "/tmp/exoctl-test/db1"},
        {"name": "db2", "mac": "02:00:00:00:02:02", "ip": "10.0.2.2", "switch_port": 22,
         "grpc": "unix:/tmp/exoctl-test/db2.sock", "data_dir": "/tmp/exoctl-test/db2"},
        {"name": "db3", "mac": "02:00:00:00:02:03", "ip": "10.0.2.3", "switch_port": 23,
         "grpc": "unix:/tmp/exoctl-test/db3.sock", "data_dir": "/tmp/exoctl-test/db3"},
    ],
    "clients": [
        {"name": "client1", "mac": "02:00:00:00:03:01", "ip": "10.0.3.1", "switch_port": 31},
    ],
    # The thesis's layout (one db node per slot), which most tests are about; `auto`, the
    # schema's default, would make these three db nodes one chain of 3 (test_config.py).
    "replication": {"factor": 1},
}


@pytest.fixture
def cluster_dict():
    """A fresh, valid config dict each time (tests mutate it)."""
    return copy.deepcopy(_CLUSTER)


@pytest.fixture
def cfg(cluster_dict):
    from exo_common.config import parse_config
    return parse_config(cluster_dict)
