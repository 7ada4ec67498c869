"""Switch rules as plain data (Faucet style): builders RETURN FlowMods, nothing here talks to a switch.

See docs/switch-rules.md. Table 0 is the ingress check (ingress.py: who may send what from
which port, the per-client meters); what passes goes to table 1, the three rulesets of the
thesis (Table 3.1):

    Ruleset 2  priority 200  eth_dst = aa:../ff:.., ipv4_dst = top 32 hash bits  -> cache node's port
    Ruleset 3  priority 100  eth_dst = aa:<slot>/eb:<top bits>   -> owning db node's port
               (replication.factor > 1: aa:<slot>/fb:.. -> read server, ba:<slot>/ff:.. -> head;
               reconciled state, PartitionBook)
    Ruleset 1  priority  50  eth_dst = node MAC (exact)          -> node's port
    (ARP)      priority  40  eth_type = 0x0806                  -> FLOOD

The layout keeps a GET that misses the cache out of Open vSwitch's slow path: the hot-key rules
match the hash as an IPv4 /32 (every request carries the top 32 bits of its key hash as its IPv4
destination, docs/wire-format.md), which OVS's prefix tries wildcard, and Ruleset 1 sits below
the request rules so a request never visits its exact-MAC subtable (which would pin all 48 MAC
bits in the datapath flow). docs/switch-rules.md, "Why this layout", has the measurements.

The table-miss is the OpenFlow 1.3 default: drop.

Cookies carry the ruleset so rules read back from the switch can be classified:
    cookie = (0xE0 | ruleset) << 56 | index
so `dump-flows` shows 0xe1..., 0xe2..., 0xe3...; foreign cookies decode to None.
"""
from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Optional

# The key-hash width and request prefixes are defined once, in exoskeleton.keyhash.
from exoskeleton.keyhash import HASH_BITS, HASH_MASK, PREFIX_ANY_MASK, PREFIX_FORWARDED, PREFIX_GET, PREFIX_OTHER  # noqa: F401
from exoskeleton.keyhash import REQUEST_IP_SHIFT as IP_SHIFT
from exoskeleton.keyhash import PREFIX_READ_MASK, PREFIX_WRITE_MASK  # Ruleset 3 at rf > 1

MAC_MASK = (1 << 48) - 1

# Ruleset 2 matches the top 32 bits of the key hash (the request's IPv4 destination), so the
# rule book's unit is the hash with its low IP_SHIFT bits cleared: two cached keys whose hashes
# differ only there share one rule (refcounted like any shared hash), and a non-cached key that
# shares a rule goes to the cache node, which forwards it to its db node (a miss, still correct).
RULE_HASH_MASK = HASH_MASK & ~((1 << IP_SHIFT) - 1)
ETH_TYPE_IPV4 = 0x0800
GET_PREFIX_MASK = 0xFF << HASH_BITS  # eth_dst mask: the prefix byte only (exactly 0xAA)


# What Ruleset 2 matches the hash with (switch.cache_match): "ipv4_dst" (above; for Open vSwitch,
# whose classifier can wildcard IP bits but not MAC bits) or "eth_dst", the thesis's exact
# aa:<40-bit hash> (for a hardware switch that puts exact MAC matches in its L2 table).
CACHE_MATCHES = ("ipv4_dst", "eth_dst")


def rule_hash(khash: int, match: str = "ipv4_dst") -> int:
    """The part of a 40-bit key hash a Ruleset 2 rule matches on (the book's key)."""
    return khash & (RULE_HASH_MASK if match == "ipv4_dst" else HASH_MASK)


def ip_to_int(ip: str) -> int:
    parts = ip.split(".")
    if len(parts) != 4:
        raise ValueError(f"not an IPv4 address: {ip!r}")
    return int.from_bytes(bytes(int(p) for p in parts), "big")


def int_to_ip(value: int) -> str:
    return ".".join(str(b) for b in (value & 0xFFFF_FFFF).to_bytes(4, "big"))

assert PREFIX_GET & PREFIX_ANY_MASK == PREFIX_FORWARDED & PREFIX_ANY_MASK == PREFIX_OTHER & PREFIX_ANY_MASK == PREFIX_GET

RULESET_NODES = 1
RULESET_CACHE = 2
RULESET_PARTITIONS = 3
RULESET_INGRESS = 4  # table 0's hygiene rules (ingress.py); not one of the thesis's rulesets
RULESETS = (RULESET_NODES, RULESET_CACHE, RULESET_PARTITIONS, RULESET_INGRESS)

# Table 0 checks where a frame came from (ingress.py); table 1 decides where it goes (Rulesets
# 1-3). OpenFlow's goto_table only goes forward, and the check must come first.
INGRESS_TABLE = 0
FORWARD_TABLE = 1

