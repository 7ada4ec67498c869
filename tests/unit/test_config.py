"""Cluster config validation: every error names the field; resolve() adds derived facts."""
import copy
import json
from pathlib import Path

import pytest

from exo_common.config import ConfigError, load_config, parse_config, resolve, write_resolved

REPO = Path(__file__).parents[2]


def err(data):
    with pytest.raises(ConfigError) as exc:
        parse_config(data, "c.yaml")
    return str(exc.value)


def test_valid_config_parses(cluster_dict):
    cfg = parse_config(cluster_dict)
    assert [c.name for c in cfg.cache_nodes] == ["cache1", "cache2"]
    assert cfg.controller.openflow_port == 6699


def test_unknown_top_level_key(cluster_dict):
    cluster_dict["swtich"] = {}
    msg = err(cluster_dict)
    assert msg.startswith("c.yaml:")
    assert "swtich: unknown key" in msg


def test_unknown_nested_key(cluster_dict):
    cluster_dict["db_nodes"][2]["thread"] = 4
    assert "db_nodes[2].thread: unknown key" in err(cluster_dict)
    cluster_dict["db_nodes"][2].pop("thread")
    cluster_dict["switch"]["bits"] = 4
    assert "switch.bits: unknown key" in err(cluster_dict)


def test_bad_mac_names_field(cluster_dict):
    cluster_dict["db_nodes"][1]["mac"] = "02:00:00:00:02"
    assert "db_nodes[1].mac" in err(cluster_dict)


@pytest.mark.parametrize("prefix", ["aa", "ae", "ba", "be", "AA", "AE"])
def test_mac_with_request_prefix_rejected(cluster_dict, prefix):
    cluster_dict["clients"][0]["mac"] = f"{prefix}:00:00:00:00:01"
    msg = err(cluster_dict)
    assert "clients[0].mac" in msg and "aa, ae, ba or be" in msg


def test_multicast_mac_rejected(cluster_dict):
    cluster_dict["cache_nodes"][0]["mac"] = "03:00:00:00:00:01"
    assert "cache_nodes[0].mac" in err(cluster_dict)


def test_duplicate_switch_port(cluster_dict):
    cluster_dict["clients"][0]["switch_port"] = 21  # db1's port
    msg = err(cluster_dict)
    assert "clients[0].switch_port" in msg and "db_nodes[0].switch_port" in msg


def test_duplicate_name_and_mac(cluster_dict):
    cluster_dict["db_nodes"][1]["name"] = "cache1"
    assert "db_nodes[1].name" in err(cluster_dict)
    cluster_dict["db_nodes"][1]["name"] = "db2"
    cluster_dict["db_nodes"][1]["mac"] = cluster_dict["db_nodes"][0]["mac"]
    assert "db_nodes[1].mac" in err(cluster_dict)


def test_cache_node_reference_unknown(cluster_dict):
    cluster_dict["db_nodes"][0]["cache_node"] = "cache7"
    msg = err(cluster_dict)
    assert "db_nodes[0].cache_node" in msg and "cache7" in msg


def test_missing_required_field(cluster_dict):
    del cluster_dict["db_nodes"][0]["data_dir"]
    assert "db_nodes[0].data_dir" in err(cluster_dict)
    assert "db_nodes" in err({"cluster": {}})


def test_out_of_range_value(cluster_dict):
    cluster_dict["switch"]["partition_bits"] = 13
    assert "switch.partition_bits" in err(cluster_dict)


def test_top_level_not_mapping():
    assert "mapping" in err([1, 2])


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.yaml")


def test_bad_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("db_nodes: [\n  - name: x\n   bad: : :\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)


def test_load_yaml_roundtrip(tmp_path, cluster_dict):
    import yaml
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cluster_dict))
    cfg = load_config(p)
    assert cfg.db_nodes[2].switch_port == 23


@pytest.mark.parametrize("bits", [1, 8, 12])
def test_resolve_partitions_and_defaults(cluster_dict, bits):
    cluster_dict["switch"]["partition_bits"] = bits
    cluster_dict["db_nodes"][1]["iface"] = "eth7"
    cfg = parse_config(cluster_dict)
    out = resolve(cfg)
    assert len(out["partitions"]) == 2 ** bits
    assert set(out["partitions"]) <= {"db1", "db2", "db3"}
    assert out["partitions"] == cfg.partitions()
    assert out["cache_nodes"][0]["iface"] == "cache1-eth0"
    assert out["db_nodes"][1]["iface"] == "eth7"
    assert out["clients"][0]["iface"] == "client1-eth0"
    # default cache node assignment: round-robin over cache nodes
    assert [d["cache_node"] for d in out["db_nodes"]] == ["cache1", "cache2", "cache1"]


