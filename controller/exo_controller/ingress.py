"""Table 0: data-plane hygiene. Who may send what from which switch port (docs/switch-rules.md,
"Ingress hygiene"). Pure: builders return flows.FlowMod and MeterMod; nothing here talks to a
switch.

Table 1 (Rulesets 1-3) routes on the destination alone, so without this a host could send with
another host's source MAC or IP (and aim replies, up to 20x larger than a GET, at it), pose as
a cache node forwarding a miss, or flood the switch. Every check is one rule whose packet
count is its counter; cookies name the check and the port (`cookie_name`, `ingress_cookie`).

    client port P (clients[]: MAC M, IP I; meter m = its position in clients[] + 1)
      420  IPv4, dl_dst=ae:..(prefix byte)                -> drop               client_forwarded
      420  IPv4, dl_dst=ba:.., ip_dscp=FORWARDED_DSCP     -> drop               client_forwarded_mark
      410  IPv4, dl_src=M, nw_src=I                       -> meter m, table 1   client_ip
      410  ARP, dl_src=M, arp_spa=I, arp_sha=M            -> meter m, table 1   client_arp
      405  any other IPv4 (also one too malformed to read its source) -> drop   client_source
      405  any other ARP                                  -> drop               client_source_arp
      400  any other protocol (IPv6 neighbour discovery, LLDP, ...) -> drop     client_other
    cache node port C
      410  IPv4, dl_dst=ae:..  -> set ip_dscp=FORWARDED_DSCP, table 1            cache_forwarded
      400  anything else       -> table 1                                         node_port
    db node port D (an emulator's nodes share one)
      400  anything            -> table 1                                         node_port
    any other port (not in the config, the bridge's own)
        1  anything            -> drop                                            unknown_port

Why the DSCP mark: a cache node forwards a miss by rewriting 0xAA to 0xAE and setting FORWARDED
in the payload, keeping the client's source MAC and IP (the db node answers the client
directly), and OpenFlow cannot match the payload's opcode or flags. A client never sends prefix
0xAE, so the switch drops every client frame with it; and it vouches for the port: it writes a
DSCP (exoskeleton.wire.FORWARDED_DSCP) on every 0xAE frame from a cache node's port. A db node
refuses a GET with prefix 0xAE, 0xBA (an older cache node's forward, still served at rf 1) or
FORWARDED that lacks the mark, and counts it (forwarded_unmarked_dropped). So a client's 0xBA
frame that carries the mark is dropped too (client_forwarded_mark, counted with
client_forwarded): defence in depth behind the prefix.

The meter caps what a client port may send (switch.client_meter_pps, frames/s; burst a tenth
of a second's worth); its band drops are its counter (meter stats). A client's honest traffic
never hits a drop rule: its frames carry its own addresses, and it never sets a DSCP.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from exoskeleton.keyhash import HASH_BITS, PREFIX_FORWARDED, PREFIX_OTHER
from exoskeleton.wire import FORWARDED_DSCP

from .flows import (ADD, DELETE, ETH_TYPE_ARP, ETH_TYPE_IPV4, FORWARD_TABLE, INGRESS_TABLE, RULESET_INGRESS,
                    FlowMod, ip_to_int, mac_to_int, make_cookie, ruleset_of_cookie)

# Cookie index of a table 0 rule: KIND << 32 | port (ports are 32-bit; unknown_port has port 0).
KINDS = {"client_ip": 1, "client_arp": 2, "client_source": 3, "client_forwarded": 4,
         "cache_forwarded": 5, "node_port": 6, "unknown_port": 7, "client_source_arp": 8, "client_other": 9,
         "client_forwarded_mark": 10}
KIND_NAMES = {code: name for name, code in KINDS.items()}
# The drop rules, and the Stats counter each one's packet count adds to (counters()).
DROPS = {"client_source": "client_source", "client_source_arp": "client_source",
         "client_forwarded": "client_forwarded", "client_forwarded_mark": "client_forwarded",
         "client_other": "client_other", "unknown_port": "unknown_port"}
COUNTERS = ("client_source", "client_forwarded", "client_other", "unknown_port")
PER_CLIENT = ("client_source", "client_forwarded", "client_other")

PRIORITY_FORWARDED_SPOOF = 420
PRIORITY_ALLOW = 410
PRIORITY_SPOOF = 405
PRIORITY_PORT = 400
PRIORITY_UNKNOWN_PORT = 1

# eth_dst values of "prefix byte exactly 0xAE" (GETs a cache node forwards) and "exactly 0xBA"
# (PUT/DELETE), under PREFIX_BYTE_MASK
FORWARDED_PREFIX = PREFIX_FORWARDED << HASH_BITS
OTHER_PREFIX = PREFIX_OTHER << HASH_BITS
PREFIX_BYTE_MASK = 0xFF << HASH_BITS

OFPM_ALL = 0xFFFF_FFFF  # OpenFlow 1.3: every meter (a delete of all)


def ingress_cookie(kind: str, port: int = 0) -> int:
    if kind not in KINDS:
        raise ValueError(f"unknown ingress rule kind {kind!r} (known: {', '.join(KINDS)})")
    return make_cookie(RULESET_INGRESS, KINDS[kind] << 32 | port)


def cookie_name(cookie: int) -> Optional[tuple[str, int]]:
    """(kind, port) of a table 0 cookie we made; None for any other cookie."""
    if ruleset_of_cookie(cookie) != RULESET_INGRESS:
        return None
    index = cookie & ((1 << 56) - 1)
    kind = KIND_NAMES.get(index >> 32)
    return None if kind is None else (kind, index & 0xFFFF_FFFF)


@dataclass(frozen=True)
class MeterMod:
    """One OpenFlow 1.3 meter-mod: a meter with one drop band in packets/s (ADD), or a delete
    (DELETE; meter_id OFPM_ALL = every meter)."""
    command: str
    meter_id: int
    rate_pps: int = 0
    burst: int = 0

    def __str__(self) -> str:
        if self.command == DELETE:
            return f"delete meter={'all' if self.meter_id == OFPM_ALL else self.meter_id}"
        return f"{self.command} meter={self.meter_id} pktps burst stats bands=type=drop,rate={self.rate_pps},burst_size={self.burst}"


def meter_burst(rate_pps: int) -> int:
    """A tenth of a second's worth of frames (at least 1): short enough that a flood is cut
    within 100 ms, long enough for a client's window of requests sent back to back."""
    return max(1, rate_pps // 10)


def client_meter_id(cfg, client: str) -> int:
    """The meter of a client's port: its position in clients[] + 1 (meter ids start at 1)."""
    for i, c in enumerate(cfg.clients):
        if c.name == client:
            return i + 1
    raise KeyError(f"no client named {client!r}")


def meter_mods(cfg) -> list[MeterMod]:
    """Every meter (a delete of all first), or none with switch.client_meter_pps = 0."""
    rate = cfg.switch.client_meter_pps
    if not rate or not cfg.clients:
        return []
    return [MeterMod(DELETE, OFPM_ALL),
            *(MeterMod(ADD, i + 1, rate, meter_burst(rate)) for i in range(len(cfg.clients)))]


def needs_barrier(prev, nxt) -> bool:
    """Must a barrier separate these two statics? OpenFlow orders messages only across barriers:
    the meter adds must follow the delete of every meter, and the flows that use the meters
    must follow their adds."""
    if not isinstance(prev, MeterMod):
        return False
    return prev.command == DELETE or not isinstance(nxt, MeterMod)


def _client_flowmods(c, meter: Optional[int]) -> list[FlowMod]:
    port, mac, ip = c.switch_port, mac_to_int(c.mac), ip_to_int(c.ip)
    common = dict(command=ADD, table=INGRESS_TABLE, in_port=port)
    return [
        FlowMod(priority=PRIORITY_FORWARDED_SPOOF, cookie=ingress_cookie("client_forwarded", port),
                eth_type=ETH_TYPE_IPV4, eth_dst=FORWARDED_PREFIX, eth_dst_mask=PREFIX_BYTE_MASK,
                drop=True, **common),
        FlowMod(priority=PRIORITY_FORWARDED_SPOOF, cookie=ingress_cookie("client_forwarded_mark", port),
                eth_type=ETH_TYPE_IPV4, eth_dst=OTHER_PREFIX, eth_dst_mask=PREFIX_BYTE_MASK,
                ip_dscp=FORWARDED_DSCP, drop=True, **common),
        FlowMod(priority=PRIORITY_ALLOW, cookie=ingress_cookie("client_ip", port), eth_type=ETH_TYPE_IPV4,
                eth_src=mac, ipv4_src=ip, meter_id=meter, goto_table=FORWARD_TABLE, **common),
        FlowMod(priority=PRIORITY_ALLOW, cookie=ingress_cookie("client_arp", port), eth_type=ETH_TYPE_ARP,
                eth_src=mac, arp_spa=ip, arp_sha=mac, meter_id=meter, goto_table=FORWARD_TABLE, **common),
        FlowMod(priority=PRIORITY_SPOOF, cookie=ingress_cookie("client_source", port), eth_type=ETH_TYPE_IPV4,
                drop=True, **common),
        FlowMod(priority=PRIORITY_SPOOF, cookie=ingress_cookie("client_source_arp", port), eth_type=ETH_TYPE_ARP,
                drop=True, **common),
        # Not a spoof: the cluster speaks IPv4 and ARP only, and a host's own IPv6 neighbour
        # discovery would otherwise count as one (a separate counter keeps client_source clean).
        FlowMod(priority=PRIORITY_PORT, cookie=ingress_cookie("client_other", port), drop=True, **common),
    ]


def ingress_flowmods(cfg) -> list[FlowMod]:
    """Table 0, in config order: each client's port, each cache node's port, each db node's port
    (once per port: an emulator's nodes share one), then the drop of every other port."""
    metered = bool(cfg.switch.client_meter_pps)
    mods: list[FlowMod] = []
    for i, c in enumerate(cfg.clients):
        mods += _client_flowmods(c, i + 1 if metered else None)
    seen: set[int] = set()
    nodes = [(n.switch_port, True) for n in cfg.cache_nodes] + [(n.switch_port, False) for n in cfg.db_nodes]
    for port, is_cache in nodes:
        if port in seen:
            continue
        seen.add(port)
        common = dict(command=ADD, table=INGRESS_TABLE, in_port=port, goto_table=FORWARD_TABLE)
        if is_cache:
            mods.append(FlowMod(priority=PRIORITY_ALLOW, cookie=ingress_cookie("cache_forwarded", port),
                                eth_type=ETH_TYPE_IPV4, eth_dst=FORWARDED_PREFIX, eth_dst_mask=PREFIX_BYTE_MASK,
                                set_ip_dscp=FORWARDED_DSCP, **common))
        mods.append(FlowMod(priority=PRIORITY_PORT, cookie=ingress_cookie("node_port", port), **common))
    mods.append(FlowMod(command=ADD, table=INGRESS_TABLE, priority=PRIORITY_UNKNOWN_PORT,
                        cookie=ingress_cookie("unknown_port"), drop=True))
    return mods


def meter_problem(statics: Iterable, meters: Optional[Iterable[MeterMod]]) -> str:
    """Why the switch's meters (read back, as ADDs; None = not read) are not the ones `statics`
    installs; "" when they are."""
    want = {m.meter_id: m for m in statics if isinstance(m, MeterMod) and m.command == ADD}
    if meters is None:
        return "its meters could not be read" if want else ""
    have = {m.meter_id: m for m in meters}
    if have == want:
        return ""
    diff = sorted(set(want.items()) ^ set(have.items()), key=lambda kv: kv[0])
    return f"its meters differ from ours ({len(have)} on the switch, {len(want)} wanted; e.g. {diff[0][1]})"


# ---------------------------------------------------------------- reading the counters back

def counters(cfg, flows: Iterable, meter_drops: dict[int, int]) -> dict[str, float]:
    """The refusals of table 0 as Stats counters, from its flows read back (anything with
    .cookie and .packet_count, e.g. ofp_translate.FlowInfo) and meter id -> frames its band
    dropped:
        ingress_client_source_dropped     IPv4 or ARP from a client port without its own MAC + IP
                                          (or an IPv4 length the switch cannot parse)
        ingress_client_forwarded_dropped  frames from a client port posing as forwarded misses
        ingress_client_other_dropped      other protocols from a client port (e.g. IPv6 ND)
        ingress_unknown_port_dropped      frames from a port the config does not name
        ingress_meter_dropped             frames over a client port's meter
    plus each per client ("... <client name>")."""
    by_port = {c.switch_port: c.name for c in cfg.clients}
    out: dict[str, float] = {f"ingress_{k}_dropped": 0.0 for k in (*COUNTERS, "meter")}
    for c in cfg.clients:
        for k in (*PER_CLIENT, "meter"):
            out[f"ingress_{k}_dropped {c.name}"] = 0.0
    for f in flows:
        named = cookie_name(f.cookie)
        if named is None or named[0] not in DROPS:
            continue
        counter, port = DROPS[named[0]], named[1]
        out[f"ingress_{counter}_dropped"] += f.packet_count
        if port in by_port and counter in PER_CLIENT:
            out[f"ingress_{counter}_dropped {by_port[port]}"] += f.packet_count
    for i, c in enumerate(cfg.clients):
        dropped = meter_drops.get(i + 1, 0)
        out["ingress_meter_dropped"] += dropped
        out[f"ingress_meter_dropped {c.name}"] += dropped
    return out