# Ruleset 1 below the request rules: requests (prefix 0xAA/0xBA) always match Ruleset 3, so OVS
# never looks them up in Ruleset 1's exact-MAC subtable (it visits subtables by priority and stops
# below the best match). Node MACs never start with 0xAA/0xBA (config validator): the rulesets
# are disjoint, so this order changes no forwarding decision.
PRIORITY = {RULESET_CACHE: 200, RULESET_PARTITIONS: 100, RULESET_NODES: 50}
# ARP floods. Below Ruleset 1 so a unicast ARP reply (which also matches its node's Ruleset 1
# rule) is not an overlap of two rules at the same priority (undefined order in OpenFlow).
PRIORITY_ARP = 40

COOKIE_TAG = 0xE0
COOKIE_TAG_MASK = 0xF0 << 56
COOKIE_INDEX_MASK = (1 << 56) - 1
ARP_INDEX = 0xFF_FFFF  # index of the ARP rule in the Ruleset 1 cookie family

ETH_TYPE_ARP = 0x0806
OFPP_FLOOD = 0xFFFF_FFFB  # OpenFlow 1.3 reserved port; same value in os-ken's ofproto_v1_3

ADD = "add"
DELETE = "delete"                # non-strict: every flow matching cookie/cookie_mask (+ out_port)
DELETE_STRICT = "delete_strict"  # exactly this match + priority


def make_cookie(ruleset: int, index: int) -> int:
    if ruleset not in RULESETS:
        raise ValueError(f"no ruleset {ruleset}")
    return ((COOKIE_TAG | ruleset) << 56) | (index & COOKIE_INDEX_MASK)


def ruleset_of_cookie(cookie: int) -> Optional[int]:
    """1, 2, 3 (table 1) or 4 (table 0, ingress.py) for a cookie we made; None for anything else
    (someone else's flow)."""
    top = (cookie >> 56) & 0xFF
    if top & 0xF0 != COOKIE_TAG or (top & 0x0F) not in RULESETS:
        return None
    return top & 0x0F


def cookie_filter(ruleset: int) -> tuple[int, int]:
    """(cookie, cookie_mask) selecting one ruleset (0 = all of ours) in a stats/delete request."""
    if ruleset == 0:
        return COOKIE_TAG << 56, COOKIE_TAG_MASK
    return (COOKIE_TAG | ruleset) << 56, 0xFF << 56


def mac_to_int(mac: str) -> int:
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return int("".join(f"{int(p, 16):02x}" for p in parts), 16)


def int_to_mac(value: int) -> str:
    return ":".join(f"{b:02x}" for b in (value & MAC_MASK).to_bytes(6, "big"))


@dataclass(frozen=True)
class FlowMod:
    """One OpenFlow 1.3 flow-mod, independent of any OpenFlow library.

    out_port: for ADD the port the flow outputs to; for DELETE / DELETE_STRICT the OpenFlow
    out_port *filter* (only flows that output to that port are deleted; None = any port).
    An ADD does at least one of: output (out_port), goto_table, or drop (drop=True, no
    instructions at all: an explicit drop rule whose packet count is its counter).
    """
    command: str
    priority: int
    cookie: int
    out_port: Optional[int] = None
    eth_dst: Optional[int] = None      # 48-bit int
    eth_dst_mask: Optional[int] = None  # None = exact match
    eth_type: Optional[int] = None
    ipv4_dst: Optional[int] = None     # 32-bit int, exact (Ruleset 2)
    cookie_mask: int = 0               # only meaningful for DELETE
    all_tables: bool = False           # DELETE in every table (the flush), not just `table`
    table: int = FORWARD_TABLE
    # table 0 (ingress.py): exact matches on the sender, and what to do besides output
    in_port: Optional[int] = None
    eth_src: Optional[int] = None      # 48-bit int, exact
    ipv4_src: Optional[int] = None     # 32-bit int, exact
    ip_dscp: Optional[int] = None      # 6 bits
    arp_spa: Optional[int] = None      # 32-bit int, exact
    arp_sha: Optional[int] = None      # 48-bit int, exact
    meter_id: Optional[int] = None     # OFPIT_METER before the actions
    set_ip_dscp: Optional[int] = None  # set_field ip_dscp
    goto_table: Optional[int] = None
    drop: bool = False

    @property
    def ruleset(self) -> Optional[int]:
        return ruleset_of_cookie(self.cookie)

    @property
    def rule_hash(self) -> Optional[int]:
        """The key hash (rule_hash form) a Ruleset 2 flow matches; None for other flows."""
        if self.ipv4_dst is not None:
            return self.ipv4_dst << IP_SHIFT
        if self.ruleset == RULESET_CACHE and self.eth_dst is not None and self.eth_dst_mask is None:
            return self.eth_dst & HASH_MASK  # the eth_dst form
        return None

    def match_key(self) -> tuple:
        """What makes two flows "the same flow" in OpenFlow: table, match fields + priority."""
        return (self.table, self.priority, self.in_port, self.eth_type, self.eth_src, self.eth_dst,
                self.eth_dst_mask, self.ipv4_src, self.ipv4_dst, self.ip_dscp, self.arp_spa, self.arp_sha)

    def actions_text(self) -> str:
        """ovs-ofctl's actions= text of an ADD ("drop" when it does nothing)."""
        acts = []
        if self.meter_id is not None:
            acts.append(f"meter:{self.meter_id}")
        if self.set_ip_dscp is not None:
            acts.append(f"set_field:{self.set_ip_dscp}->ip_dscp")
        if self.out_port is not None:
            acts.append("FLOOD" if self.out_port == OFPP_FLOOD else f"output:{self.out_port}")
        if self.goto_table is not None:
            acts.append(f"goto_table:{self.goto_table}")
        return ",".join(acts) or "drop"

    def __str__(self) -> str:
        """Like an ovs-ofctl flow: `add table=1 cookie=.. priority=.. dl_dst=.. actions=..`."""
        parts = [self.command, f"table={self.table}", f"cookie={self.cookie:#x}", f"priority={self.priority}"]
        if self.all_tables:
            parts[1] = "table=all"
        if self.in_port is not None:
            parts.append(f"in_port={self.in_port}")
        if self.eth_type is not None:
            parts.append(f"dl_type={self.eth_type:#06x}")
        if self.eth_src is not None:
            parts.append(f"dl_src={int_to_mac(self.eth_src)}")
        if self.eth_dst is not None:
            dst = int_to_mac(self.eth_dst)
            if self.eth_dst_mask is not None:
                dst += "/" + int_to_mac(self.eth_dst_mask)
            parts.append(f"dl_dst={dst}")
        for name, value, fmt in (("nw_src", self.ipv4_src, int_to_ip), ("nw_dst", self.ipv4_dst, int_to_ip),
                                 ("ip_dscp", self.ip_dscp, str), ("arp_spa", self.arp_spa, int_to_ip),
                                 ("arp_sha", self.arp_sha, int_to_mac)):
            if value is not None:
                parts.append(f"{name}={fmt(value)}")
        if self.cookie_mask:
            parts[2] += f"/{self.cookie_mask:#x}"
        if self.command != ADD:
            if self.out_port is not None:
                parts.append(f"out_port={self.out_port}")
        else:
            parts.append(f"actions={self.actions_text()}")
        return " ".join(parts)


