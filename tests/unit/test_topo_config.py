"""The emulation config generator and the demo's hot-key assignment."""
from exo_topo.configgen import emulation_config
from exo_cli.demo import hot_keys_by_cache_node
from exo_controller.partitions import slot_of
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
