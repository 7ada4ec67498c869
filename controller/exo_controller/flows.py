"""Switch rules as plain data (Faucet style): builders RETURN FlowMods, nothing here talks to a switch.

See docs/switch-rules.md. Three rulesets (thesis Table 3.1), all in table 0:

    Ruleset 1  priority 300  eth_dst = node MAC (exact)          -> node's port
    (ARP)      priority 290  eth_type = 0x0806                  -> FLOOD
    Ruleset 2  priority 200  eth_dst = aa:<40-bit hash> (exact)  -> cache node's port
    Ruleset 3  priority 100  eth_dst = aa:<slot>/ef:<top bits>   -> owning db node's port

The table-miss is the OpenFlow 1.3 default: drop.

Cookies carry the ruleset so rules read back from the switch can be classified:
    cookie = (0xE0 | ruleset) << 56 | index
so `dump-flows` shows 0xe1..., 0xe2..., 0xe3...; foreign cookies decode to None.
"""
from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Iterable, Optional

# The key-hash width and request prefixes are defined once, in exoskeleton.keyhash.
from exoskeleton.keyhash import HASH_BITS, HASH_MASK, PREFIX_BOTH_MASK, PREFIX_GET, PREFIX_OTHER  # noqa: F401

MAC_MASK = (1 << 48) - 1

assert PREFIX_GET & PREFIX_BOTH_MASK == PREFIX_OTHER & PREFIX_BOTH_MASK == PREFIX_GET

RULESET_NODES = 1
RULESET_CACHE = 2
RULESET_PARTITIONS = 3
RULESETS = (RULESET_NODES, RULESET_CACHE, RULESET_PARTITIONS)

PRIORITY = {RULESET_NODES: 300, RULESET_CACHE: 200, RULESET_PARTITIONS: 100}
# ARP floods. Below Ruleset 1 so a unicast ARP reply (which also matches its node's Ruleset 1
# rule) is not an overlap of two rules at the same priority (undefined order in OpenFlow).
PRIORITY_ARP = 290

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
    """1, 2 or 3 for a cookie we made; None for anything else (someone else's flow)."""
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
    """One OpenFlow 1.3 flow-mod in table 0, independent of any OpenFlow library.

    out_port: for ADD the port the flow outputs to; for DELETE / DELETE_STRICT the OpenFlow
    out_port *filter* (only flows that output to that port are deleted; None = any port).
    """
    command: str
    priority: int
    cookie: int
    out_port: Optional[int] = None
    eth_dst: Optional[int] = None      # 48-bit int
    eth_dst_mask: Optional[int] = None  # None = exact match
    eth_type: Optional[int] = None
    cookie_mask: int = 0               # only meaningful for DELETE
    all_tables: bool = False           # DELETE in every table (the flush), not just table 0

    @property
    def ruleset(self) -> Optional[int]:
        return ruleset_of_cookie(self.cookie)

    def match_key(self) -> tuple:
        """What makes two flows "the same flow" in OpenFlow: match fields + priority."""
        return (self.priority, self.eth_type, self.eth_dst, self.eth_dst_mask)

    def __str__(self) -> str:
        parts = [self.command, f"cookie={self.cookie:#x}", f"priority={self.priority}"]
        if self.eth_type is not None:
            parts.append(f"dl_type={self.eth_type:#06x}")
        if self.eth_dst is not None:
            dst = int_to_mac(self.eth_dst)
            if self.eth_dst_mask is not None:
                dst += "/" + int_to_mac(self.eth_dst_mask)
            parts.append(f"dl_dst={dst}")
        if self.cookie_mask:
            parts[1] += f"/{self.cookie_mask:#x}"
        if self.out_port is not None and self.command != ADD:
            parts.append(f"out_port={self.out_port}")
        elif self.out_port is not None:
            parts.append("actions=FLOOD" if self.out_port == OFPP_FLOOD else f"actions=output:{self.out_port}")
        return " ".join(parts)


# ---------------------------------------------------------------- static rulesets (1 and 3)