# ---------------------------------------------------------------- Ruleset 1, and Ruleset 3's matches

def flush_flowmod() -> FlowMod:
    """Delete every flow (used when a (re)connected switch's table is not what we would program:
    the controller owns it)."""
    return FlowMod(command=DELETE, priority=0, cookie=0, cookie_mask=0, all_tables=True)


def withdraw_flowmod(port: int) -> FlowMod:
    """Delete every Ruleset 2 rule that outputs to `port` at once (a cache node declared DOWN):
    non-strict DELETE in table 1, cookie/cookie_mask = Ruleset 2, out_port filter = the port."""
    cookie, mask = cookie_filter(RULESET_CACHE)
    return FlowMod(command=DELETE, priority=PRIORITY[RULESET_CACHE], cookie=cookie, cookie_mask=mask,
                   out_port=port)


def node_flowmods(cfg) -> list[FlowMod]:
    """Ruleset 1: each cache node, db node and client gets eth_dst=MAC -> its port; plus ARP flood."""
    mods = []
    nodes = [*cfg.cache_nodes, *cfg.db_nodes, *cfg.clients]
    for i, n in enumerate(nodes):
        mods.append(FlowMod(command=ADD, priority=PRIORITY[RULESET_NODES],
                            cookie=make_cookie(RULESET_NODES, i),
                            eth_dst=mac_to_int(n.mac), out_port=n.switch_port))
    mods.append(arp_flowmod())
    return mods


def arp_flowmod() -> FlowMod:
    return FlowMod(command=ADD, priority=PRIORITY_ARP, cookie=make_cookie(RULESET_NODES, ARP_INDEX),
                   eth_type=ETH_TYPE_ARP, out_port=OFPP_FLOOD)


def partition_match(slot: int, bits: int) -> tuple[int, int]:
    """(eth_dst, eth_dst_mask) of the Ruleset 3 rule for `slot` (top `bits` bits of the hash)."""
    if not 0 <= slot < (1 << bits):
        raise ValueError(f"slot {slot} out of range for {bits} bits")
    shift = HASH_BITS - bits
    value = (PREFIX_GET << HASH_BITS) | (slot << shift)
    mask = (PREFIX_ANY_MASK << HASH_BITS) | ((((1 << bits) - 1) << shift) & HASH_MASK)  # AA AE BA (BE)
    return value, mask


def _slot_match(prefix: int, prefix_mask: int, slot: int, bits: int) -> tuple[int, int]:
    """(eth_dst, eth_dst_mask): first byte `prefix` under `prefix_mask`, then the slot's bits."""
    if not 0 <= slot < (1 << bits):
        raise ValueError(f"slot {slot} out of range for {bits} bits")
    shift = HASH_BITS - bits
    return (prefix << HASH_BITS) | (slot << shift), \
        (prefix_mask << HASH_BITS) | ((((1 << bits) - 1) << shift) & HASH_MASK)


