"""The config digest (controller/exo_controller/config_digest.py): instances of one cluster agree
although their per-instance fields differ; against a real etcd the first controller stores it,
the same config passes, and a controller with another config is refused before it campaigns,
with an error naming the field (known-bad); failover.Failover.start() then never puts a key
under the election prefix."""
import copy
import uuid

import pytest

from etcd_fixtures import client, etcd_plain  # noqa: F401  (fixtures)
from exo_common.config import parse_config
from exo_controller.config_digest import ConfigMismatch, check, check_or_store, differences, digest, key
from exo_controller.failover import Failover, election_prefix


def two_instances(d: dict, cluster: str) -> dict:
    d = copy.deepcopy(d)
    d["cluster"]["name"] = cluster
    d["replication"] = {"factor": 1}  # not "auto": that follows the members, which the test changes
    d["controller"] = {"etcd": ["https://127.0.0.1:2379"], "instances": [
        {"name": "c1", "openflow_port": 6671, "grpc": "unix:/tmp/exoctl-test/c1.sock"},
        {"name": "c2", "openflow_port": 6672, "grpc": "unix:/tmp/exoctl-test/c2.sock"}]}
    return d


def test_instances_of_one_cluster_agree_and_a_changed_field_is_named(cluster_dict):
    cfg = parse_config(two_instances(cluster_dict, "t"))
    c1, c2 = cfg.for_instance("c1"), cfg.for_instance("c2")
    c2 = c2.model_copy(update={"controller": c2.controller.model_copy(update={"etcd": ["https://10.0.0.9:2379"]})})
    assert digest(c1) == digest(c2), "per-instance fields and --etcd-endpoints are not in the digest"
    # membership lives in etcd (chain_store.py): not in the digest either
    d = two_instances(cluster_dict, "t")
    d["db_nodes"][2]["member"] = False
    assert differences(digest(parse_config(d)), digest(cfg)) == []
    d = two_instances(cluster_dict, "t")
    d["switch"]["rule_update_rate"] = 7
    d["cache_nodes"][1]["capacity"] = 41
    assert differences(digest(parse_config(d)), digest(cfg)) == ["cache_nodes", "switch.rule_update_rate"]


def test_a_stored_value_that_is_not_a_digest_is_refused_naming_the_key(cfg):
    with pytest.raises(ConfigMismatch, match="etcd key /exo/t/config: not a config digest"):
        check(digest(cfg), b"[1, 2", "/exo/t/config")


def test_the_first_controller_stores_it_and_another_config_is_refused(client, cluster_dict):
    name = f"t-{uuid.uuid4().hex[:8]}"
    cfg = parse_config(two_instances(cluster_dict, name))
    assert check_or_store(client, cfg.for_instance("c1")) is True
    assert check_or_store(client, cfg.for_instance("c2")) is False  # same config: passes
    d = two_instances(cluster_dict, name)
    d["switch"]["cache_rule_capacity"] = 99
    with pytest.raises(ConfigMismatch, match=r"in: switch\.cache_rule_capacity\. Refusing to campaign"):
        check_or_store(client, parse_config(d).for_instance("c2"))  # known-bad
    assert client.get(key(cfg)) is not None


class App:
    """What Failover needs of the app before it campaigns (a stand-in: the test is of start())."""

    def count(self, name, n=1):
        pass

    def leadership_event(self, *args):
        raise AssertionError("a refused instance must not take part in the election")


def test_a_controller_with_another_config_never_campaigns(client, cluster_dict):
    name = f"t-{uuid.uuid4().hex[:8]}"
    assert check_or_store(client, parse_config(two_instances(cluster_dict, name)))
    d = two_instances(cluster_dict, name)
    d["hot_keys"] = {"top_k": 3}
    cfg = parse_config(d).for_instance("c2")
    fo = Failover(cfg, App(), client, "c2")
    with pytest.raises(ConfigMismatch, match="hot_keys.top_k"):
        fo.start()
    assert client.get_prefix(election_prefix(cfg) + "/") == [], "it put a key under the election prefix"
