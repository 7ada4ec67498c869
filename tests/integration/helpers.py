"""Helpers shared by the Mininet integration tests."""
from __future__ import annotations

from exo_common.partitions import slot_of
import ipaddress

from exoskeleton.keyhash import REQUEST_PREFIXES, key_hash, mac_bytes, request_ip


def owner_db(cfg, key: bytes) -> str:
    return cfg.partitions()[slot_of(key_hash(key), cfg.switch.partition_bits)]


def cache_for(cfg, key: bytes) -> str:
    return cfg.cache_node_for_db(owner_db(cfg, key))


def matching_flow(flows, dst_mac: bytes):
    """The highest-priority flow matching a frame to dst_mac: its (masked) eth_dst, and for a
    request MAC the IPv4 destination a client sends with it (the hash's top 32 bits)."""
    ip = None
    if dst_mac[0] in REQUEST_PREFIXES:
        ip = str(ipaddress.IPv4Address(request_ip(int.from_bytes(dst_mac[1:], "big"))))
    best = None
    for f in flows:
        if getattr(f, "ipv4_dst", "") and f.ipv4_dst != ip:
            continue
        rule = mac_bytes(f.eth_dst)
        mask = mac_bytes(f.eth_dst_mask) if f.eth_dst_mask else b"\xff" * 6
        if all((a & m) == (b & m) for a, b, m in zip(dst_mac, rule, mask)):
            if best is None or f.priority > best.priority:
                best = f
    return best


def counters(cl) -> dict[str, dict[str, int]]:
    return cl.stubs.node_stats()


def delta(after, before, counter: str) -> dict[str, int]:
    return {n: after[n].get(counter, 0) - before[n].get(counter, 0) for n in after}


def wait_flow_packets(cl, ruleset: int, dst_mac: bytes, at_least: int, timeout: float = 5.0):
    """OVS pushes datapath flow statistics to OpenFlow counters lazily (its revalidator runs
    about every 500 ms), so poll the switch until the rule has counted `at_least` packets."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        flow = matching_flow(cl.stubs.rules(ruleset).flows, dst_mac)
        if flow.packet_count >= at_least or time.monotonic() > deadline:
            return flow
        time.sleep(0.2)


class CacheShareMeter:
    """Share of GETs answered by cache nodes, per interval, from the nodes' own counters:
    cache hits / (cache hits + GETs reaching db nodes). A GET a cache node forwards is counted
    once, at the db node that answers it."""

    def __init__(self, cl):
        self.cl = cl
        self.last = self._totals()

    def _totals(self) -> tuple[int, int]:
        c = counters(self.cl)
        hits = sum(c[n.name].get("hits", 0) for n in self.cl.cfg.cache_nodes)
        db_gets = sum(c[n.name].get("gets", 0) for n in self.cl.cfg.db_nodes)
        return hits, db_gets

    def sample(self) -> tuple[float, int]:
        """(share since the last sample, GETs since the last sample)."""
        hits, db_gets = self._totals()
        dh, dd = hits - self.last[0], db_gets - self.last[1]
        self.last = (hits, db_gets)
        total = dh + dd
        return (dh / total if total else 0.0), total