def read_match(slot: int, bits: int) -> tuple[int, int]:
    """The rf > 1 read rule of `slot`: first bytes AA (client GETs) and AE (GETs a cache node
    forwards) -> the slot's read server (docs/design/replication.md, 2.3)."""
    return _slot_match(PREFIX_GET, PREFIX_READ_MASK, slot, bits)


def write_match(slot: int, bits: int) -> tuple[int, int]:
    """The rf > 1 write rule of `slot`: first byte BA exactly (PUT, DELETE) -> the chain's head."""
    return _slot_match(PREFIX_OTHER, PREFIX_WRITE_MASK, slot, bits)


# ---------------------------------------------------------------- Ruleset 3: the partition book

# Cookie index of a slot's write rule (rf > 1): make_cookie(3, WRITE_RULE | slot). The single rule
# (rf 1) and the read rule are make_cookie(3, slot). Slots are < 4096 (partition_bits <= 12).
WRITE_RULE = 1 << 16


class PartitionBook:
    """Ruleset 3 as desired state (docs/design/replication.md, 2.3): slot -> (read port, write
    port), and the flow-mods that say so. The layout is fixed by the config: with one rule per
    slot (replication.factor 1) a slot has one port, matched by partition_match (GETs, forwarded
    GETs and writes alike); with two (factor > 1) a read rule (read_match: AA and AE -> the read
    server, normally the chain's tail) and a write rule (write_match: BA -> the head). Only the
    ports change while the cluster runs (move, apply_chains), and a change is one ADD with the same
    match and priority, which replaces the rule's action. Rules are named by their cookie index
    (`index`): the slot, or WRITE_RULE | slot. Pure data; the updater (rule_updater.py) sends
    the difference to what the switch holds."""

    def __init__(self, bits: int, read_ports: list[int], write_ports: Optional[list[int]] = None,
                 two_rules: bool = False):
        slots = 1 << bits
        write_ports = list(read_ports) if write_ports is None else list(write_ports)
        if len(read_ports) != slots or len(write_ports) != slots:
            raise ValueError(f"{len(read_ports)} read and {len(write_ports)} write ports for {slots} slots "
                             f"(switch.partition_bits {bits})")
        if not two_rules:
            for slot, (r, w) in enumerate(zip(read_ports, write_ports)):
                if r != w:
                    raise ValueError(f"slot {slot}: read port {r} and write port {w} differ, but one rule per "
                                     "slot (replication.factor 1) has one port")
        self.bits = bits
        self.two_rules = two_rules
        self._read = list(read_ports)
        self._write = list(write_ports)

    @classmethod
    def from_chains(cls, chains: list[list[str]], ports: dict[str, int], bits: int,
                    two_rules: bool) -> "PartitionBook":
        """Each slot's read port is its tail's (chain[-1]), its write port its head's (chain[0])."""
        read, write = [], []
        for slot, chain in enumerate(chains):
            r, w = _chain_ports(slot, chain, ports)
            read.append(r)
            write.append(w)
        return cls(bits, read, write, two_rules)

    @classmethod
    def from_config(cls, cfg) -> "PartitionBook":
        """The initial book: the resolved config's chains (with replication.factor 1, the owners
        of cfg.partitions(): exactly the Ruleset 3 of before chains existed)."""
        return cls.from_chains(cfg.chains(), {d.name: d.switch_port for d in cfg.db_nodes},
                               cfg.switch.partition_bits, cfg.replication.factor > 1)

    def copy(self) -> "PartitionBook":
        return PartitionBook(self.bits, self._read, self._write, self.two_rules)

    @property
    def slots(self) -> int:
        return 1 << self.bits

    def read_port(self, slot: int) -> int:
        return self._read[slot]

    def write_port(self, slot: int) -> int:
        return self._write[slot]

    def indices(self) -> list[int]:
        """Every rule's cookie index, in the order a switch is programmed: slot by slot, each
        slot's read rule before its write rule."""
        if not self.two_rules:
            return list(range(self.slots))
        return [i for slot in range(self.slots) for i in (slot, WRITE_RULE | slot)]

    def _split(self, index: int) -> tuple[int, bool]:
        slot, write = index & (WRITE_RULE - 1), bool(index & WRITE_RULE)
        if index & ~(WRITE_RULE | (WRITE_RULE - 1)) or not 0 <= slot < self.slots or (write and not self.two_rules):
            raise KeyError(f"no Ruleset 3 rule with cookie index {index:#x} in this layout")
        return slot, write

    def port(self, index: int) -> int:
        """The port rule `index` outputs to."""
        slot, write = self._split(index)
        return self._write[slot] if write else self._read[slot]

    def rules(self) -> dict[int, int]:
        """index -> port of every rule."""
        return {i: self.port(i) for i in self.indices()}

    def flowmod(self, index: int, port: Optional[int] = None) -> FlowMod:
        """The ADD of rule `index` (to `port`, default: the book's)."""
        slot, write = self._split(index)
        if not self.two_rules:
            value, mask = partition_match(slot, self.bits)
        else:
            value, mask = (write_match if write else read_match)(slot, self.bits)
        return FlowMod(command=ADD, priority=PRIORITY[RULESET_PARTITIONS],
                       cookie=make_cookie(RULESET_PARTITIONS, index),
                       eth_dst=value, eth_dst_mask=mask, out_port=self.port(index) if port is None else port)

    def flowmods(self) -> list[FlowMod]:
        return [self.flowmod(i) for i in self.indices()]

    def index_of(self, fm: FlowMod) -> Optional[int]:
        """The index of a flow that is one of this layout's rules (same table, match, priority,
        cookie and a plain output), whatever its port; None for anything else."""
        index = fm.cookie & COOKIE_INDEX_MASK
        if fm.ruleset != RULESET_PARTITIONS or fm.out_port is None:
            return None
        try:
            want = self.flowmod(index, fm.out_port)
        except KeyError:
            return None
        return index if fm == want else None

    def adopt(self, installed: Mapping[int, int]) -> None:
        """Take these rules (cookie index -> port, as a switch holds them) as the book's own: a
        new controller master keeps the Ruleset 3 its predecessor left, and the live chain table
        then moves only what differs (design 5.5), instead of the config's layout being sent
        first and moved back after."""
        for index, port in installed.items():
            slot, write = self._split(index)
            if write:
                self._write[slot] = port
            else:
                self._read[slot] = port
                if not self.two_rules:
                    self._write[slot] = port

    def move(self, slot: int, read_port: Optional[int] = None, write_port: Optional[int] = None) -> list[int]:
        """Point `slot`'s read rule at `read_port` and its write rule at `write_port` (None: leave
        it). With one rule per slot both name the one rule: give one of them, or both equal.
        Returns the indices of the rules whose port changed (one ADD each)."""
        if not 0 <= slot < self.slots:
            raise ValueError(f"slot {slot} out of range for {self.bits} bits")
        if not self.two_rules:
            if read_port is not None and write_port is not None and read_port != write_port:
                raise ValueError(f"slot {slot}: read port {read_port} and write port {write_port} differ, but one "
                                 "rule per slot (replication.factor 1) has one port")
            port = read_port if read_port is not None else write_port
            read_port = write_port = port
        changed = []
        if read_port is not None and read_port != self._read[slot]:
            self._read[slot] = read_port
            changed.append(slot)
        if write_port is not None and write_port != self._write[slot]:
            self._write[slot] = write_port
            if self.two_rules:
                changed.append(WRITE_RULE | slot)
        return changed

    def apply_chains(self, chains: list[list[str]], ports: dict[str, int]) -> list[int]:
        """Take a new chain table (slot -> [head, ..., tail]): read rules to the tails, write
        rules to the heads. Checked whole before anything changes (a bad table changes nothing);
        returns the indices whose port changed."""
        if len(chains) != self.slots:
            raise ValueError(f"chains: {len(chains)} entries for {self.slots} slots")
        wanted = [_chain_ports(slot, chain, ports) for slot, chain in enumerate(chains)]
        if not self.two_rules:
            for slot, (r, w) in enumerate(wanted):
                if r != w:
                    raise ValueError(f"chains[{slot}]: {len(chains[slot])} nodes, but one rule per slot "
                                     "(replication.factor 1) serves a chain of one")
        changed = []
        for slot, (r, w) in enumerate(wanted):
            changed += self.move(slot, read_port=r, write_port=w)
        return changed