def test_resolve_explicit_cache_node_and_write(tmp_path, cluster_dict):
    cluster_dict["db_nodes"][0]["cache_node"] = "cache2"
    cfg = parse_config(cluster_dict)
    path = write_resolved(cfg, tmp_path / "sub" / "cluster.json")
    out = json.loads(path.read_text())
    assert out["db_nodes"][0]["cache_node"] == "cache2"
    assert out["switch"]["partition_bits"] == 8


def test_partitions_stable_when_adding_db_node(cluster_dict):
    before = parse_config(cluster_dict).partitions()
    cluster_dict["db_nodes"].append({"name": "db4", "mac": "02:00:00:00:02:04", "ip": "10.0.2.4",
                                     "switch_port": 24, "grpc": "unix:/tmp/x.sock", "data_dir": "/tmp/x"})
    after = parse_config(cluster_dict).partitions()
    moved = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert moved and all(after[i] == "db4" for i in moved)  # consistent hashing: only to the new node


def _emulated(cluster_dict, emulator="emu0"):
    """db_nodes[0] and [1] hosted by one wimpy emulator: same ip, port and iface."""
    d0, d1 = cluster_dict["db_nodes"][0], cluster_dict["db_nodes"][1]
    for d in (d0, d1):
        d.update(emulator=emulator, ip=d0["ip"], switch_port=d0["switch_port"], iface="emu0-eth0")
    return cluster_dict


def test_emulated_db_nodes_share_host(cluster_dict):
    cfg = parse_config(_emulated(cluster_dict))
    assert [d.emulator for d in cfg.db_nodes[:2]] == ["emu0", "emu0"]
    assert cfg.db_nodes[0].switch_port == cfg.db_nodes[1].switch_port
    assert cfg.emulation.value_size == 512 and cfg.emulation.db_rate_limit_rps == 0
    assert cfg.cache_nodes[0].rate_limit_rps == 0


def test_emulated_nodes_still_need_own_mac(cluster_dict):
    _emulated(cluster_dict)
    cluster_dict["db_nodes"][1]["mac"] = cluster_dict["db_nodes"][0]["mac"]
    assert "db_nodes[1].mac" in err(cluster_dict)


def test_shared_port_needs_same_emulator(cluster_dict):
    _emulated(cluster_dict)
    cluster_dict["db_nodes"][1]["emulator"] = "emu1"  # another process cannot share the port
    assert "db_nodes[1].ip" in err(cluster_dict)
    cluster_dict["db_nodes"][1]["emulator"] = None
    assert "db_nodes[1].ip" in err(cluster_dict)


def test_emulator_nodes_must_share_iface(cluster_dict):
    _emulated(cluster_dict)
    cluster_dict["db_nodes"][1]["iface"] = "other-eth0"
    msg = err(cluster_dict)
    assert "db_nodes[1].emulator" in msg and "db_nodes[0]" in msg


def test_emulation_section_is_strict(cluster_dict):
    cluster_dict["emulation"] = {"value_size": 64, "db_rate_limit_rps": -1}
    assert "emulation.db_rate_limit_rps" in err(cluster_dict)
    cluster_dict["emulation"] = {"valuesize": 64}
    assert "emulation.valuesize: unknown key" in err(cluster_dict)
    cluster_dict["emulation"] = {}
    cluster_dict["cache_nodes"][0]["rate_limit_rps"] = -5
    assert "cache_nodes[0].rate_limit_rps" in err(cluster_dict)


def test_bounded_load_partitions_balance_exactly():
    from collections import Counter
    from exo_common.partitions import partition_table
    names = [f"db{i}" for i in range(32)]
    plain = partition_table(names, 10, 64)
    assert max(Counter(plain).values()) > 32  # the plain ring is uneven at this size
    bounded = partition_table(names, 10, 64, max_load=1.0)
    assert set(Counter(bounded).values()) == {32}
    # Bounded loads moves only slots of full owners: most stay where the ring puts them.
    assert sum(a != b for a, b in zip(plain, bounded)) < len(plain) // 5
    assert partition_table(names, 10, 64, max_load=0) == plain
    with pytest.raises(ValueError):
        partition_table(names, 10, 64, max_load=0.5)


def test_max_partition_load_in_config(cluster_dict):
    cluster_dict["switch"]["max_partition_load"] = 0.5
    assert "switch.max_partition_load" in err(cluster_dict)
    cluster_dict["switch"]["max_partition_load"] = 1
    cfg = parse_config(cluster_dict)
    from collections import Counter
    counts = Counter(cfg.partitions()).values()
    assert max(counts) == 86  # ceil(256 slots / 3 nodes)


