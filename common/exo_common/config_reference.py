"""Generate the config reference (docs/config-reference.md) from the schema itself, so every
option is declared once, with its default and help, in config.py."""
from __future__ import annotations

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from .config import (CacheFillSection, CacheNodeConfig, ClientConfig, ClusterSection, ControllerInstance,
                     ControllerSection, DbNodeConfig, EmulationSection, HotKeysSection, ProxyConfig, ReplicationSection, SecuritySection,
                     SwitchSection)

SECTIONS: list[tuple[str, type[BaseModel], str]] = [
    ("cluster", ClusterSection, "Cluster-wide data-plane settings."),
    ("switch", SwitchSection, "The OpenFlow switch and the partitioning of the key-hash space."),
    ("controller", ControllerSection, "Where the os-ken controller listens, and how it watches the cache nodes."),
    ("controller.instances[]", ControllerInstance, "One entry per controller process of a failover group "
     "(docs/design/replication.md, 5.4); needs `controller.etcd` when there are two or more."),
    ("hot_keys", HotKeysSection, "Db nodes: sampled Space-Saving hot-key detection and REPORTs "
     "(docs/cache-fill.md)."),
    ("cache_fill", CacheFillSection, "Cache nodes: which keys to hold, chosen from REPORTs "
     "(docs/cache-fill.md)."),
    ("emulation", EmulationSection, "The wimpy emulator (thesis 4.1.1; emulator/README.md): db nodes with "
     "`emulator` set are served by one rate-limited DPDK process that answers a fixed value."),
    ("cache_nodes[]", CacheNodeConfig, "One entry per DPDK cache node."),
    ("db_nodes[]", DbNodeConfig, "One entry per RocksDB db node (at least one)."),
    ("clients[]", ClientConfig, "Client hosts (the emulation creates them; real clients need no entry)."),
    ("proxies[]", ProxyConfig, "exo-proxy instances (docs/proxy.md); each has a certificate and may serve /metrics."),
    ("security", SecuritySection, "Mutual TLS on gRPC and OpenFlow, and who may call what (docs/security.md)."),
    ("replication", ReplicationSection, "Chain replication of db nodes (docs/replication.md): each slot's writes go "
     "to its chain's head and its GETs to the read server; `exo config resolve` writes each slot's chain "
     "(`chains`), the controller master keeps them current across failures (docs/design/replication.md)."),
]

NODE_HELP = {
    "name": "Node name: 1-10 chars of [a-z0-9], starting with a letter.",
    "mac": "The node's real unicast MAC; must not start with aa or ba (key-hash prefixes).",
    "ip": "The node's IPv4 address (replies come from it).",
    "switch_port": "The switch port the node is cabled to.",
}


def _default(field) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    return "`null`" if value is None else f"`{value}`"


def render() -> str:
    lines = ["# Cluster config reference", "",
             "Generated from `common/exo_common/config.py` by "
             "`exo config reference`; do not edit by hand. Unknown keys are errors.", ""]
    for name, model, blurb in SECTIONS:
        lines += [f"## `{name}`", "", blurb, "", "| key | default | meaning |", "|---|---|---|"]
        for key, field in model.model_fields.items():
            help_text = field.description or NODE_HELP.get(key, "")
            lines.append(f"| `{key}` | {_default(field)} | {help_text} |")
        lines.append("")
    return "\n".join(lines)