def _chain_ports(slot: int, chain: list[str], ports: dict[str, int]) -> tuple[int, int]:
    """(read port, write port) of one chain: its tail's and its head's."""
    if not chain:
        raise ValueError(f"chains[{slot}]: empty")
    for k, name in enumerate(chain):
        if name not in ports:
            raise ValueError(f"chains[{slot}][{k}]: {name!r} is not a db node")
    return ports[chain[-1]], ports[chain[0]]


def partition_flowmods(cfg) -> list[FlowMod]:
    """Ruleset 3 as the config lays it out (PartitionBook.from_config): at replication.factor 1
    one masked rule per slot -> the owning db node's port; above, a read rule to each slot's tail
    and a write rule to its head."""
    return PartitionBook.from_config(cfg).flowmods()


def forwarding_flowmods(cfg) -> list[FlowMod]:
    """Table 1's static rules: Ruleset 1 + ARP, Ruleset 3."""
    return node_flowmods(cfg) + partition_flowmods(cfg)


def static_flowmods(cfg) -> list[FlowMod]:
    """Every static flow: table 0's ingress checks (ingress.py), then table 1's Rulesets 1 and 3."""
    from .ingress import ingress_flowmods  # ingress.py builds on this module's FlowMod
    return ingress_flowmods(cfg) + forwarding_flowmods(cfg)