# ---- the resolved form against proto/exoproto/cluster.proto (what the C++ reader parses) ----


def test_resolved_config_is_a_resolved_cluster_message(cluster_dict):
    """Every field resolve() writes is in cluster.proto's ResolvedCluster and every message field
    is written, with its type: what the C++ reader requires."""
    from google.protobuf import json_format
    from exoproto.cluster_pb2 import ResolvedCluster
    out = resolve(parse_config(cluster_dict))
    msg = json_format.ParseDict(out, ResolvedCluster())
    assert msg.db_nodes[2].threads == 2 and msg.db_nodes[2].cache_node == "cache1"
    assert list(msg.partitions) == out["partitions"]
    for path in (REPO / "configs").glob("*.yaml"):
        resolve(load_config(path))  # every shipped config resolves into the message


def test_check_resolved_rejects_drift(cluster_dict):
    """The known-bad inputs: a field the schema writes that the message lacks, a message field the
    schema does not write, and a value the message's type cannot hold."""
    from exo_common.config import check_resolved
    out = resolve(parse_config(cluster_dict))
    extra = json.loads(json.dumps(out))
    extra["db_nodes"][1]["numa_node"] = 0
    with pytest.raises(ConfigError, match=r"db_nodes\[1\]\.numa_node: resolved but not in cluster.proto"):
        check_resolved(extra)
    missing = json.loads(json.dumps(out))
    del missing["hot_keys"]["confidence_z"]
    with pytest.raises(ConfigError, match=r"hot_keys\.confidence_z: in cluster.proto but not resolved"):
        check_resolved(missing)
    del missing["emulation"]
    with pytest.raises(ConfigError, match=r"emulation: in cluster.proto but not resolved"):
        check_resolved(missing)
    wrong = json.loads(json.dumps(out))
    wrong["cache_nodes"][0]["capacity"] = 2 ** 32  # the C++ side holds a uint32
    with pytest.raises(ConfigError, match="capacity"):
        check_resolved(wrong)
    wrong["cache_nodes"] = {"name": "x"}
    with pytest.raises(ConfigError, match="cache_nodes: resolved to dict, cluster.proto has a list"):
        check_resolved(wrong)


def test_resolve_refuses_a_value_the_nodes_cannot_hold(cluster_dict):
    cluster_dict["hot_keys"] = {"segment_ms": 2 ** 32}  # the schema sets no upper bound
    with pytest.raises(ConfigError, match="segment_ms field: Value out of range"):
        resolve(parse_config(cluster_dict))


def test_db_node_threads_default_is_two(cluster_dict):
    """One default, the schema's (the C++ struct's copy said 1; cluster_test checks it is 2 now)."""
    assert resolve(parse_config(cluster_dict))["db_nodes"][0]["threads"] == 2


def test_cpp_fixture_is_current():
    """common/cpp/tests/data/defaults.resolved.json is what cluster_test reads as Python's output
    (and checks cluster.h's struct defaults against): it must be what resolve() writes today."""
    data = REPO / "common" / "cpp" / "tests" / "data"
    expected = json.dumps(resolve(load_config(data / "defaults.yaml")), indent=1) + "\n"
    assert (data / "defaults.resolved.json").read_text() == expected, (
        "run: .venv/bin/exo config resolve common/cpp/tests/data/defaults.yaml "
        "-o common/cpp/tests/data/defaults.resolved.json")


# ---- replication: the chain layout in the config (docs/design/replication.md, 2.1-2.2) ----


def test_replication_factor_one_is_one_chain_of_the_owner(cluster_dict):
    """factor 1: every chain is [today's owner], so nothing else changes."""
    cfg = parse_config(cluster_dict)
    assert cfg.replication.factor == 1 and all(d.member for d in cfg.db_nodes)
    out = resolve(cfg)
    assert out["replication"]["factor"] == 1
    assert out["chains"] == [{"nodes": [owner]} for owner in out["partitions"]]
    assert [d["member"] for d in out["db_nodes"]] == [True, True, True]


