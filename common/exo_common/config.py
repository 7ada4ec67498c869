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
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .partitions import chain_table, check_chains, partition_table

NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,9}$")  # short: Mininet interface names are <name>-eth0
MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
# First MAC bytes no node may have: every one the rf-1 Ruleset 3 rule matches (first-byte mask
# 0xEB, docs/switch-rules.md): aa GET, ae forwarded GET, ba PUT/DELETE, be reserved.
REQUEST_PREFIXES = ("aa", "ae", "ba", "be")


RESERVED_NAMES = ("controller", "switch", "etcd")  # certificate names of the controller, the switch, etcd


def check_name(v: str) -> str:
    """A node, proxy or operator name: also its certificate name and its Mininet host name."""
    if not NAME_RE.match(v):
        raise ValueError("must be 1-10 chars of [a-z0-9], starting with a letter")
    return v


def check_metrics_address(v: str) -> str:
    """"" (no listener) or "<IPv4>:<port>": where a component serves Prometheus /metrics."""
    if v == "":
        return v
    host, sep, port = v.rpartition(":")
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError("must be \"\" or <IPv4>:<port>, e.g. 172.31.0.11:9100")
    ipaddress.IPv4Address(host)
    return v


class ConfigError(ValueError):
    """A cluster config that cannot be used. The message names each bad field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterSection(_Strict):
    name: str = Field("exo", description="Cluster name, used in run directories and logs.")
    mtu: int = Field(1500, ge=576, le=9000, description="IP MTU of every link; 9000 for jumbo frames.")
    udp_port: int = Field(7777, ge=1, le=65535, description="UDP port of requests.")
    service_ip: str = Field("10.0.0.254", description="Not used by requests any more: their IPv4 destination "
                            "carries the key hash (docs/wire-format.md). Accepted so older configs load; still "
                            "the default IPv4 destination of exo-loadgen's `--dst-mac` mode.")

    @field_validator("service_ip")
    @classmethod
    def _ip(cls, v: str) -> str:
        ipaddress.IPv4Address(v)
        return v


class SwitchSection(_Strict):
    dpid: int = Field(1, ge=1, description="OpenFlow datapath id of the switch.")
    bridge: str = Field("exo-s1", description="OVS bridge name (emulation).")
    cache_rule_capacity: int = Field(4096, ge=1, description="C: exact-match rules the switch holds for Ruleset 2.")
    rule_update_rate: float = Field(50.0, gt=0, description="R: flow-mods per second the switch accepts (50 on the thesis's Pica8 P3922). The controller never sends more in any 1 s window, static rules included.")
    fast_add_fraction: float = Field(0.1, ge=0, lt=1, description="Share of C kept as the fast-add buffer: cache nodes together select at most C*(1-fraction) keys, so adds can run ahead of deferred deletes (docs/cache-fill.md).")
    partition_bits: int = Field(8, ge=1, le=12, description="Ruleset 3 has 2^bits wildcard rules (hash-space slots).")
    virtual_nodes: int = Field(64, ge=1, le=1024, description="Points per db node on the consistent-hash ring.")
    cache_match: Literal["ipv4_dst", "eth_dst"] = Field("ipv4_dst", description="What Ruleset 2 matches the key hash with. ipv4_dst: the hash's top 32 bits, which every request carries as its IPv4 destination (Open vSwitch can wildcard IP bits, so GETs that miss the cache stay out of its slow path). eth_dst: the whole destination MAC aa:<40-bit hash>, the thesis's layout, for a hardware switch with an exact-match L2 table (docs/switch-rules.md).")
    max_partition_load: float = Field(0.0, ge=0, description="0: plain consistent hashing (few slots per node make it uneven). >= 1: bounded loads, no db node owns more than ceil(this x slots / nodes) slots; 1 balances exactly (common/exo_common/partitions.py).")
    client_meter_pps: int = Field(1_000_000, ge=0, le=0xFFFF_FFFF, description="Frames/s each client's switch port may send: an OpenFlow meter per client port drops the excess (burst: a tenth of a second's worth) and counts it (docs/switch-rules.md, \"Ingress hygiene\"). The default is far above what the emulation sends (`make demo`: under 30,000 requests/s from its 2 clients together at its peak; `make figures` at 3x scale: up to 59,000/s offered from one generator) and is meant for a rack; set it to what one client may legitimately send. 0: no meter (a switch without meter support).")


class HotKeysSection(_Strict):
    """Db nodes: sampled Space-Saving hot-key detection and REPORTs (thesis 3.5.1, docs/cache-fill.md)."""
    top_k: int = Field(256, ge=1, le=100_000, description="k: counters per Space-Saving estimator (one estimator per time segment).")
    sample_rate: float = Field(0.0625, gt=0, le=1, description="Share of GETs that update the estimator (1/16).")
    confidence_z: float = Field(1.0, ge=0, le=5, description="Rates are reported as a lower confidence bound, rate * (1 - z/sqrt(samples)), so a key sampled once or twice (noise) is not reported; 0 reports the plain estimate.")
    segment_ms: int = Field(1000, ge=10, description="Length of one time segment; a new estimator starts every segment.")
    segments: int = Field(4, ge=1, le=64, description="Segments kept (the current one included).")
    weights: list[float] = Field([8.0, 4.0, 2.0, 1.0], description="Weight of each segment's rate, most recent first; one per segment. The current, partly filled segment's weight is scaled by how full it is.")
    load_ewma_alpha: float = Field(0.5, gt=0, le=1, description="EWMA weight of the newest sample of the node's request throughput (its load).")
    report_interval_ms: int = Field(250, ge=10, description="How often a db node REPORTs to its cache node.")
    report_keys: int = Field(128, ge=1, le=100_000, description="Keys per REPORT: the hottest by estimated rate (at most top_k).")

    @model_validator(mode="after")
    def _weights(self) -> "HotKeysSection":
        if len(self.weights) != self.segments:
            raise ValueError(f"weights: has {len(self.weights)} entries, segments is {self.segments}")
        if any(w < 0 for w in self.weights) or not any(w > 0 for w in self.weights):
            raise ValueError("weights: must be >= 0 with at least one > 0")
        return self


class CacheFillSection(_Strict):
    """Cache nodes: selection of the keys to hold from REPORTs (thesis 3.5.2, docs/cache-fill.md)."""
    enabled: bool = Field(True, description="Cache nodes fill themselves from REPORTs. false: only the Cache/Evict RPCs change what is cached.")
    interval_ms: int = Field(100, ge=10, description="How often a cache node snapshots its hot list and runs selection.")
    min_rate: float = Field(1.0, ge=0, description="Requests/s a key needs before it is worth a switch rule.")
    hysteresis: float = Field(0.3, ge=0, description="A key replaces a cached one only if its rate is (1 + hysteresis) times higher; it absorbs the sampling noise of keys near the cut, each swap of which costs two rule updates.")
    report_ttl_ms: int = Field(3000, ge=10, description="A reported key not reported again within this time is dropped from the hot list.")
    hit_ewma_alpha: float = Field(0.5, gt=0, le=1, description="EWMA weight of one second of hit-rate samples of a cached key (a 100 ms round weighs 1-(1-alpha)^0.1).")
    max_fetch_batch: int = Field(256, ge=1, description="Keys fetched per selection round (bounds a round's duration).")


class EmulationSection(_Strict):
    """The wimpy emulator (thesis 4.1.1): many rate-limited db nodes in one DPDK process."""
    value_size: int = Field(512, ge=0, le=8000, description="Bytes of the fixed value every emulated GET returns (thesis 4.2: 512).")
    db_rate_limit_rps: float = Field(0.0, ge=0, description="Requests/s each emulated db node serves at most (its token bucket); the thesis's wimpies: 72,200. 0 = unlimited.")
    lcores: str = Field("0", description="DPDK -l core list of the emulator process.")
    burst: int = Field(32, ge=1, le=512, description="Packets per RX/TX burst.")
    idle_sleep_us: int = Field(20, ge=0, description="Sleep after an empty burst; 0 = spin.")
    eal_args: list[str] = Field(default_factory=list, description="DPDK EAL args that replace the default AF_PACKET vdev on the shared interface (a NIC deployment puts -a PCI here), as for cache nodes.")


class ControllerInstance(_Strict):
    """One controller process of a failover group (docs/design/replication.md, 5.4). Every
    instance presents the same `controller` certificate; the name only tells them apart."""
    name: str = Field(description="Instance name (`python -m exo_controller --instance NAME`; what a standby names as the master): 1-10 chars of [a-z0-9], starting with a letter.")
    openflow_port: int = Field(ge=1, le=65535, description="OpenFlow TCP port of this instance (on controller.openflow_host); the switch connects to every instance.")
    grpc: str = Field(description="gRPC address of this instance's Controller API.")
    metrics: str = Field("", description="<IPv4>:<port> of this instance's Prometheus /metrics listener; \"\": none.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)


ETCD_URL_RE = re.compile(r"^https?://[^/:\s]+:\d{1,5}$")


class ControllerSection(_Strict):
    openflow_host: str = Field("127.0.0.1", description="Address the OpenFlow listener binds.")
    openflow_port: int = Field(6653, ge=1, le=65535, description="OpenFlow TCP port.")
    grpc: str = Field("unix:/tmp/exo/controller.sock", description="gRPC address of the controller API.")
    heartbeat_interval_ms: int = Field(100, ge=10, le=60_000, description="The controller polls every cache node with CacheNode.Stats this often, each call with a deadline of the same length (docs/switch-rules.md, \"Cache node liveness\").")
    metrics: str = Field("", description="<IPv4>:<port> where the controller serves Prometheus text exposition on /metrics over HTTP (docs/operations.md, \"Metrics\"); \"\": none.")
    heartbeat_misses: int = Field(3, ge=1, le=1000, description="Consecutive failed heartbeats after which a cache node is declared DOWN: its Ruleset 2 rules are withdrawn with one flow-mod, the db nodes forget it, and its rule adds are rejected until it rejoins. Its switch port going link-down or deleted declares it DOWN at once.")
    etcd: list[str] = Field(default_factory=list, description="Client URLs (https://<host>:<port>) of the etcd cluster the controller instances elect their master through (docs/design/replication.md, 5.2). Empty: one controller without etcd, as before failover existed.")
    instances: list[ControllerInstance] = Field(default_factory=list, description="The controller processes (docs/design/replication.md, 5.4): the switch connects to all of them, one is master, the others stand by. Empty: the single instance `controller` described by openflow_port, grpc and metrics above. More than one needs etcd.")
    lease_ttl_s: int = Field(2, ge=1, le=60, description="TTL of the master's etcd lease: a master that stops renewing it (stalled, cut off) loses the election after this long. 2 is etcd's minimum with its default timing.")
    failover_probe_ms: int = Field(100, ge=10, le=10_000, description="Standbys call the master's Controller.Ping this often, each with a deadline of the same length; two refused connections in a row revoke the master's lease, so another instance takes over. A deadline alone never does (lease expiry handles a stalled master).")

    @field_validator("etcd")
    @classmethod
    def _etcd(cls, v: list[str]) -> list[str]:
        for i, url in enumerate(v):
            if not ETCD_URL_RE.match(url) or not 1 <= int(url.rpartition(":")[2]) <= 65535:
                raise ValueError(f"[{i}] {url!r}: must look like https://127.0.0.1:2379")
        return v

    @model_validator(mode="after")
    def _instances(self) -> "ControllerSection":
        # A value other than the default would be silently unused (a dumped config repeats defaults: fine).
        per_instance = sorted(f for f in {"openflow_port", "grpc", "metrics"} & self.model_fields_set
                              if getattr(self, f) != type(self).model_fields[f].default)
        if self.instances and per_instance:
            raise ValueError(f"{per_instance[0]}: set per instance in controller.instances[], not here, "
                             "when instances are listed")
        for attr in ("name", "openflow_port", "grpc"):
            seen: dict[Any, int] = {}
            for i, inst in enumerate(self.instances):
                val = getattr(inst, attr)
                if val in seen:
                    raise ValueError(f"instances[{i}].{attr}: {val!r} already used by instances[{seen[val]}]")
                seen[val] = i
        if len(self.instances) > 1 and not self.etcd:
            raise ValueError(f"etcd: {len(self.instances)} controller.instances elect their master through etcd; "
                             "list its client URLs")
        return self

    def all_instances(self) -> list[ControllerInstance]:
        """Every controller process: instances[], or the one the top-level fields describe."""
        if self.instances:
            return list(self.instances)
        return [ControllerInstance(name="controller", openflow_port=self.openflow_port, grpc=self.grpc,
                                   metrics=self.metrics)]

    def instance(self, name: str) -> ControllerInstance:
        for inst in self.all_instances():
            if inst.name == name:
                return inst
        raise KeyError(name)


# replication.factor auto: the chain length where the cluster has enough real db nodes (issue 15:
# a key survives the loss of any one machine, and of a second during the first's catch-up).
AUTO_REPLICATION_FACTOR = 3


class ReplicationSection(_Strict):
    """Chain replication of db nodes (docs/replication.md, docs/design/replication.md): the
    chains resolve() writes, and how the controller master watches db nodes at factor > 1."""
    factor: int | Literal["auto"] = Field("auto", description="Db nodes per chain (`chains` in the resolved config): each slot's owner (its head, as in `partitions`) followed by the next distinct member db nodes clockwise on the consistent-hash ring; with switch.max_partition_load >= 1 the tails are capped the same way as the owners (common/exo_common/partitions.py, chain_table). At most the number of member db nodes; above 1, no db node may be emulated (the emulator's store cannot replicate). 1: every chain is its owner alone, and losing a db node's disk loses its keys. auto (the default): 3 when there are at least 3 member db nodes and none is emulated, else 1; the resolved config holds the number. The thesis figures and the generated test clusters set 1.")

    @field_validator("factor")
    @classmethod
    def _positive(cls, v):
        if v != "auto" and v < 1:
            raise ValueError("must be at least 1, or auto")
        return v
    db_heartbeat_misses: int = Field(5, ge=1, le=1000, description="At factor > 1, consecutive failed db node heartbeats (DbNode.ChainStatus, one every 100 ms with a 100 ms deadline) after which the controller master declares the node DOWN and removes it from every chain (docs/replication.md, \"Failover\"). A reply with another incarnation (the process restarted) declares it DOWN at once; so does its switch port going down. Higher than heartbeat_misses by default: a 2-core machine under load stalls a node for a few hundred milliseconds.")


class SecuritySection(_Strict):
    """Who may change the cluster (docs/security.md): mutual TLS on every gRPC channel and on OpenFlow."""
    insecure_dev_mode: bool = Field(False, description="true: plaintext gRPC and OpenFlow and no caller checks, for a developer's laptop only. The demo, the tests and the rehearsal run with it false.")
    cert_dir: str = Field("/etc/exo/pki", description="Directory `exo certs init` fills: ca.crt, and <name>.crt + <name>.key for the controller, the switch, every cache node, db node, proxy and operator named here. Each program reads its own pair (by its name) and ca.crt.")
    operators: list[str] = Field(["operator"], description="Names of operator certificates (the exo CLI, dashboards): they may read stats and rules and pin or evict keys, nothing else.")

    @field_validator("operators")
    @classmethod
    def _operators(cls, v: list[str]) -> list[str]:
        for name in v:
            try:
                check_name(name)
            except ValueError as err:
                raise ValueError(f"{name!r}: {err}") from None
        return v


class _Node(_Strict):
    name: str
    mac: str
    ip: str
    switch_port: int = Field(ge=1, le=0xFFFFFF00)
    iface: Optional[str] = Field(None, description="Data-plane interface; default <name>-eth0.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)

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
            raise ValueError("must not start with aa, ae, ba or be: those prefixes carry key hashes")
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
    capacity: int = Field(1000, ge=1, description="Keys this node selects and holds (its share of Ruleset 2). The map is allocated twice as large so entries whose rule deletion is still queued at the switch keep being served.")
    lcores: str = Field("0", description="DPDK -l core list; one RX/TX loop per lcore.")
    burst: int = Field(32, ge=1, le=512, description="Packets per RX/TX burst.")
    idle_sleep_us: int = Field(20, ge=0, description="Sleep after an empty burst; 0 = spin (deployment).")
    eal_args: list[str] = Field(default_factory=list, description="Extra DPDK EAL args (a NIC deployment puts -a PCI here).")
    metrics: str = Field("", description="<IPv4>:<port> of this node's Prometheus /metrics HTTP listener; \"\": none.")
    rate_limit_rps: float = Field(0.0, ge=0, description="Requests/s this node answers at most; frames beyond that are dropped and counted (rate_limited). 0 = unlimited (deployment). Scaled experiments set it to keep the thesis's cache : db capacity ratio (docs/figures.md).")


class DbNodeConfig(_Node):
    grpc: str = Field(description="gRPC address of this db node's control service.")
    data_dir: str = Field(description="RocksDB directory.")
    threads: int = Field(2, ge=1, le=64, description="Packet threads (one AF_PACKET socket each, fanout).")
    sync_writes: bool = Field(True, description="fsync the RocksDB WAL before acknowledging a write.")
    cache_node: Optional[str] = Field(None, description="Cache node serving this node's partitions; default round-robin.")
    metrics: str = Field("", description="<IPv4>:<port> of this node's Prometheus /metrics HTTP listener; \"\": none (emulated nodes serve none).")
    emulator: Optional[str] = Field(None, description="Name of the wimpy-emulator process that hosts this node (thesis 4.1.1; emulator/README.md) instead of an exo-db-node. Nodes with the same emulator share ip, switch_port and iface; each keeps its own mac, grpc and partitions.")
    member: bool = Field(True, description="false: a configured spare. It is part of the cluster (switch port, certificate, cache node) but holds no slots: partitions and chains are computed over the member db nodes only. At least one db node must be a member.")


class ClientConfig(_Node):
    pass


class ProxyConfig(_Strict):
    """An exo-proxy (docs/proxy.md): it speaks for one client host and has its own certificate."""
    name: str = Field(description="Proxy name (its certificate's name): 1-10 chars of [a-z0-9], starting with a letter.")
    client: str = Field(description="The clients[] entry whose interface and addresses the proxy uses.")
    metrics: str = Field("", description="<IPv4>:<port> of the proxy's Prometheus /metrics HTTP listener; \"\": none.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)


class ClusterConfig(_Strict):
    cluster: ClusterSection = ClusterSection()
    switch: SwitchSection = SwitchSection()
    controller: ControllerSection = ControllerSection()
    hot_keys: HotKeysSection = HotKeysSection()
    cache_fill: CacheFillSection = CacheFillSection()
    emulation: EmulationSection = EmulationSection()
    cache_nodes: list[CacheNodeConfig] = Field(default_factory=list)
    db_nodes: list[DbNodeConfig] = Field(min_length=1)
    clients: list[ClientConfig] = Field(default_factory=list)
    proxies: list[ProxyConfig] = Field(default_factory=list)
    security: SecuritySection = SecuritySection()
    replication: ReplicationSection = ReplicationSection()

    @model_validator(mode="before")
    @classmethod
    def _resolve_auto_factor(cls, data: Any) -> Any:
        """replication.factor auto -> a number, from the db nodes as written (before the rest is
        validated, so every later check and the resolved config see the number)."""
        if not isinstance(data, dict):
            return data
        rep = data.get("replication")
        if rep is None:
            rep = {}
        if not isinstance(rep, dict) or rep.get("factor", "auto") != "auto":
            return data
        dbs = [d if isinstance(d, dict) else d.model_dump() for d in data.get("db_nodes") or []
               if isinstance(d, (dict, BaseModel))]
        members = [d for d in dbs if d.get("member", True)]
        emulated = any(d.get("emulator") is not None for d in dbs)
        factor = AUTO_REPLICATION_FACTOR if len(members) >= AUTO_REPLICATION_FACTOR and not emulated else 1
        return {**data, "replication": {**rep, "factor": factor}}

    @model_validator(mode="after")
    def _cross_checks(self) -> "ClusterConfig":
        self._check_identities()
        nodes = [("cache_nodes", i, n) for i, n in enumerate(self.cache_nodes)]
        nodes += [("db_nodes", i, n) for i, n in enumerate(self.db_nodes)]
        nodes += [("clients", i, n) for i, n in enumerate(self.clients)]
        for attr in ("name", "mac", "ip", "switch_port"):
            seen: dict[Any, tuple[str, Optional[str]]] = {}
            for section, i, n in nodes:
                val = getattr(n, attr)
                where = f"{section}[{i}].{attr}"
                # Db nodes of one emulator process share its host's address and port.
                group = getattr(n, "emulator", None) if attr in ("ip", "switch_port") else None
                if val in seen and (group is None or seen[val][1] != group):
                    raise ValueError(f"{where}: {val!r} already used by {seen[val][0]}")
                seen.setdefault(val, (where, group))
        hosts: dict[str, tuple] = {}
        for i, d in enumerate(self.db_nodes):
            if d.emulator is None:
                continue
            where = f"db_nodes[{i}]"
            shape = (d.ip, d.switch_port, d.interface)
            first = hosts.setdefault(d.emulator, (where, shape))
            if first[1] != shape:
                raise ValueError(f"{where}.emulator: nodes of emulator {d.emulator!r} must share ip, switch_port "
                                 f"and iface with {first[0]}")
        cache_names = {c.name for c in self.cache_nodes}
        for i, d in enumerate(self.db_nodes):
            if d.cache_node is not None and d.cache_node not in cache_names:
                raise ValueError(f"db_nodes[{i}].cache_node: no cache node named {d.cache_node!r}")
        if 0 < self.switch.max_partition_load < 1:
            raise ValueError("switch.max_partition_load: must be 0 (plain ring) or >= 1")
        self._check_replication()
        selectable = sum(c.capacity for c in self.cache_nodes)
        steady = self.selectable_rules()
        if selectable > steady:
            raise ValueError(
                f"switch.cache_rule_capacity: {self.switch.cache_rule_capacity} leaves {steady} rules outside the "
                f"fast-add buffer (fast_add_fraction {self.switch.fast_add_fraction:g}) but cache_nodes[*].capacity "
                f"adds up to {selectable}")
        return self

    def _check_replication(self) -> None:
        """Enough member db nodes for every chain, and none that cannot replicate."""
        members = self.members()
        if not members:
            raise ValueError("db_nodes[*].member: no db node is a member; at least one must hold slots")
        factor = self.replication.factor
        if factor > len(members):
            raise ValueError(f"replication.factor: {factor} is more than the {len(members)} member db nodes "
                             "(db_nodes[*].member)")
        if factor > 1:
            for i, d in enumerate(self.db_nodes):
                if d.emulator is not None:
                    raise ValueError(f"replication.factor: {factor} needs real db nodes, but db_nodes[{i}].emulator "
                                     f"is {d.emulator!r} (the emulator's fixed-value store cannot replicate)")

    def _check_identities(self) -> None:
        """Every certificate name (docs/security.md) names one component, and every metrics
        address is well formed and used once."""
        seen: dict[str, str] = {n: "reserved" for n in RESERVED_NAMES}
        named = [("cache_nodes", i, n.name) for i, n in enumerate(self.cache_nodes)]
        named += [("db_nodes", i, n.name) for i, n in enumerate(self.db_nodes)]
        named += [("clients", i, n.name) for i, n in enumerate(self.clients)]
        named += [("proxies", i, p.name) for i, p in enumerate(self.proxies)]
        named += [("security.operators", i, o) for i, o in enumerate(self.security.operators)]
        for section, i, name in named:
            where = f"{section}[{i}]" + ("" if section == "security.operators" else ".name")
            if name in seen:
                raise ValueError(f"{where}: {name!r} already names {seen[name]}")
            seen.setdefault(name, where)
        clients = {c.name for c in self.clients}
        for i, p in enumerate(self.proxies):
            if p.client not in clients:
                raise ValueError(f"proxies[{i}].client: no client named {p.client!r}")
        metrics = [("controller.metrics", self.controller.metrics)]
        metrics += [(f"controller.instances[{i}].metrics", c.metrics) for i, c in enumerate(self.controller.instances)]
        metrics += [(f"cache_nodes[{i}].metrics", n.metrics) for i, n in enumerate(self.cache_nodes)]
        metrics += [(f"db_nodes[{i}].metrics", n.metrics) for i, n in enumerate(self.db_nodes)]
        metrics += [(f"proxies[{i}].metrics", p.metrics) for i, p in enumerate(self.proxies)]
        used: dict[str, str] = {}
        for where, addr in metrics:
            try:
                check_metrics_address(addr)
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None
            if addr and addr in used:
                raise ValueError(f"{where}: {addr!r} already used by {used[addr]}")
            used.setdefault(addr, where)

    # ---- derived facts ----
    def selectable_rules(self) -> int:
        """Ruleset 2 rules outside the fast-add buffer: what cache nodes may select together."""
        return int(self.switch.cache_rule_capacity * (1 - self.switch.fast_add_fraction))

    def cache_node_for_db(self, db_name: str) -> Optional[str]:
        if not self.cache_nodes:
            return None
        for i, d in enumerate(self.db_nodes):
            if d.name == db_name:
                return d.cache_node or self.cache_nodes[i % len(self.cache_nodes)].name
        raise KeyError(db_name)

    def members(self) -> list[str]:
        """Names of the db nodes that hold slots (db_nodes[].member), in config order."""
        return [d.name for d in self.db_nodes if d.member]

    def partitions(self) -> list[str]:
        """slot -> owning db node name, for 2^partition_bits slots."""
        return partition_table(self.members(), self.switch.partition_bits,
                               self.switch.virtual_nodes, self.switch.max_partition_load)

    def chains(self) -> list[list[str]]:
        """slot -> [head, ..., tail] (replication.factor member db nodes); heads are partitions()."""
        return chain_table(self.members(), self.switch.partition_bits, self.switch.virtual_nodes,
                           self.switch.max_partition_load, self.replication.factor)

    def roles(self) -> dict[str, str]:
        """Certificate name -> role (controller, switch, cache, db, proxy, operator): who may call
        which RPC is declared per role in proto/exoproto/control.proto (docs/security.md)."""
        out = {"controller": "controller", "switch": "switch"}
        out.update({n.name: "cache" for n in self.cache_nodes})
        out.update({n.name: "db" for n in self.db_nodes})
        # A wimpy emulator process speaks for every db node it hosts, with one certificate.
        out.update({n.emulator: "db" for n in self.db_nodes if n.emulator is not None})
        out.update({p.name: "proxy" for p in self.proxies})
        out.update({o: "operator" for o in self.security.operators})
        return out

    def for_instance(self, name: str) -> "ClusterConfig":
        """This config as controller instance `name` sees it: controller.openflow_port, grpc and
        metrics are that instance's (so the single-controller code paths read them unchanged)."""
        inst = self.controller.instance(name)
        ctl = self.controller.model_copy(update={"openflow_port": inst.openflow_port, "grpc": inst.grpc,
                                                 "metrics": inst.metrics})
        return self.model_copy(update={"controller": ctl})

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
        # Model validators raise "field.path: why"; fold that path into the location.
        msg = msg.removeprefix("Value error, ")
        m = re.match(r"^([a-z_][\w.\[\]*]*): (.*)$", msg, re.S)
        if m and e["type"] == "value_error":
            loc = f"{loc}.{m.group(1)}" if loc else m.group(1)
            msg = m.group(2)
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
    """The JSON form the C++ nodes read: the config plus derived facts, checked against the
    ResolvedCluster message (proto/exoproto/cluster.proto) that the C++ reader parses it with.
    `partitions` (slot -> owner) and `chains` (slot -> [owner, ...]) are computed over the
    member db nodes; with replication.factor 1 every chain is [owner]."""
    out = cfg.model_dump()
    for section in ("cache_nodes", "db_nodes", "clients"):
        for n, src in zip(out[section], getattr(cfg, section)):
            n["iface"] = src.interface
    for n in out["db_nodes"]:
        n["cache_node"] = cfg.cache_node_for_db(n["name"])
    # Every controller process, also the single one of a config without instances[], so the
    # C++ nodes can reach whichever is master.
    out["controller"]["instances"] = [i.model_dump() for i in cfg.controller.all_instances()]
    out["partitions"] = cfg.partitions()
    out["chains"] = [{"nodes": chain} for chain in cfg.chains()]
    # The controller's own setting (it reads the YAML): no node needs it.
    out["replication"].pop("db_heartbeat_misses", None)
    check_resolved(out)
    return out


