"""Switch rules computed by exo_controller.flows, applied to a fake OpenFlow table and checked by
routing request MACs of real key hashes through it (no switch needed)."""
import random

import pytest

from exo_controller import flows
from exo_controller.config import parse_config
from exo_controller.flows import (ADD, DELETE, DELETE_STRICT, CacheRule, CacheRuleBook, FlowMod, mac_to_int,
                                  ruleset_of_cookie)
from exo_controller.partitions import slot_of
from exoskeleton.keyhash import PREFIX_GET, PREFIX_OTHER, key_hash, request_mac


class FakeFlowTable:
    """Table 0 of an OpenFlow 1.3 switch, reduced to what we use: eth_type and masked eth_dst."""

    def __init__(self):
        self.flows: dict[tuple, FlowMod] = {}

    def apply(self, mods):
        for fm in mods:
            if fm.command == ADD:
                assert fm.out_port is not None
                self.flows[fm.match_key()] = fm  # same match + priority replaces
            elif fm.command == DELETE_STRICT:
                self.flows.pop(fm.match_key(), None)
            elif fm.command == DELETE:
                for k in [k for k, f in self.flows.items() if f.cookie & fm.cookie_mask == fm.cookie & fm.cookie_mask]:
                    del self.flows[k]
            else:
                raise AssertionError(f"unknown command {fm.command}")
        return self

    def _matches(self, fm, eth_dst, eth_type):
        if fm.eth_type is not None and fm.eth_type != eth_type:
            return False
        if fm.eth_dst is not None:
            mask = fm.eth_dst_mask if fm.eth_dst_mask is not None else (1 << 48) - 1
            if eth_dst & mask != fm.eth_dst & mask:
                return False
        return True

    def lookup(self, eth_dst, eth_type=0x0800):
        """out_port of the highest-priority matching flow; None = table miss (drop)."""
        if isinstance(eth_dst, bytes):
            eth_dst = int.from_bytes(eth_dst, "big")
        elif isinstance(eth_dst, str):
            eth_dst = mac_to_int(eth_dst)
        hits = [f for f in self.flows.values() if self._matches(f, eth_dst, eth_type)]
        if not hits:
            return None
        top = max(f.priority for f in hits)
        best = [f for f in hits if f.priority == top]
        assert len(best) == 1, f"ambiguous: {len(best)} overlapping flows at priority {top}"
        return best[0].out_port

    def count(self, ruleset):
        return sum(1 for f in self.flows.values() if ruleset_of_cookie(f.cookie) == ruleset)


def keys(n, seed=1):
    rnd = random.Random(seed)
    return [f"key-{rnd.getrandbits(64):x}".encode() for _ in range(n)]


@pytest.fixture
def table(cfg):
    return FakeFlowTable().apply([flows.flush_flowmod(), *flows.static_flowmods(cfg)])


def db_port_for(cfg, h):
    owner = cfg.partitions()[slot_of(h, cfg.switch.partition_bits)]
    return {d.name: d.switch_port for d in cfg.db_nodes}[owner]


def test_fake_table_honours_masks_and_priority():
    t = FakeFlowTable().apply([
        FlowMod(ADD, 100, 0, out_port=1, eth_dst=mac_to_int("aa:00:00:00:00:00"),
                eth_dst_mask=mac_to_int("ef:80:00:00:00:00")),
        FlowMod(ADD, 200, 0, out_port=2, eth_dst=mac_to_int("aa:00:00:00:00:05")),
    ])
    assert t.lookup("ba:7f:ff:ff:ff:ff") == 1
    assert t.lookup("aa:80:00:00:00:00") is None
    assert t.lookup("aa:00:00:00:00:05") == 2
    assert t.lookup("ba:00:00:00:00:05") == 1


@pytest.mark.parametrize("bits", [1, 4, 8, 12])
def test_get_and_put_route_to_owning_db_node(cluster_dict, bits):
    cluster_dict["switch"]["partition_bits"] = bits
    cfg = parse_config(cluster_dict)
    t = FakeFlowTable().apply(flows.static_flowmods(cfg))
    assert t.count(3) == 2 ** bits
    used = set()
    for k in keys(2000, seed=bits):
        h = key_hash(k)
        want = db_port_for(cfg, h)
        used.add(want)
        assert t.lookup(request_mac(PREFIX_GET, h)) == want
        assert t.lookup(request_mac(PREFIX_OTHER, h)) == want
    if bits >= 4:
        assert used == {21, 22, 23}  # every db node owns some keys


def test_slot_edges_route_correctly(cfg, table):
    bits = cfg.switch.partition_bits
    owners = cfg.partitions()
    ports = {d.name: d.switch_port for d in cfg.db_nodes}
    for slot in range(2 ** bits):
        lo = slot << (40 - bits)
        hi = lo | ((1 << (40 - bits)) - 1)
        for h in (lo, hi):
            assert table.lookup(request_mac(PREFIX_OTHER, h)) == ports[owners[slot]]


