"""The cluster config: one typed schema that every component reads.

YAML in, validated here (unknown keys are errors, every error names its field), then
`resolve()` turns it into the JSON the C++ nodes load (`--cluster cluster.json`), which adds
derived facts such as the partition table so that consistent hashing is computed in one place.
"""
from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .partitions import partition_table

NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,9}$")  # short: Mininet interface names are <name>-eth0
MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
REQUEST_PREFIXES = ("aa", "ba")


class ConfigError(ValueError):
    """A cluster config that cannot be used. The message names each bad field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterSection(_Strict):
    name: str = Field("exo", description="Cluster name, used in run directories and logs.")
    mtu: int = Field(1500, ge=576, le=9000, description="IP MTU of every link; 9000 for jumbo frames.")
    udp_port: int = Field(7777, ge=1, le=65535, description="UDP port of requests.")
    service_ip: str = Field("10.0.0.254", description="IPv4 dst of requests; nodes ignore it, tcpdump shows it.")

    @field_validator("service_ip")
    @classmethod
    def _ip(cls, v: str) -> str:
        ipaddress.IPv4Address(v)
        return v


class SwitchSection(_Strict):
    dpid: int = Field(1, ge=1, description="OpenFlow datapath id of the switch.")
    bridge: str = Field("exo-s1", description="OVS bridge name (emulation).")
    cache_rule_capacity: int = Field(4096, ge=1, description="C: exact-match rules the switch holds for Ruleset 2.")
    rule_update_rate: float = Field(50.0, gt=0, description="R: rule updates per second the switch accepts (the rate-limited updater that enforces it is not built yet).")
    fast_add_fraction: float = Field(0.1, ge=0, lt=1, description="Share of C kept as the fast-add buffer (used by the rule updater, not built yet).")
    partition_bits: int = Field(8, ge=1, le=12, description="Ruleset 3 has 2^bits wildcard rules (hash-space slots).")
    virtual_nodes: int = Field(64, ge=1, le=1024, description="Points per db node on the consistent-hash ring.")


class ControllerSection(_Strict):
    openflow_host: str = Field("127.0.0.1", description="Address the OpenFlow listener binds.")
    openflow_port: int = Field(6653, ge=1, le=65535, description="OpenFlow TCP port.")
    grpc: str = Field("unix:/tmp/exo/controller.sock", description="gRPC address of the controller API.")


class _Node(_Strict):
    name: str
    mac: str
    ip: str
    switch_port: int = Field(ge=1, le=0xFFFFFF00)
    iface: Optional[str] = Field(None, description="Data-plane interface; default <name>-eth0.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("must be 1-10 chars of [a-z0-9], starting with a letter")
        return v

    @field_validator("mac")
    @classmethod
    def _mac(cls, v: str) -> str:
        v = v.lower()
        if not MAC_RE.match(v):
            raise ValueError("must look like 02:00:00:00:00:01")
        first = int(v[:2], 16)
        if first & 1:
            raise ValueError("must be unicast (low bit of first byte clear)")
        if v[:2] in REQUEST_PREFIXES:
            raise ValueError("must not start with aa or ba: those prefixes carry key hashes")
        return v

    @field_validator("ip")
    @classmethod
    def _ip(cls, v: str) -> str:
        ipaddress.IPv4Address(v)
        return v

    @property
    def interface(self) -> str:
        return self.iface or f"{self.name}-eth0"


class CacheNodeConfig(_Node):
    grpc: str = Field(description="gRPC address of this cache node's control service.")
    capacity: int = Field(1000, ge=1, description="Entries in the in-memory map.")
    lcores: str = Field("0", description="DPDK -l core list; one RX/TX loop per lcore.")
    burst: int = Field(32, ge=1, le=512, description="Packets per RX/TX burst.")
    idle_sleep_us: int = Field(20, ge=0, description="Sleep after an empty burst; 0 = spin (deployment).")
    eal_args: list[str] = Field(default_factory=list, description="Extra DPDK EAL args (a NIC deployment puts -a PCI here).")


class DbNodeConfig(_Node):
    grpc: str = Field(description="gRPC address of this db node's control service.")
    data_dir: str = Field(description="RocksDB directory.")
    threads: int = Field(2, ge=1, le=64, description="Packet threads (one AF_PACKET socket each, fanout).")
    sync_writes: bool = Field(True, description="fsync the RocksDB WAL before acknowledging a write.")
    cache_node: Optional[str] = Field(None, description="Cache node serving this node's partitions; default round-robin.")


class ClientConfig(_Node):
    pass


class ClusterConfig(_Strict):
    cluster: ClusterSection = ClusterSection()
    switch: SwitchSection = SwitchSection()
    controller: ControllerSection = ControllerSection()
    cache_nodes: list[CacheNodeConfig] = Field(default_factory=list)
    db_nodes: list[DbNodeConfig] = Field(min_length=1)
    clients: list[ClientConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _cross_checks(self) -> "ClusterConfig":
        nodes = [("cache_nodes", i, n) for i, n in enumerate(self.cache_nodes)]
        nodes += [("db_nodes", i, n) for i, n in enumerate(self.db_nodes)]
        nodes += [("clients", i, n) for i, n in enumerate(self.clients)]
        for attr in ("name", "mac", "ip", "switch_port"):
            seen: dict[Any, str] = {}
            for section, i, n in nodes:
                val = getattr(n, attr)
                where = f"{section}[{i}].{attr}"
                if val in seen:
                    raise ValueError(f"{where}: {val!r} already used by {seen[val]}")
                seen[val] = where
        cache_names = {c.name for c in self.cache_nodes}
        for i, d in enumerate(self.db_nodes):
            if d.cache_node is not None and d.cache_node not in cache_names:
                raise ValueError(f"db_nodes[{i}].cache_node: no cache node named {d.cache_node!r}")
        return self

    # ---- derived facts ----
    def cache_node_for_db(self, db_name: str) -> Optional[str]:
        if not self.cache_nodes:
            return None
        for i, d in enumerate(self.db_nodes):
            if d.name == db_name:
                return d.cache_node or self.cache_nodes[i % len(self.cache_nodes)].name
        raise KeyError(db_name)

    def partitions(self) -> list[str]:
        """slot -> owning db node name, for 2^partition_bits slots."""
        return partition_table([d.name for d in self.db_nodes], self.switch.partition_bits,
                               self.switch.virtual_nodes)

    def node(self, name: str) -> _Node:
        for n in [*self.cache_nodes, *self.db_nodes, *self.clients]:
            if n.name == name:
                return n
        raise KeyError(name)


def _format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ""
        for part in e["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{loc or '<top>'}: {msg}")
    return "; ".join(lines)


def parse_config(data: Any, source: str = "<config>") -> ClusterConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping")
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{source}: {_format_errors(err)}") from None


def load_config(path: str | Path) -> ClusterConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    return parse_config(data, str(path))


def resolve(cfg: ClusterConfig) -> dict:
    """The JSON form the C++ nodes read: the config plus derived facts."""
    out = cfg.model_dump()
    for section in ("cache_nodes", "db_nodes", "clients"):
        for n, src in zip(out[section], getattr(cfg, section)):
            n["iface"] = src.interface
    for n in out["db_nodes"]:
        n["cache_node"] = cfg.cache_node_for_db(n["name"])
    out["partitions"] = cfg.partitions()
    return out


def write_resolved(cfg: ClusterConfig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(resolve(cfg), indent=1) + "\n")
    return path
