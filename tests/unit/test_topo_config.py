"""The emulation config generator and the demo's hot-key assignment."""
from exo_topo.configgen import emulation_config
from exo_cli.demo import hot_keys_by_cache_node
from exo_common.partitions import slot_of
from exoskeleton.keyhash import key_hash


def test_generated_config_is_valid_and_unique():
    cfg = emulation_config(n_cache=2, n_db=4, n_clients=2, run_dir="/tmp/x")
    nodes = [*cfg.cache_nodes, *cfg.db_nodes, *cfg.clients]
    assert len({n.mac for n in nodes}) == len({n.switch_port for n in nodes}) == 8
    assert all(n.interface == f"{n.name}-eth0" for n in nodes)
    assert len(cfg.partitions()) == 1 << cfg.switch.partition_bits


def test_hot_keys_go_to_the_cache_node_of_their_owner():
    cfg = emulation_config(n_cache=2, n_db=4, n_clients=1, run_dir="/tmp/x")
    groups = hot_keys_by_cache_node(cfg, 200)
    assert sum(len(v) for v in groups.values()) == 200
    table = cfg.partitions()
    for cache, keys in groups.items():
        for k in keys:
            owner = table[slot_of(key_hash(k), cfg.switch.partition_bits)]
            assert cfg.cache_node_for_db(owner) == cache


def test_emulated_db_nodes_share_one_host():
    from exo_topo.configgen import emulation_config
    from exo_topo.topology import ExoTopo
    cfg = emulation_config(1, 32, 1, "/tmp/exo/t", emulator="emu0")
    dbs = cfg.db_nodes
    assert {d.emulator for d in dbs} == {"emu0"}
    assert {(d.ip, d.switch_port, d.interface) for d in dbs} == {("10.0.2.1", 2, "emu0-eth0")}
    assert len({d.mac for d in dbs}) == 32 and len({d.grpc for d in dbs}) == 32
    assert cfg.clients[0].switch_port == 3  # no port is left unused
    topo = ExoTopo(cfg)
    assert sorted(topo.hosts()) == ["cache0", "client0", "emu0"]
    # The emulator's partitions are those of its 32 nodes: every node owns some.
    assert set(cfg.partitions()) == {d.name for d in dbs}
