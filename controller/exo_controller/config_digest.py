"""The config digest in etcd (docs/design/replication.md, 5.3): every controller instance must
run the same cluster config, or one instance's static flows would be another's "foreign flows"
(flows.plan_table would flush the switch at every failover) and their books would disagree on
ports and capacity. Without `controller.etcd` nothing here runs.

    /exo/<cluster>/config   {"sha256": <whole digest>, "fields": {"<section>.<field>": <digest>, ...}}

The first instance to start writes it (a Txn that puts only while the key does not exist);
every instance compares its own before it campaigns, and one whose digest differs refuses to
campaign with ConfigMismatch naming the fields that differ (`switch.rule_update_rate`,
`cache_nodes`, ...).

Left out of the digest, because they differ between instances of one cluster or change while it
runs: controller.openflow_port / grpc / metrics (each instance's own, ClusterConfig.for_instance),
controller.etcd (`--etcd-endpoints` may replace it), db_nodes[].member (membership lives in etcd,
chain_store.py), and the chain table (not in the config; resolve() derives it).

To change the config of a running cluster: stop every controller instance, then
`etcdctl del /exo/<cluster>/config` (docs/etcd.md), then start them with the new config.
"""
from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Mapping, Optional

from .etcd_keys import cluster_prefix

LOG = logging.getLogger("exo_controller.config_digest")
PER_INSTANCE = ("openflow_port", "grpc", "metrics", "etcd")


def key(cfg) -> str:
    return f"{cluster_prefix(cfg)}/config"


def digestible(cfg) -> dict[str, Any]:
    """The config as a plain dict, minus what may differ between instances or change at run time."""
    data = cfg.model_dump(mode="json")
    for f in PER_INSTANCE:
        data.get("controller", {}).pop(f, None)
    for n in data.get("db_nodes", []):
        n.pop("member", None)
    return data


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def fields(data: Mapping[str, Any]) -> dict[str, str]:
    """A digest per `<section>.<field>` of a mapping section, per section otherwise (lists)."""
    out = {}
    for section, value in data.items():
        if isinstance(value, dict) and value:
            for f, v in value.items():
                out[f"{section}.{f}"] = _sha(v)
        else:
            out[section] = _sha(value)
    return out


def digest(cfg) -> dict[str, Any]:
    data = digestible(cfg)
    return {"sha256": _sha(data), "fields": fields(data)}


def differences(mine: Mapping[str, Any], stored: Mapping[str, Any]) -> list[str]:
    """The fields whose digests differ (present in one only included); [] when they agree."""
    if mine.get("sha256") == stored.get("sha256"):
        return []
    a, b = mine.get("fields", {}), stored.get("fields", {})
    diff = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
    return diff or ["<the config as a whole>"]


class ConfigMismatch(RuntimeError):
    """This instance's config is not the one the cluster's first controller stored."""


def check(mine: Mapping[str, Any], stored_value: Optional[bytes], where: str) -> None:
    """Raise ConfigMismatch naming the differing fields; `where`: the etcd key (for the message)."""
    if stored_value is None:
        return
    try:
        stored = json.loads(stored_value)
        if not isinstance(stored, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        raise ConfigMismatch(f"etcd key {where}: not a config digest ({err})") from None
    diff = differences(mine, stored)
    if diff:
        shown = ", ".join(diff[:8]) + (f" and {len(diff) - 8} more" if len(diff) > 8 else "")
        raise ConfigMismatch(
            f"this controller's config differs from the one the cluster's controllers run (etcd key {where}) "
            f"in: {shown}. Refusing to campaign. Run every instance with the same config; to change it, stop "
            f"them all and `etcdctl del {where}` first")


def check_or_store(client, cfg) -> bool:
    """Put our digest if the cluster has none (True: we stored it), else compare (ConfigMismatch).
    EtcdError propagates (etcd unreachable)."""
    from exo_common.etcd import cmp_create_revision, op_get, op_put
    k = key(cfg)
    mine = digest(cfg)
    stored, responses = client.txn([cmp_create_revision(k, 0)], [op_put(k, json.dumps(mine, sort_keys=True))],
                                   [op_get(k)])
    if stored:
        LOG.info("config digest stored in etcd %s (the first controller of cluster %s)", k, cfg.cluster.name)
        return True
    kvs = responses[0].response_range.kvs if responses else []
    check(mine, bytes(kvs[0].value) if kvs else None, k)
    return False