def static_mods(cfg, ruleset3: bool = True) -> list:
    """What a switch gets after a flush, in order: the meters (ingress.py; a delete of every
    meter first), then every static flow, Ruleset 3 (as the config lays it out) last. Meters come
    first because the client ports' flows use them (a barrier in between: rule_updater.py,
    needs_barrier). ruleset3=False leaves Ruleset 3 out: the updater reconciles it like Ruleset 2
    (PartitionBook), right after these."""
    from .ingress import meter_mods
    mods = [*meter_mods(cfg), *static_flowmods(cfg)]
    if not ruleset3:
        mods = [m for m in mods if not (isinstance(m, FlowMod) and m.ruleset == RULESET_PARTITIONS)]
    return mods


def table_flow_limit(cfg) -> int:
    """What to give OVS as Flow_Table flow_limit for table 1 (FORWARD_TABLE): its static rules
    (one per node, ARP, Ruleset 3: 2^partition_bits rules at replication.factor 1, 2 * 2^bits
    above) plus C, so the C+1th Ruleset 2 rule is refused as on a full switch. Table 0's checks
    are few and fixed by the config; it gets no limit."""
    return len(forwarding_flowmods(cfg)) + cfg.switch.cache_rule_capacity


# ---------------------------------------------------------------- Ruleset 2: the cache rule book

@dataclass(frozen=True)
class CacheRule:
    key_hash: int
    cache_node: str


@dataclass
class BookResult:
    flowmods: list[FlowMod] = field(default_factory=list)
    accepted: int = 0
    rejected: list[tuple[CacheRule, str]] = field(default_factory=list)
    # Of `rejected`, the adds turned down only because the book was at capacity: a transient
    # refusal (nothing counted), which the cache node may send again once it has made room.
    full: list[CacheRule] = field(default_factory=list)

    @property
    def error(self) -> str:
        return "; ".join(f"{r.key_hash:#012x}@{r.cache_node}: {why}" for r, why in self.rejected)

    def touched_hashes(self) -> set[int]:
        return {fm.rule_hash for fm in self.flowmods if fm.rule_hash is not None}


def cache_flowmod(khash: int, out_port: Optional[int], command: str = ADD, match: str = "ipv4_dst") -> FlowMod:
    """The Ruleset 2 rule for `khash`: prefix byte exactly 0xAA (GETs only) and the hash's top 32
    bits as the IPv4 destination; with match="eth_dst", the exact MAC aa:<40-bit hash>."""
    if match not in CACHE_MATCHES:
        raise ValueError(f"cache match must be one of {CACHE_MATCHES}, not {match!r}")
    h = rule_hash(khash, match)
    port = out_port if command == ADD else None
    cookie = make_cookie(RULESET_CACHE, h)
    if match == "eth_dst":
        return FlowMod(command=command, priority=PRIORITY[RULESET_CACHE], cookie=cookie,
                       eth_dst=(PREFIX_GET << HASH_BITS) | h, out_port=port)
    return FlowMod(command=command, priority=PRIORITY[RULESET_CACHE], cookie=cookie, eth_type=ETH_TYPE_IPV4,
                   eth_dst=PREFIX_GET << HASH_BITS, eth_dst_mask=GET_PREFIX_MASK,
                   ipv4_dst=h >> IP_SHIFT, out_port=port)