def test_replication_factor_auto_is_three_with_three_real_members_else_one(cluster_dict):
    """The default, auto: chains of 3 where there are at least 3 member db nodes and none is
    emulated (issue 15); 1 otherwise. The resolved config holds the number."""
    del cluster_dict["replication"]
    cfg = parse_config(cluster_dict)
    assert cfg.replication.factor == 3
    assert resolve(cfg)["replication"]["factor"] == 3
    assert parse_config({**cluster_dict, "replication": {"factor": "auto"}}).replication.factor == 3
    spare = copy.deepcopy(cluster_dict)
    spare["db_nodes"][2]["member"] = False  # two members and a spare
    assert parse_config(spare).replication.factor == 1
    emulated = copy.deepcopy(cluster_dict)
    for d in emulated["db_nodes"]:
        d.update(emulator="emu0", ip="10.0.2.1", switch_port=21, iface="emu0-eth0")
    assert parse_config(emulated).replication.factor == 1
    assert "replication.factor" in err({**cluster_dict, "replication": {"factor": "three"}})


def test_replication_factor_three_resolves(cluster_dict):
    cluster_dict["replication"] = {"factor": 3}
    cfg = parse_config(cluster_dict)
    out = resolve(cfg)
    assert out["partitions"] == parse_config({**cluster_dict, "replication": {}}).partitions()  # heads unchanged
    for owner, chain in zip(out["partitions"], out["chains"]):
        assert chain["nodes"][0] == owner and sorted(chain["nodes"]) == ["db1", "db2", "db3"]


def test_replication_factor_errors_name_the_field(cluster_dict):
    cluster_dict["replication"] = {"factor": 4}
    msg = err(cluster_dict)
    assert "replication.factor: 4 is more than the 3 member db nodes" in msg
    cluster_dict["replication"] = {"factor": 0}
    assert "replication.factor" in err(cluster_dict)
    cluster_dict["replication"] = {"factr": 2}
    assert "replication.factr: unknown key" in err(cluster_dict)
    cluster_dict["replication"] = {"factor": 3}
    cluster_dict["db_nodes"][2]["member"] = False  # a spare does not count
    assert "replication.factor: 3 is more than the 2 member db nodes" in err(cluster_dict)


def test_replication_factor_above_one_refuses_emulated_nodes(cluster_dict):
    _emulated(cluster_dict)
    assert parse_config(cluster_dict).replication.factor == 1  # emulated nodes are fine at factor 1
    cluster_dict["replication"] = {"factor": 2}
    msg = err(cluster_dict)
    assert "replication.factor: 2 needs real db nodes, but db_nodes[0].emulator is 'emu0'" in msg


def test_spares_hold_no_slots(cluster_dict):
    cluster_dict["db_nodes"][1]["member"] = False
    cluster_dict["replication"] = {"factor": 2}
    cfg = parse_config(cluster_dict)
    assert cfg.members() == ["db1", "db3"]
    out = resolve(cfg)
    assert set(out["partitions"]) == {"db1", "db3"}
    assert all(sorted(c["nodes"]) == ["db1", "db3"] for c in out["chains"])
    assert out["db_nodes"][1]["member"] is False
    for d in cluster_dict["db_nodes"]:
        d["member"] = False
    assert "db_nodes[*].member: no db node is a member" in err(cluster_dict)


def test_check_resolved_holds_chains_to_partitions(cluster_dict):
    """The known-bad resolved tables: a chain whose head is not the slot's owner, a repeated
    node, an empty chain, one longer than the factor, a spare in a chain, a missing chain."""
    from exo_common.config import check_resolved
    cluster_dict["replication"] = {"factor": 2}
    out = resolve(parse_config(cluster_dict))
    check_resolved(out)

    def bad(edit, message):
        copy = json.loads(json.dumps(out))
        edit(copy)
        with pytest.raises(ConfigError, match=message):
            check_resolved(copy)

    other = next(n for n in ("db1", "db2", "db3") if n not in out["chains"][5]["nodes"])
    bad(lambda o: o["chains"][5]["nodes"].__setitem__(0, other), r"chains\[5\]\[0\]: head")
    bad(lambda o: o["chains"][7]["nodes"].__setitem__(1, o["chains"][7]["nodes"][0]), r"chains\[7\]: repeats db node")
    bad(lambda o: o["chains"][0].__setitem__("nodes", []), r"chains\[0\]: empty")
    bad(lambda o: o["chains"][0]["nodes"].append(other if other not in o["chains"][0]["nodes"] else "db9"),
        r"chains\[0\]: 3 nodes, more than replication.factor 2")
    bad(lambda o: o["db_nodes"][2].__setitem__("member", False), r"chains\[\d+\]\[\d\]: 'db3' is not a member")
    bad(lambda o: o["chains"].pop(), r"chains: 255 entries, partitions has 256")
    bad(lambda o: o["chains"].__setitem__(0, ["db1"]), r"chains\[0\]: resolved to list, cluster.proto has a message")
