"""The emulation's management network plan (exo_topo/mgmt_net.py): which Mininet host gets
which address from the config's metrics addresses, the generated configs' addresses, and the
errors that name the field at fault. The network itself is brought up in
tests/integration/test_prometheus.py."""
import pytest

from exo_common.config import parse_config
from exo_topo.configgen import emulation_config, emulation_config_dict
from exo_topo.mgmt_net import MgmtNetError, assign_addresses, plan


def test_generated_configs_have_metrics_on_one_subnet_per_openflow_port():
    cfg = emulation_config(n_cache=2, n_db=2, n_clients=1, run_dir="/tmp/exo/t", controller={"openflow_port": 6663})
    assert cfg.controller.metrics == "127.31.7.254:9180"  # 6663 % 256 = 7; loopback: the root namespace
    assert [n.metrics for n in cfg.cache_nodes] == ["172.31.7.11:9180", "172.31.7.12:9180"]
    assert [n.metrics for n in cfg.db_nodes] == ["172.31.7.101:9180", "172.31.7.102:9180"]
    p = plan(cfg)
    assert p.bridge == "exo-s1-m" and p.root_address == "172.31.7.254/24"
    assert [(link.host, link.ifname, link.peer, link.addresses) for link in p.links] == [
        ("cache0", "cache0-mgmt", "mg-cache0", ("172.31.7.11/24",)),
        ("cache1", "cache1-mgmt", "mg-cache1", ("172.31.7.12/24",)),
        ("db0", "db0-mgmt", "mg-db0", ("172.31.7.101/24",)),
        ("db1", "db1-mgmt", "mg-db1", ("172.31.7.102/24",))]
    other = emulation_config(n_cache=1, n_db=1, n_clients=1, run_dir="/tmp/exo/u", controller={"openflow_port": 6664})
    assert plan(other).root_address != p.root_address, "two clusters up at once do not share a subnet"


def test_emulated_db_nodes_serve_none_and_a_proxy_is_on_its_clients_host():
    d = emulation_config_dict(n_cache=1, n_db=3, n_clients=1, run_dir="/tmp/exo/t", emulator="emu0")
    d["proxies"] = [{"name": "proxy0", "client": "client0"}]
    cfg = parse_config(assign_addresses(d))
    assert [n.metrics for n in cfg.db_nodes] == ["", "", ""]
    assert cfg.proxies[0].metrics == "172.31.253.201:9180"
    assert [link.host for link in plan(cfg).links] == ["cache0", "client0"]


def test_explicit_addresses_are_kept_and_no_address_means_no_network():
    d = emulation_config_dict(n_cache=1, n_db=1, n_clients=1, run_dir="/tmp/exo/t",
                              controller={"metrics": ""})
    assert d["controller"]["metrics"] == ""
    d["cache_nodes"][0]["metrics"] = ""
    d["db_nodes"][0]["metrics"] = ""
    assert plan(parse_config(d)) is None


def test_bad_layouts_name_the_field():
    d = emulation_config_dict(n_cache=2, n_db=1, n_clients=1, run_dir="/tmp/exo/t")
    d["cache_nodes"][1]["metrics"] = "172.31.99.12:9180"
    with pytest.raises(MgmtNetError, match=r"cache_nodes\[1\]\.metrics: 172\.31\.99\.12 is not in the management network 172\.31\.253\.0/24"):
        plan(parse_config(d))
    d["cache_nodes"][1]["metrics"] = "172.31.253.254:9180"
    with pytest.raises(MgmtNetError, match=r"cache_nodes\[1\]\.metrics: .* the root namespace's address"):
        plan(parse_config(d))
    d = emulation_config_dict(n_cache=1, n_db=1, n_clients=1, run_dir="/tmp/exo/t",
                              switch={"bridge": "exo-long-name1"})
    with pytest.raises(MgmtNetError, match="switch.bridge: 'exo-long-name1' is too long"):
        plan(parse_config(d))