class CacheRuleBook:
    """The Ruleset 2 state the switch should hold, and the flow-mods to get it there.

    Per rule hash (rule_hash: the 40-bit key hash less its low IP_SHIFT bits) we keep a refcount
    per cache node (two cached keys can share one). The
    rule outputs to the node added most recently that still holds a reference, so:
      * add(h, B) while the rule points at A moves it to B (one ADD: same match+priority replaces);
      * remove(h, A) afterwards changes nothing on the switch;
      * remove(h, B) while A still holds a reference moves the rule back to A;
      * the rule is deleted only when the last reference goes.
    Removing a (hash, node) that holds no reference is a no-op (idempotent).
    Not thread-safe: the os-ken app serialises calls.
    """

    def __init__(self, ports: dict[str, int], capacity: Optional[int] = None, match: str = "ipv4_dst"):
        if match not in CACHE_MATCHES:
            raise ValueError(f"cache match must be one of {CACHE_MATCHES}, not {match!r}")
        self._ports = dict(ports)
        self._capacity = capacity
        self.match = match
        self._refs: dict[int, OrderedDict[str, int]] = {}

    @classmethod
    def from_config(cls, cfg) -> "CacheRuleBook":
        return cls({c.name: c.switch_port for c in cfg.cache_nodes}, cfg.switch.cache_rule_capacity,
                   cfg.switch.cache_match)

    def rule_hash(self, khash: int) -> int:
        return rule_hash(khash, self.match)

    def flowmod(self, khash: int, out_port: Optional[int], command: str = ADD) -> FlowMod:
        return cache_flowmod(khash, out_port, command, self.match)

    def __len__(self) -> int:
        return len(self._refs)

    def hashes(self) -> list[int]:
        return list(self._refs)

    def owner(self, khash: int) -> Optional[str]:
        refs = self._refs.get(self.rule_hash(khash))
        return next(reversed(refs)) if refs else None

    def refcount(self, khash: int, node: str) -> int:
        return self._refs.get(self.rule_hash(khash), {}).get(node, 0)

    def _check_node(self, rule: CacheRule) -> Optional[str]:
        if rule.cache_node not in self._ports:
            known = ", ".join(sorted(self._ports)) or "none configured"
            return f"unknown cache node {rule.cache_node!r} (known: {known})"
        return None

    def _transition(self, khash: int, before: Optional[str]) -> list[FlowMod]:
        after = self.owner(khash)
        if after == before:
            return []
        if after is None:
            return [self.flowmod(khash, None, DELETE_STRICT)]
        return [self.flowmod(khash, self._ports[after])]

    def add(self, rules: Iterable[CacheRule]) -> BookResult:
        res = BookResult()
        for rule in rules:
            why = self._check_node(rule)
            h = self.rule_hash(rule.key_hash)
            if why is None and h not in self._refs and self._capacity is not None \
                    and len(self._refs) >= self._capacity:
                why = f"Ruleset 2 is full ({self._capacity} rules, switch.cache_rule_capacity)"
                res.full.append(rule)
            if why:
                res.rejected.append((rule, why))
                continue
            before = self.owner(h)
            refs = self._refs.setdefault(h, OrderedDict())
            refs[rule.cache_node] = refs.get(rule.cache_node, 0) + 1
            refs.move_to_end(rule.cache_node)
            res.flowmods += self._transition(h, before)
            res.accepted += 1
        return res

    def remove(self, rules: Iterable[CacheRule]) -> BookResult:
        res = BookResult()
        for rule in rules:
            why = self._check_node(rule)
            if why:
                res.rejected.append((rule, why))
                continue
            h = self.rule_hash(rule.key_hash)
            refs = self._refs.get(h)
            res.accepted += 1
            if not refs or rule.cache_node not in refs:
                continue  # nothing to remove: already absent
            before = self.owner(h)
            refs[rule.cache_node] -= 1
            if refs[rule.cache_node] == 0:
                del refs[rule.cache_node]
            if not refs:
                del self._refs[h]
            res.flowmods += self._transition(h, before)
        return res

    def drop_node(self, node: str) -> list[int]:
        """Drop every reference `node` holds (all refcounts); returns the hashes it held. The
        caller compares owners before/after (a hash another node also holds moves to it)."""
        held = [h for h, refs in self._refs.items() if node in refs]
        for h in held:
            refs = self._refs[h]
            del refs[node]
            if not refs:
                del self._refs[h]
        return held

    def snapshot(self, hashes: Iterable[int]) -> dict[int, Optional[OrderedDict]]:
        return {self.rule_hash(h): (OrderedDict(self._refs[self.rule_hash(h)]) if (self.rule_hash(h)) in self._refs else None)
                for h in hashes}

    def restore(self, snap: dict[int, Optional[OrderedDict]]) -> list[FlowMod]:
        """Put the given hashes back to a snapshot; returns the flow-mods that undo the switch side."""
        mods = []
        for h, refs in snap.items():
            before = self.owner(h)
            if refs:
                self._refs[h] = OrderedDict(refs)
            else:
                self._refs.pop(h, None)
            mods += self._transition(h, before)
        return mods

    def all_flowmods(self) -> list[FlowMod]:
        """ADDs for every rule the switch should hold (after a reconnect and flush)."""
        return [self.flowmod(h, self._ports[self.owner(h)]) for h in sorted(self._refs)]


# ---------------------------------------------------------------- adopting a switch's table

@dataclass
class TablePlan:
    """What to do with the table a (re)connected switch already holds (docs/switch-rules.md,
    "Controller restart"). adopt: its static flows are exactly ours, keep everything and take
    `installed` (its Ruleset 2, hash -> port) and `partitions` (its Ruleset 3, cookie index ->
    port, PartitionBook) as confirmed; else flush and program from scratch."""
    adopt: bool
    installed: dict[int, int] = field(default_factory=dict)
    why: str = ""
    partitions: dict[int, int] = field(default_factory=dict)