def test_other_prefixes_are_dropped(table):
    # only 0xAA and 0xBA are requests; e.g. 0xAB / 0xFA / 0x2A must not hit Ruleset 3
    for first in (0xAB, 0xFA, 0x2A, 0xBB, 0x0A):
        mac = bytes([first]) + (12345).to_bytes(5, "big")
        assert table.lookup(mac) is None, hex(first)


def test_ruleset_counts_and_node_macs(cfg, table):
    nodes = [*cfg.cache_nodes, *cfg.db_nodes, *cfg.clients]
    assert table.count(1) == len(nodes) + 1  # + ARP
    assert table.count(3) == 2 ** cfg.switch.partition_bits
    assert table.count(2) == 0
    for n in nodes:
        assert table.lookup(n.mac) == n.switch_port
    assert table.lookup("ff:ff:ff:ff:ff:ff", eth_type=0x0806) == flows.OFPP_FLOOD
    assert table.lookup("ff:ff:ff:ff:ff:ff") is None  # non-ARP broadcast: dropped
    # a unicast ARP reply follows Ruleset 1 (ARP rule is below it, no same-priority overlap)
    assert table.lookup(cfg.clients[0].mac, eth_type=0x0806) == cfg.clients[0].switch_port


def test_partition_match_values():
    value, mask = flows.partition_match(0x5, 8)
    assert flows.int_to_mac(value) == "aa:05:00:00:00:00"
    assert flows.int_to_mac(mask) == "ef:ff:00:00:00:00"
    value, mask = flows.partition_match(0xABC, 12)
    assert flows.int_to_mac(value) == "aa:ab:c0:00:00:00"
    assert flows.int_to_mac(mask) == "ef:ff:f0:00:00:00"
    with pytest.raises(ValueError):
        flows.partition_match(256, 8)


def test_cookies_classify_rulesets(cfg):
    for fm in flows.node_flowmods(cfg):
        assert ruleset_of_cookie(fm.cookie) == 1
    for fm in flows.partition_flowmods(cfg):
        assert ruleset_of_cookie(fm.cookie) == 3
    fm = flows.cache_flowmod(0xFF_FFFF_FFFF, 11)
    assert ruleset_of_cookie(fm.cookie) == 2
    assert fm.cookie & 0xFF_FFFF_FFFF == 0xFF_FFFF_FFFF
    assert ruleset_of_cookie(0) is None
    assert ruleset_of_cookie(0xE4 << 56) is None
    assert ruleset_of_cookie(0x12 << 56) is None
    cookies = [f.cookie for f in flows.static_flowmods(cfg)]
    assert len(set(cookies)) == len(cookies)
    c, m = flows.cookie_filter(2)
    assert fm.cookie & m == c and flows.partition_flowmods(cfg)[0].cookie & m != c
    c, m = flows.cookie_filter(0)
    assert all(f.cookie & m == c for f in flows.static_flowmods(cfg))


def test_cache_rule_routes_get_but_not_put(cfg, table):
    book = CacheRuleBook.from_config(cfg)
    ks = keys(300, seed=7)
    hot, cold = ks[:100], ks[100:]
    res = book.add([CacheRule(key_hash(k), "cache1" if i % 2 else "cache2") for i, k in enumerate(hot)])
    assert res.accepted == 100 and not res.rejected
    table.apply(res.flowmods)
    assert table.count(2) == 100
    for i, k in enumerate(hot):
        h = key_hash(k)
        assert table.lookup(request_mac(PREFIX_GET, h)) == (11 if i % 2 else 12)
        assert table.lookup(request_mac(PREFIX_OTHER, h)) == db_port_for(cfg, h)
    for k in cold:
        h = key_hash(k)
        assert table.lookup(request_mac(PREFIX_GET, h)) == db_port_for(cfg, h)

    res = book.remove([CacheRule(key_hash(k), "cache1" if i % 2 else "cache2") for i, k in enumerate(hot)])
    assert res.accepted == 100
    assert all(fm.command == DELETE_STRICT for fm in res.flowmods) and len(res.flowmods) == 100
    table.apply(res.flowmods)
    assert table.count(2) == 0 and len(book) == 0
    for k in hot:
        h = key_hash(k)
        assert table.lookup(request_mac(PREFIX_GET, h)) == db_port_for(cfg, h)