def flush_flowmod() -> FlowMod:
    """Delete every flow (used when a (re)connected switch's table is not what we would program:
    the controller owns it)."""
    return FlowMod(command=DELETE, priority=0, cookie=0, cookie_mask=0, all_tables=True)


def withdraw_flowmod(port: int) -> FlowMod:
    """Delete every Ruleset 2 rule that outputs to `port` at once (a cache node declared DOWN):
    non-strict DELETE in table 0, cookie/cookie_mask = Ruleset 2, out_port filter = the port."""
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
    mask = (PREFIX_BOTH_MASK << HASH_BITS) | ((((1 << bits) - 1) << shift) & HASH_MASK)
    return value, mask


def partition_flowmods(cfg) -> list[FlowMod]:
    """Ruleset 3: one masked rule per slot of cfg.partitions() -> the owning db node's port."""
    bits = cfg.switch.partition_bits
    ports = {d.name: d.switch_port for d in cfg.db_nodes}
    mods = []
    for slot, owner in enumerate(cfg.partitions()):
        value, mask = partition_match(slot, bits)
        mods.append(FlowMod(command=ADD, priority=PRIORITY[RULESET_PARTITIONS],
                            cookie=make_cookie(RULESET_PARTITIONS, slot),
                            eth_dst=value, eth_dst_mask=mask, out_port=ports[owner]))
    return mods


def static_flowmods(cfg) -> list[FlowMod]:
    return node_flowmods(cfg) + partition_flowmods(cfg)


def table_flow_limit(cfg) -> int:
    """What to give OVS as Flow_Table flow_limit for table 0: the static rules (one per node,
    ARP, 2^partition_bits) plus C, so the C+1th Ruleset 2 rule is refused as on a full switch."""
    return len(static_flowmods(cfg)) + cfg.switch.cache_rule_capacity


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

    @property
    def error(self) -> str:
        return "; ".join(f"{r.key_hash:#012x}@{r.cache_node}: {why}" for r, why in self.rejected)

    def touched_hashes(self) -> set[int]:
        return {fm.eth_dst & HASH_MASK for fm in self.flowmods if fm.eth_dst is not None}


def cache_flowmod(khash: int, out_port: Optional[int], command: str = ADD) -> FlowMod:
    khash &= HASH_MASK
    return FlowMod(command=command, priority=PRIORITY[RULESET_CACHE],
                   cookie=make_cookie(RULESET_CACHE, khash),
                   eth_dst=(PREFIX_GET << HASH_BITS) | khash,
                   out_port=out_port if command == ADD else None)