def check_resolved(out: dict) -> None:
    """Raise ConfigError unless `out` has exactly the fields of ResolvedCluster, each of the
    message's type. Both directions: a key this schema writes that the message lacks, and a
    message field this schema does not write, are errors (the C++ reader would refuse the
    file), so the schema and cluster.proto cannot drift apart unnoticed. The type check also
    catches a value too large for the C++ side (a capacity above 2^32 - 1). Then the chain table
    is held to the partition table (partitions.check_chains): one chain per slot, headed by the
    slot's owner, of at most replication.factor distinct member db nodes."""
    from google.protobuf import json_format
    from exoproto.cluster_pb2 import ResolvedCluster
    _check_fields(out, ResolvedCluster.DESCRIPTOR, "")
    try:
        json_format.ParseDict(out, ResolvedCluster())
    except json_format.ParseError as err:
        raise ConfigError(f"resolved config does not fit proto/exoproto/cluster.proto: {err}") from None
    # The derived tables against each other: the chains' heads are the partitions.
    members = [d["name"] for d in out["db_nodes"] if d["member"]]
    try:
        check_chains([c["nodes"] for c in out["chains"]], out["partitions"], out["replication"]["factor"], members)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _check_fields(value: Any, desc, where: str) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"{where or '<top>'}: resolved to {type(value).__name__}, cluster.proto has a message")
    fields = {f.name: f for f in desc.fields}
    unknown, missing = sorted(set(value) - set(fields)), sorted(set(fields) - set(value))
    if unknown or missing:
        prefix = f"{where}." if where else ""
        parts = [f"{prefix}{k}: resolved but not in cluster.proto" for k in unknown]
        parts += [f"{prefix}{k}: in cluster.proto but not resolved" for k in missing]
        raise ConfigError("; ".join(parts))
    for name, f in fields.items():
        if f.message_type is None:
            continue
        at = f"{where}.{name}" if where else name
        if not f.is_repeated:
            _check_fields(value[name], f.message_type, at)
            continue
        if not isinstance(value[name], list):
            raise ConfigError(f"{at}: resolved to {type(value[name]).__name__}, cluster.proto has a list")
        for i, item in enumerate(value[name]):
            _check_fields(item, f.message_type, f"{at}[{i}]")


def write_resolved(cfg: ClusterConfig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(resolve(cfg), indent=1) + "\n")
    return path