def switch_flow_as_flowmod(flow) -> Optional[FlowMod]:
    """A flow read back from the switch (ofp_translate.FlowInfo) as the ADD that would have made
    it; None when it has anything we never program (another table, other match fields, other
    instructions or actions, timeouts)."""
    table = getattr(flow, "table_id", FORWARD_TABLE)
    if not getattr(flow, "plain", True) or table not in (INGRESS_TABLE, FORWARD_TABLE):
        return None

    def mac(name):
        v = getattr(flow, name, "")
        return mac_to_int(v) if v else None

    def ip(name):
        v = getattr(flow, name, "")
        return ip_to_int(v) if v else None

    goto = getattr(flow, "goto_table", None)
    return FlowMod(command=ADD, priority=flow.priority, cookie=flow.cookie, out_port=flow.out_port,
                   eth_dst=mac("eth_dst"), eth_dst_mask=mac("eth_dst_mask"), eth_type=flow.eth_type,
                   ipv4_dst=ip("ipv4_dst"), table=table, in_port=getattr(flow, "in_port", None),
                   eth_src=mac("eth_src"), ipv4_src=ip("ipv4_src"), ip_dscp=getattr(flow, "ip_dscp", None),
                   arp_spa=ip("arp_spa"), arp_sha=mac("arp_sha"), meter_id=getattr(flow, "meter_id", None),
                   set_ip_dscp=getattr(flow, "set_ip_dscp", None), goto_table=goto,
                   drop=flow.out_port is None and goto is None)


def _cache_rule_hash(fm: FlowMod, cache_ports: Iterable[int], match: str) -> Optional[int]:
    """The hash of a well-formed Ruleset 2 flow that outputs to a cache node's port, else None."""
    if fm.priority != PRIORITY[RULESET_CACHE] or fm.rule_hash is None or fm.out_port not in cache_ports:
        return None
    h = fm.rule_hash
    return h if fm == cache_flowmod(h, fm.out_port, ADD, match) else None


def plan_table(flows: Iterable, statics: Iterable, cache_ports: Iterable[int],
               match: str = "ipv4_dst", meters: Optional[Iterable] = None,
               db_ports: Optional[Iterable[int]] = None) -> TablePlan:
    """Keep the switch's table when every flow on it is either one of `statics` (table 0's
    ingress checks, Ruleset 1, ARP: same match, priority, cookie and instructions), a
    well-formed Ruleset 2 rule to a cache node's port, or a well-formed Ruleset 3 rule to a db
    node's port, and every static is there; and when its meters (`meters`, as ingress.MeterMod
    ADDs; None = not read) are exactly the meters among `statics`. Anything else (a missing or
    different static or meter, a foreign flow, a Ruleset 2 or 3 rule to an unknown port) means
    flush and program from scratch.

    Ruleset 3 is reconciled state, not a static (docs/design/replication.md, 2.3): the Ruleset 3
    flows among `statics` give only its layout (which matches and cookies exist). A rule of that
    layout to any db node's port (`db_ports`; None: the ports those statics output to) is
    adopted as it is, into `partitions` (cookie index -> port); one that points elsewhere than
    the desired book, or is missing, is the updater's to fix (an ADD each), never a flush. A
    previous controller may have died halfway through moving rules (section 5.5)."""
    from .ingress import meter_problem
    statics = list(statics)
    cache_ports = set(cache_ports)
    meter_why = meter_problem(statics, meters)
    layout = {s.cookie: s for s in statics if isinstance(s, FlowMod) and s.ruleset == RULESET_PARTITIONS}
    db_ports = {s.out_port for s in layout.values()} if db_ports is None else set(db_ports)
    want = Counter(s for s in statics if isinstance(s, FlowMod) and s.ruleset != RULESET_PARTITIONS)
    have: Counter = Counter()
    installed: dict[int, int] = {}
    partitions: dict[int, int] = {}
    foreign: list[str] = []
    for flow in flows:
        fm = switch_flow_as_flowmod(flow)
        if fm is None:
            foreign.append(f"cookie={flow.cookie:#x} priority={flow.priority} (not a flow we program)")
        elif fm.ruleset == RULESET_PARTITIONS:
            rule = layout.get(fm.cookie)
            if rule is None or fm.out_port not in db_ports or fm != replace(rule, out_port=fm.out_port):
                foreign.append(str(fm))
            else:
                partitions[fm.cookie & COOKIE_INDEX_MASK] = fm.out_port
        elif fm.ruleset == RULESET_CACHE:
            h = _cache_rule_hash(fm, cache_ports, match)
            if h is None:
                foreign.append(str(fm))
            else:
                installed[h] = fm.out_port
        elif fm in want:
            have[fm] += 1
        else:
            foreign.append(str(fm))
    missing = want - have
    extra = have - want
    foreign += [str(fm) for fm in extra.elements()]
    if not missing and not foreign and not meter_why:
        return TablePlan(True, installed, partitions=partitions)
    why = [meter_why] if meter_why else []
    if missing:
        why.append(f"{sum(missing.values())} of {sum(want.values())} static flows missing or different")
    if foreign:
        why.append(f"{len(foreign)} flows we would not program (e.g. {foreign[0]})")
    return TablePlan(False, {}, "; ".join(why))