class CacheRuleBook:
    """The Ruleset 2 state the switch should hold, and the flow-mods to get it there.

    Per hash we keep a refcount per cache node (two cached keys can share a 40-bit hash). The
    rule outputs to the node added most recently that still holds a reference, so:
      * add(h, B) while the rule points at A moves it to B (one ADD: same match+priority replaces);
      * remove(h, A) afterwards changes nothing on the switch;
      * remove(h, B) while A still holds a reference moves the rule back to A;
      * the rule is deleted only when the last reference goes.
    Removing a (hash, node) that holds no reference is a no-op (idempotent).
    Not thread-safe: the os-ken app serialises calls.
    """

    def __init__(self, ports: dict[str, int], capacity: Optional[int] = None):
        self._ports = dict(ports)
        self._capacity = capacity
        self._refs: dict[int, OrderedDict[str, int]] = {}

    @classmethod
    def from_config(cls, cfg) -> "CacheRuleBook":
        return cls({c.name: c.switch_port for c in cfg.cache_nodes}, cfg.switch.cache_rule_capacity)

    def __len__(self) -> int:
        return len(self._refs)

    def hashes(self) -> list[int]:
        return list(self._refs)

    def owner(self, khash: int) -> Optional[str]:
        refs = self._refs.get(khash & HASH_MASK)
        return next(reversed(refs)) if refs else None

    def refcount(self, khash: int, node: str) -> int:
        return self._refs.get(khash & HASH_MASK, {}).get(node, 0)

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
            return [cache_flowmod(khash, None, DELETE_STRICT)]
        return [cache_flowmod(khash, self._ports[after])]

    def add(self, rules: Iterable[CacheRule]) -> BookResult:
        res = BookResult()
        for rule in rules:
            why = self._check_node(rule)
            h = rule.key_hash & HASH_MASK
            if why is None and h not in self._refs and self._capacity is not None \
                    and len(self._refs) >= self._capacity:
                why = f"Ruleset 2 is full ({self._capacity} rules, switch.cache_rule_capacity)"
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
            h = rule.key_hash & HASH_MASK
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
        return {h & HASH_MASK: (OrderedDict(self._refs[h & HASH_MASK]) if (h & HASH_MASK) in self._refs else None)
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
        return [cache_flowmod(h, self._ports[self.owner(h)]) for h in sorted(self._refs)]


# ---------------------------------------------------------------- adopting a switch's table

@dataclass
class TablePlan:
    """What to do with the table a (re)connected switch already holds (docs/switch-rules.md,
    "Controller restart"). adopt: its static flows are exactly ours, keep everything and take
    `installed` (its Ruleset 2, hash -> port) as confirmed; else flush and program from scratch."""
    adopt: bool
    installed: dict[int, int] = field(default_factory=dict)
    why: str = ""


def switch_flow_as_flowmod(flow) -> Optional[FlowMod]:
    """A flow read back from the switch (ofp_translate.FlowInfo) as the ADD that would have made
    it; None when it has anything we never program (another table, other match fields, other
    instructions or actions, timeouts)."""
    if not getattr(flow, "plain", True) or getattr(flow, "table_id", 0) != 0:
        return None
    return FlowMod(command=ADD, priority=flow.priority, cookie=flow.cookie, out_port=flow.out_port,
                   eth_dst=mac_to_int(flow.eth_dst) if flow.eth_dst else None,
                   eth_dst_mask=mac_to_int(flow.eth_dst_mask) if flow.eth_dst_mask else None,
                   eth_type=flow.eth_type)


def _cache_rule_hash(fm: FlowMod, cache_ports: Iterable[int]) -> Optional[int]:
    """The hash of a well-formed Ruleset 2 flow that outputs to a cache node's port, else None."""
    if (fm.priority != PRIORITY[RULESET_CACHE] or fm.eth_type is not None or fm.eth_dst is None
            or fm.eth_dst_mask is not None or fm.eth_dst >> HASH_BITS != PREFIX_GET
            or fm.out_port not in cache_ports):
        return None
    h = fm.eth_dst & HASH_MASK
    return h if fm.cookie == make_cookie(RULESET_CACHE, h) else None


def plan_table(flows: Iterable, statics: Iterable[FlowMod], cache_ports: Iterable[int]) -> TablePlan:
    """Keep the switch's table when every flow on it is either one of `statics` (Ruleset 1, ARP,
    Ruleset 3: same match, priority, cookie and output) or a well-formed Ruleset 2 rule to a
    cache node's port, and every static is there. Anything else (a missing or different static,
    a foreign flow, a Ruleset 2 rule to an unknown port) means flush and program from scratch."""
    cache_ports = set(cache_ports)
    want = Counter(statics)
    have: Counter = Counter()
    installed: dict[int, int] = {}
    foreign: list[str] = []
    for flow in flows:
        fm = switch_flow_as_flowmod(flow)
        if fm is None:
            foreign.append(f"cookie={flow.cookie:#x} priority={flow.priority} (not a flow we program)")
        elif fm.ruleset == RULESET_CACHE:
            h = _cache_rule_hash(fm, cache_ports)
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
    if not missing and not foreign:
        return TablePlan(True, installed)
    why = []
    if missing:
        why.append(f"{sum(missing.values())} of {sum(want.values())} static flows missing or different")
    if foreign:
        why.append(f"{len(foreign)} flows we would not program (e.g. {foreign[0]})")
    return TablePlan(False, {}, "; ".join(why))
