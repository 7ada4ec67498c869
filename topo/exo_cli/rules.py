"""`exo rules`: Ruleset 2 (the hot-key rules, docs/switch-rules.md) as the switch holds it, read
with `ovs-ofctl -O OpenFlow13 dump-flows BRIDGE cookie=0xe2.../0xff...` (the cookie selects
Ruleset 2, flows.cookie_filter), not as the controller believes it is.

Each rule shows the key hash it matches (the 40-bit hash with the bits the rule does not match
cleared: with switch.cache_match "ipv4_dst" the request's IPv4 destination is the hash's top 32
bits), the cache node its port leads to, its priority and its packet and byte counters (Open
vSwitch updates them about twice a second). The parsing is pure and tested on captured text
(tests/unit/test_exo_cli.py); only `dump` talks to the switch.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass
from typing import Optional

from exo_controller.flows import (HASH_MASK, IP_SHIFT, RULESET_CACHE, cookie_filter, ip_to_int, mac_to_int,
                                  ruleset_of_cookie)

_ACTIONS = re.compile(r"\s+actions=(\S*)\s*$")


class RulesError(RuntimeError):
    pass


@dataclass(frozen=True)
class SwitchFlow:
    """One line of `ovs-ofctl dump-flows` (numbers as the switch gave them)."""
    cookie: int
    priority: int
    match: dict            # match fields: name -> value ("" for bare words such as `ip`)
    actions: str
    packets: int
    bytes: int
    duration_s: float

    @property
    def ruleset(self) -> Optional[int]:
        return ruleset_of_cookie(self.cookie)

    @property
    def out_port(self) -> Optional[int]:
        m = re.fullmatch(r"output:(\d+)", self.actions)
        return int(m.group(1)) if m else None

    @property
    def key_hash(self) -> Optional[int]:
        """The key hash a Ruleset 2 flow matches (either match form), None for other flows."""
        if "nw_dst" in self.match:
            return ip_to_int(self.match["nw_dst"].split("/")[0]) << IP_SHIFT
        dst = self.match.get("dl_dst", "")
        if self.ruleset == RULESET_CACHE and dst and "/" not in dst:
            return mac_to_int(dst) & HASH_MASK
        return None


def parse_flow(line: str) -> Optional[SwitchFlow]:
    """A flow line (" cookie=0x..., duration=..., ... actions=output:1"), or None for any other
    line (the OFPST_FLOW reply header)."""
    line = line.strip()
    a = _ACTIONS.search(" " + line)
    if not line.startswith("cookie=") or not a:
        return None
    head = (" " + line)[:a.start()].strip()
    fields: dict[str, str] = {}
    for part in re.split(r",\s*|\s+", head):
        if part:
            k, _, v = part.partition("=")
            fields[k] = v
    try:
        return SwitchFlow(
            cookie=int(fields.pop("cookie"), 16), priority=int(fields.pop("priority", "32768")),
            packets=int(fields.pop("n_packets", "0")), bytes=int(fields.pop("n_bytes", "0")),
            duration_s=float(fields.pop("duration", "0s").rstrip("s")), actions=a.group(1),
            match={k: v for k, v in fields.items()
                   if k not in ("table", "idle_age", "hard_age", "idle_timeout", "hard_timeout",
                                "send_flow_rem", "importance", "reset_counts", "check_overlap",
                                "no_packet_counts", "no_byte_counts")})
    except (KeyError, ValueError) as err:
        raise RulesError(f"cannot read this ovs-ofctl line ({err}): {line}") from None


def parse_dump(text: str) -> list[SwitchFlow]:
    return [f for f in (parse_flow(line) for line in text.splitlines()) if f is not None]


@dataclass(frozen=True)
class Rule:
    key_hash: str          # 10 hex digits (40 bits)
    match: str             # what the switch matches, e.g. "nw_dst=81.187.14.10"
    port: Optional[int]
    cache_node: str        # the cache node on that port, "?" if none is
    priority: int
    packets: int
    bytes: int


def ruleset2(flows: list[SwitchFlow], port_names: dict[int, str]) -> list[Rule]:
    """The Ruleset 2 flows as rules, busiest first (then by hash)."""
    out = []
    for f in flows:
        if f.ruleset != RULESET_CACHE:
            continue
        h = f.key_hash
        field = "nw_dst" if "nw_dst" in f.match else "dl_dst"
        match = f"{field}={f.match.get(field, '?')}"
        out.append(Rule(key_hash="?" if h is None else f"{h:010x}", match=match, port=f.out_port,
                        cache_node=port_names.get(f.out_port, "?") if f.out_port is not None else f.actions,
                        priority=f.priority, packets=f.packets, bytes=f.bytes))
    out.sort(key=lambda r: (-r.packets, r.key_hash))
    return out


def summary(rules: list[Rule], capacity: int) -> dict:
    by_node: dict[str, int] = {}
    for r in rules:
        by_node[r.cache_node] = by_node.get(r.cache_node, 0) + 1
    return {"count": len(rules), "capacity": capacity, "by_cache_node": dict(sorted(by_node.items())),
            "rules": [asdict(r) for r in rules]}


def dump(bridge: str) -> str:
    """The switch's Ruleset 2 flows, as ovs-ofctl prints them (port numbers, not names)."""
    cookie, mask = cookie_filter(RULESET_CACHE)
    cmd = ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", bridge, f"cookie={cookie:#x}/{mask:#x}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise RulesError("ovs-ofctl not found (Open vSwitch is not installed)") from None
    if r.returncode != 0:
        raise RulesError(f"{' '.join(cmd)}: {r.stderr.strip() or 'exit status ' + str(r.returncode)}")
    return r.stdout


def render(s: dict, top: Optional[int]) -> list[str]:
    rows = s["rules"] if top is None else s["rules"][:top]
    lines = [f"{'key hash':<12} {'match':<22} {'cache node':<16} {'priority':>8} {'packets':>12} {'bytes':>14}"]
    for r in rows:
        node = f"{r['cache_node']} (port {r['port']})" if r["port"] is not None else r["cache_node"]
        lines.append(f"{r['key_hash']:<12} {r['match']:<22} {node:<16} {r['priority']:>8} "
                     f"{r['packets']:>12,} {r['bytes']:>14,}")
    if top is not None and len(s["rules"]) > top:
        lines.append(f"... {len(s['rules']) - top} more (--top shows {top})")
    per_node = ", ".join(f"{n} {c}" for n, c in s["by_cache_node"].items()) or "none"
    lines.append(f"Ruleset 2 on the switch: {s['count']} rules of capacity C = {s['capacity']} "
                 f"(switch.cache_rule_capacity); per cache node: {per_node}")
    return lines
