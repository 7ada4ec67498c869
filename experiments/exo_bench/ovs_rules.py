"""The rule layouts the OVS cases load on their bridge (ovs-ofctl, no controller):

  forward  in_port=1 -> 2 and in_port=2 -> 1: the cheapest layout there is, one datapath flow
           per direction; with the reflector behind it this is OVS's own forwarding ceiling.
  exo      the cluster's layout (docs/switch-rules.md), from the controller's own flow-mod
           builders: Ruleset 2 matches the key hash's top 32 bits as the IPv4 destination, with
           ip_dst in the table's prefix tries, and Ruleset 1 sits below the request rules, so a
           GET that misses the cache shares its datapath flow with ~2^26 other key hashes.
  thesis   the thesis's layout, kept to measure against: Ruleset 2 matches the whole
           destination MAC (aa:<40-bit hash>) and Ruleset 1 is on top. OVS cannot wildcard MAC
           bits, so every distinct key that misses the cache costs one upcall and one datapath
           flow.
Both cluster layouts send Ruleset 1 and 2 (hot keys) and Ruleset 3 (all slots) to the server's
port: what differs is only what the datapath has to cache. Upcalls per request
(datapath_lookups) say how often a request took the slow path.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from typing import Iterable

from exo_controller import flows
from exoskeleton.keyhash import key_hash

GEN_PORT, SRV_PORT = 1, 2


def _ofctl(*args: str) -> str:
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ovs-ofctl {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def _flow_line(fm: "flows.FlowMod") -> str:
    # FlowMod's str() is "add table=1 cookie=.. priority=.. dl_dst=.. actions=.."; add-flows wants
    # the rest, in table 0: these layouts are the forwarding rules alone, on a one-table bridge.
    return str(fm).removeprefix(f"{flows.ADD} table={fm.table} ").replace(" ", ",")


def load_forward(bridge: str) -> int:
    _ofctl("add-flow", bridge, f"priority=10,in_port={GEN_PORT},actions=output:{SRV_PORT}")
    _ofctl("add-flow", bridge, f"priority=10,in_port={SRV_PORT},actions=output:{GEN_PORT}")
    return 2


PARTITION_BITS = 10  # the figures' Ruleset 3 size (1,024 slots)
LAYOUTS = ("exo", "thesis")


def cluster_lines(layout: str, client_mac: str, srv_mac: str, hot_hashes: Iterable[int],
                  partition_bits: int = PARTITION_BITS) -> list[str]:
    """ovs-ofctl add-flows lines of a cluster layout whose every request rule outputs to the
    server's port (the cache node or the reflector behind it)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    r1 = flows.PRIORITY[flows.RULESET_NODES] if layout == "exo" else 300
    lines = [f"priority={r1},dl_dst={client_mac},actions=output:{GEN_PORT}",
             f"priority={r1},dl_dst={srv_mac},actions=output:{SRV_PORT}"]
    match = "ipv4_dst" if layout == "exo" else "eth_dst"
    lines += [_flow_line(flows.cache_flowmod(h, SRV_PORT, match=match)) for h in hot_hashes]
    for slot in range(1 << partition_bits):
        value, mask = flows.partition_match(slot, partition_bits)
        lines.append(f"priority={flows.PRIORITY[flows.RULESET_PARTITIONS]},"
                     f"dl_dst={flows.int_to_mac(value)}/{flows.int_to_mac(mask)},actions=output:{SRV_PORT}")
    return lines


def load_cluster(bridge: str, client_mac: str, srv_mac: str, hot_keys: Iterable[bytes],
                 layout: str = "exo") -> int:
    """Load a cluster layout; for "exo" also the table settings the cluster's switch gets
    (exo_topo.ovs.configure_table0: flow limit, ip_dst prefix tries)."""
    lines = cluster_lines(layout, client_mac, srv_mac, [key_hash(k) for k in hot_keys])
    if layout == "exo":
        from exo_topo import ovs
        ovs.configure_table0(bridge, len(lines) + 16)
    with tempfile.NamedTemporaryFile("w", suffix=".flows") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        _ofctl("add-flows", bridge, f.name)
    return len(lines)


def datapath_lookups() -> dict[str, int]:
    """ovs-vswitchd's datapath counters: lookups hit (fast path) / missed (upcall) / lost."""
    r = subprocess.run(["ovs-appctl", "dpctl/show"], capture_output=True, text=True)
    out = {"hit": 0, "missed": 0, "lost": 0}
    for m in re.finditer(r"lookups: hit:(\d+) missed:(\d+) lost:(\d+)", r.stdout):
        out["hit"] += int(m.group(1))
        out["missed"] += int(m.group(2))
        out["lost"] += int(m.group(3))
    return out


def datapath_flows() -> int:
    r = subprocess.run(["ovs-appctl", "dpctl/dump-flows"], capture_output=True, text=True)
    return sum(1 for line in r.stdout.splitlines() if line.strip() and not line.startswith("flow-dump"))