def test_refcount_for_shared_hash(cfg, table):
    book = CacheRuleBook.from_config(cfg)
    h = key_hash(b"alpha")  # pretend b"beta" collides with it: same 40-bit hash
    table.apply(book.add([CacheRule(h, "cache1")]).flowmods)
    res = book.add([CacheRule(h, "cache1")])
    assert res.accepted == 1 and res.flowmods == []  # second key: nothing new on the switch
    assert book.refcount(h, "cache1") == 2
    table.apply(book.remove([CacheRule(h, "cache1")]).flowmods)
    assert table.lookup(request_mac(PREFIX_GET, h)) == 11  # the other key still needs the rule
    res = book.remove([CacheRule(h, "cache1")])
    assert [fm.command for fm in res.flowmods] == [DELETE_STRICT]
    table.apply(res.flowmods)
    assert table.lookup(request_mac(PREFIX_GET, h)) == db_port_for(cfg, h)
    # removing again is a harmless no-op
    res = book.remove([CacheRule(h, "cache1")])
    assert res.accepted == 1 and res.flowmods == []


def test_move_hash_to_other_cache_node(cfg, table):
    book = CacheRuleBook.from_config(cfg)
    h = key_hash(b"moving")
    table.apply(book.add([CacheRule(h, "cache1")]).flowmods)
    res = book.add([CacheRule(h, "cache2")])
    assert [(fm.command, fm.out_port) for fm in res.flowmods] == [(ADD, 12)]  # one ADD replaces
    table.apply(res.flowmods)
    assert table.count(2) == 1
    assert table.lookup(request_mac(PREFIX_GET, h)) == 12
    # the old owner letting go changes nothing
    res = book.remove([CacheRule(h, "cache1")])
    assert res.flowmods == []
    assert book.owner(h) == "cache2"
    # if the new owner lets go while the old one still holds a reference, the rule goes back
    g = key_hash(b"shared")
    table.apply(book.add([CacheRule(g, "cache1")]).flowmods)
    table.apply(book.add([CacheRule(g, "cache2")]).flowmods)
    assert table.lookup(request_mac(PREFIX_GET, g)) == 12
    res = book.remove([CacheRule(g, "cache2")])
    assert [(fm.command, fm.out_port) for fm in res.flowmods] == [(ADD, 11)]
    table.apply(res.flowmods)
    assert table.lookup(request_mac(PREFIX_GET, g)) == 11


def test_unknown_cache_node_rejected(cfg):
    book = CacheRuleBook.from_config(cfg)
    res = book.add([CacheRule(1, "cache9"), CacheRule(2, "cache1")])
    assert res.accepted == 1 and len(res.rejected) == 1
    assert "unknown cache node 'cache9'" in res.error
    assert len(res.flowmods) == 1 and book.owner(1) is None
    res = book.remove([CacheRule(2, "db1")])
    assert res.accepted == 0 and "unknown cache node 'db1'" in res.error
    assert book.owner(2) == "cache1"


def test_capacity_limit(cfg):
    book = CacheRuleBook.from_config(cfg)  # cache_rule_capacity: 100
    res = book.add([CacheRule(h, "cache1") for h in range(120)])
    assert res.accepted == 100 and len(res.rejected) == 20
    assert "full" in res.error
    assert book.add([CacheRule(5, "cache2")]).accepted == 1  # existing hash: still allowed (a move)


def test_all_flowmods_recreates_table(cfg):
    book = CacheRuleBook.from_config(cfg)
    hs = [key_hash(k) for k in keys(50, seed=3)]
    live = FakeFlowTable().apply(flows.static_flowmods(cfg))
    live.apply(book.add([CacheRule(h, "cache2") for h in hs]).flowmods)
    live.apply(book.remove([CacheRule(h, "cache2") for h in hs[:10]]).flowmods)
    # switch reconnects: flush + static + book
    fresh = FakeFlowTable().apply([flows.flush_flowmod(), *flows.static_flowmods(cfg), *book.all_flowmods()])
    assert fresh.flows == live.flows
    assert fresh.count(2) == 40


def test_snapshot_restore_undoes(cfg):
    book = CacheRuleBook.from_config(cfg)
    t = FakeFlowTable()
    t.apply(book.add([CacheRule(7, "cache1")]).flowmods)
    snap = book.snapshot([7, 8])
    t.apply(book.add([CacheRule(7, "cache2"), CacheRule(8, "cache2")]).flowmods)
    assert t.lookup(request_mac(PREFIX_GET, 8)) == 12
    t.apply(book.restore(snap))
    assert book.owner(7) == "cache1" and book.owner(8) is None and book.refcount(7, "cache2") == 0
    assert t.lookup(request_mac(PREFIX_GET, 7)) == 11
    assert t.lookup(request_mac(PREFIX_GET, 8)) is None


def test_key_hash_masked_to_40_bits(cfg):
    book = CacheRuleBook.from_config(cfg)
    res = book.add([CacheRule((0xDEAD << 40) | 0x1234, "cache1")])
    assert res.flowmods[0].eth_dst == (0xAA << 40) | 0x1234
