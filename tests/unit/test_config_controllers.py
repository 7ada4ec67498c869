"""controller.instances / etcd / lease_ttl_s / failover_probe_ms (docs/design/replication.md, 5.4)."""
from __future__ import annotations

import pytest

from exo_common.config import ConfigError, parse_config, resolve

TWO = [{"name": "c1", "openflow_port": 6653, "grpc": "127.0.0.1:50061"},
       {"name": "c2", "openflow_port": 6654, "grpc": "127.0.0.1:50062", "metrics": "127.0.0.1:9201"}]


def err(data) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    return str(e.value)


def test_without_instances_the_top_level_fields_are_the_one_instance(cluster_dict):
    cfg = parse_config(cluster_dict)
    assert cfg.controller.etcd == [] and cfg.controller.lease_ttl_s == 2 and cfg.controller.failover_probe_ms == 100
    (only,) = cfg.controller.all_instances()
    port = cfg.controller.openflow_port
    assert (only.name, only.openflow_port, only.grpc) == ("controller", port, cfg.controller.grpc)
    out = resolve(cfg)
    assert out["controller"]["instances"] == [{"name": "controller", "openflow_port": port,
                                               "grpc": cfg.controller.grpc, "metrics": ""}]


def test_two_instances_with_etcd_resolve_and_each_sees_its_own_fields(cluster_dict):
    cluster_dict["controller"] = {"etcd": ["https://127.0.0.1:2379"], "instances": TWO, "lease_ttl_s": 1,
                                  "failover_probe_ms": 50}
    cfg = parse_config(cluster_dict)
    out = resolve(cfg)
    assert [i["name"] for i in out["controller"]["instances"]] == ["c1", "c2"]
    assert out["controller"]["etcd"] == ["https://127.0.0.1:2379"]
    c2 = cfg.for_instance("c2")
    assert (c2.controller.openflow_port, c2.controller.grpc, c2.controller.metrics) == (
        6654, "127.0.0.1:50062", "127.0.0.1:9201")
    with pytest.raises(KeyError):
        cfg.for_instance("c9")


@pytest.mark.parametrize("controller, message", [
    ({"instances": TWO}, "controller.etcd: 2 controller.instances elect their master through etcd"),
    ({"etcd": ["127.0.0.1:2379"], "instances": TWO}, "controller.etcd: [0] '127.0.0.1:2379': must look like"),
    ({"etcd": ["https://h:2379"], "instances": [TWO[0], {**TWO[1], "name": "c1"}]},
     "controller.instances[1].name: 'c1' already used by instances[0]"),
    ({"etcd": ["https://h:2379"], "instances": [TWO[0], {**TWO[1], "openflow_port": 6653}]},
     "controller.instances[1].openflow_port: 6653 already used by instances[0]"),
    ({"etcd": ["https://h:2379"], "instances": [TWO[0], {**TWO[1], "grpc": TWO[0]["grpc"]}]},
     "controller.instances[1].grpc"),
    ({"etcd": ["https://h:2379"], "instances": TWO, "grpc": "unix:/x"},
     "controller.grpc: set per instance in controller.instances[]"),
    ({"etcd": ["https://h:2379"], "instances": [{**TWO[0], "name": "C-1"}]}, "controller.instances[0].name"),
    ({"etcd": ["https://h:2379"], "instances": [{**TWO[0], "metrics": "nope"}]},
     "controller.instances[0].metrics"),
    ({"lease_ttl_s": 0}, "controller.lease_ttl_s"),
    ({"failover_probe_ms": 1}, "controller.failover_probe_ms"),
    ({"instances": [{"name": "c1", "grpc": "x"}]}, "controller.instances[0].openflow_port"),
])
def test_bad_controller_fields_are_named(cluster_dict, controller, message):
    cluster_dict["controller"] = controller
    assert message in err(cluster_dict)


def test_a_metrics_address_shared_with_a_node_is_refused(cluster_dict):
    cluster_dict["cache_nodes"][0]["metrics"] = "127.0.0.1:9201"
    cluster_dict["controller"] = {"etcd": ["https://h:2379"], "instances": TWO}
    assert "already used by controller.instances[1].metrics" in err(cluster_dict)
