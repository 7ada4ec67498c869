"""Switch rules computed by exo_controller.flows, applied to a fake OpenFlow table and checked by
routing request MACs of real key hashes through it (no switch needed). Also the withdrawal
flow-mod, plan_table (keep or flush a reconnected switch's table) and their OpenFlow translation."""
import random

import pytest

from exo_controller import flows
from exo_common.config import parse_config
from exo_controller.flows import (ADD, DELETE, DELETE_STRICT, CacheRule, CacheRuleBook, FlowMod, mac_to_int,
                                  ruleset_of_cookie)
from exo_common.partitions import slot_of
from exoskeleton import keyhash
from exoskeleton.keyhash import PREFIX_FORWARDED, PREFIX_GET, PREFIX_OTHER, REQUEST_PREFIXES, key_hash, request_mac


def request_ip(h):
    """The IPv4 destination a client puts on a request for hash h, as an int (keyhash.request_ip)."""
    return int.from_bytes(keyhash.request_ip(h), "big")


class FakeFlowTable:
    """Table 0 of an OpenFlow 1.3 switch, reduced to what we use: eth_type, masked eth_dst and
    exact ipv4_dst."""

    def __init__(self):
        self.flows: dict[tuple, FlowMod] = {}

    def apply(self, mods):
        for fm in mods:
            if fm.command == ADD:
                assert fm.out_port is not None
                self.flows[fm.match_key()] = fm  # same match + priority replaces
            elif fm.command == DELETE_STRICT:
                self.flows.pop(fm.match_key(), None)
            elif fm.command == DELETE:  # non-strict, empty match: cookie/cookie_mask and out_port filter
                for k in [k for k, f in self.flows.items() if f.cookie & fm.cookie_mask == fm.cookie & fm.cookie_mask
                          and (fm.out_port is None or f.out_port == fm.out_port)]:
                    del self.flows[k]
            else:
                raise AssertionError(f"unknown command {fm.command}")
        return self

    def _matches(self, fm, eth_dst, eth_type, ipv4_dst):
        if fm.eth_type is not None and fm.eth_type != eth_type:
            return False
        if fm.ipv4_dst is not None and fm.ipv4_dst != ipv4_dst:
            return False
        if fm.eth_dst is not None:
            mask = fm.eth_dst_mask if fm.eth_dst_mask is not None else (1 << 48) - 1
            if eth_dst & mask != fm.eth_dst & mask:
                return False
        return True

    def lookup(self, eth_dst, eth_type=0x0800, ipv4_dst=None):
        """out_port of the highest-priority matching flow; None = table miss (drop). A request
        MAC without ipv4_dst gets the IP a client sends with it (the hash's top 32 bits)."""
        if isinstance(eth_dst, bytes):
            eth_dst = int.from_bytes(eth_dst, "big")
        elif isinstance(eth_dst, str):
            eth_dst = mac_to_int(eth_dst)
        if ipv4_dst is None and eth_dst >> 40 in REQUEST_PREFIXES:
            ipv4_dst = request_ip(eth_dst)
        hits = [f for f in self.flows.values() if self._matches(f, eth_dst, eth_type, ipv4_dst)]
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
    return FakeFlowTable().apply([flows.flush_flowmod(), *flows.forwarding_flowmods(cfg)])


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
    t = FakeFlowTable().apply(flows.forwarding_flowmods(cfg))
    assert t.count(3) == 2 ** bits
    used = set()
    for k in keys(2000, seed=bits):
        h = key_hash(k)
        want = db_port_for(cfg, h)
        used.add(want)
        assert t.lookup(request_mac(PREFIX_GET, h)) == want
        assert t.lookup(request_mac(PREFIX_OTHER, h)) == want
        assert t.lookup(request_mac(PREFIX_FORWARDED, h)) == want  # a GET a cache node forwards
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
    # only 0xAA, 0xAE and 0xBA are requests (0xBE is never sent); e.g. 0xAB / 0xFA / 0x2A must not
    # hit Ruleset 3 (tests/unit/test_wire_vectors.py walks all 256 first bytes against the masks)
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
    assert flows.int_to_mac(mask) == "eb:ff:00:00:00:00"  # first byte: AA AE BA (BE)
    value, mask = flows.partition_match(0xABC, 12)
    assert flows.int_to_mac(value) == "aa:ab:c0:00:00:00"
    assert flows.int_to_mac(mask) == "eb:ff:f0:00:00:00"
    with pytest.raises(ValueError):
        flows.partition_match(256, 8)


def test_cookies_classify_rulesets(cfg):
    for fm in flows.node_flowmods(cfg):
        assert ruleset_of_cookie(fm.cookie) == 1
    for fm in flows.partition_flowmods(cfg):
        assert ruleset_of_cookie(fm.cookie) == 3
    fm = flows.cache_flowmod(0xFF_FFFF_FFFF, 11)
    assert ruleset_of_cookie(fm.cookie) == 2
    assert fm.cookie & 0xFF_FFFF_FFFF == 0xFF_FFFF_FF00  # the rule hash: low 8 bits cleared
    assert ruleset_of_cookie(0) is None
    assert ruleset_of_cookie(0xE4 << 56) == 4  # table 0's ingress checks (ingress.py)
    assert ruleset_of_cookie(0xE5 << 56) is None
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


H = 1 << flows.IP_SHIFT  # hash i * H: distinct Ruleset 2 rules for distinct i


def test_unknown_cache_node_rejected(cfg):
    book = CacheRuleBook.from_config(cfg)
    res = book.add([CacheRule(1 * H, "cache9"), CacheRule(2 * H, "cache1")])
    assert res.accepted == 1 and len(res.rejected) == 1
    assert "unknown cache node 'cache9'" in res.error
    assert len(res.flowmods) == 1 and book.owner(1 * H) is None
    res = book.remove([CacheRule(2 * H, "db1")])
    assert res.accepted == 0 and "unknown cache node 'db1'" in res.error
    assert book.owner(2 * H) == "cache1"


def test_capacity_limit(cfg):
    book = CacheRuleBook.from_config(cfg)  # cache_rule_capacity: 100
    res = book.add([CacheRule(h * H, "cache1") for h in range(120)])
    assert res.accepted == 100 and len(res.rejected) == 20
    assert "full" in res.error
    assert book.add([CacheRule(5 * H, "cache2")]).accepted == 1  # existing hash: still allowed (a move)


def test_hashes_differing_in_low_bits_share_one_rule(cfg):
    """Ruleset 2 matches the top 32 bits of the hash: two cached keys that differ only below
    them share one rule, refcounted like one hash."""
    book = CacheRuleBook.from_config(cfg)
    t = FakeFlowTable()
    a, b = 0x12_3456_7801, 0x12_3456_78FE
    t.apply(book.add([CacheRule(a, "cache1")]).flowmods)
    assert book.add([CacheRule(b, "cache1")]).flowmods == [] and len(book) == 1
    t.apply(book.remove([CacheRule(a, "cache1")]).flowmods)
    assert t.lookup(request_mac(PREFIX_GET, b)) == 11
    t.apply(book.remove([CacheRule(b, "cache1")]).flowmods)
    assert t.count(2) == 0


def test_all_flowmods_recreates_table(cfg):
    book = CacheRuleBook.from_config(cfg)
    hs = [key_hash(k) for k in keys(50, seed=3)]
    live = FakeFlowTable().apply(flows.forwarding_flowmods(cfg))
    live.apply(book.add([CacheRule(h, "cache2") for h in hs]).flowmods)
    live.apply(book.remove([CacheRule(h, "cache2") for h in hs[:10]]).flowmods)
    # switch reconnects: flush + static + book
    fresh = FakeFlowTable().apply([flows.flush_flowmod(), *flows.forwarding_flowmods(cfg), *book.all_flowmods()])
    assert fresh.flows == live.flows
    assert fresh.count(2) == 40


def test_snapshot_restore_undoes(cfg):
    book = CacheRuleBook.from_config(cfg)
    t = FakeFlowTable()
    t.apply(book.add([CacheRule(7 * H, "cache1")]).flowmods)
    snap = book.snapshot([7 * H, 8 * H])
    t.apply(book.add([CacheRule(7 * H, "cache2"), CacheRule(8 * H, "cache2")]).flowmods)
    assert t.lookup(request_mac(PREFIX_GET, 8 * H)) == 12
    t.apply(book.restore(snap))
    assert book.owner(7 * H) == "cache1" and book.owner(8 * H) is None and book.refcount(7 * H, "cache2") == 0
    assert t.lookup(request_mac(PREFIX_GET, 7 * H)) == 11
    assert t.lookup(request_mac(PREFIX_GET, 8 * H)) is None


def test_key_hash_masked_to_40_bits(cfg):
    book = CacheRuleBook.from_config(cfg)
    res = book.add([CacheRule((0xDEAD << 40) | 0x12_3456_7890, "cache1")])
    fm = res.flowmods[0]
    assert (fm.eth_dst, fm.eth_dst_mask) == (0xAA << 40, 0xFF << 40)  # GETs only
    assert fm.ipv4_dst == 0x12_3456_78 and fm.rule_hash == 0x12_3456_7800


# ---------------------------------------------------------------- withdrawal and table adoption

def test_withdraw_flowmod_deletes_only_that_nodes_cache_rules(cfg, table):
    book = CacheRuleBook.from_config(cfg)
    ks = [key_hash(k) for k in keys(20, seed=11)]
    table.apply(book.add([CacheRule(h, "cache1" if i % 2 else "cache2") for i, h in enumerate(ks)]).flowmods)
    assert table.count(2) == 20
    fm = flows.withdraw_flowmod(11)
    assert (fm.command, fm.cookie, fm.cookie_mask, fm.out_port) == (DELETE, 0xE2 << 56, 0xFF << 56, 11)
    assert str(fm) == "delete table=1 cookie=0xe200000000000000/0xff00000000000000 priority=200 out_port=11"
    table.apply([fm])
    assert table.count(2) == 10
    for i, h in enumerate(ks):
        want = db_port_for(cfg, h) if i % 2 else 12  # cache1's keys go to their db nodes again
        assert table.lookup(request_mac(PREFIX_GET, h)) == want
    assert table.lookup(cfg.cache_nodes[0].mac) == 11  # Ruleset 1 to the same port stays
    assert table.count(1) == 7 and table.count(3) == 256


def _as_switch_flows(flowmods, table_id=None):
    """What reading the table back gives (FlowInfo) for flows made by these ADDs (in their own
    table, or in `table_id`)."""
    from exo_controller.ofp_translate import FlowInfo

    def mac(v):
        return flows.int_to_mac(v) if v is not None else ""

    def ip(v):
        return flows.int_to_ip(v) if v is not None else ""
    return [FlowInfo(ruleset=fm.ruleset or 0, priority=fm.priority, eth_dst=mac(fm.eth_dst),
                     eth_dst_mask=mac(fm.eth_dst_mask), out_port=fm.out_port, packet_count=0, byte_count=0,
                     cookie=fm.cookie, eth_type=fm.eth_type, ipv4_dst=ip(fm.ipv4_dst),
                     table_id=fm.table if table_id is None else table_id, in_port=fm.in_port,
                     eth_src=mac(fm.eth_src), ipv4_src=ip(fm.ipv4_src), ip_dscp=fm.ip_dscp, arp_spa=ip(fm.arp_spa),
                     arp_sha=mac(fm.arp_sha), meter_id=fm.meter_id, set_ip_dscp=fm.set_ip_dscp,
                     goto_table=fm.goto_table) for fm in flowmods]


def test_plan_table_keeps_a_table_whose_statics_are_ours(cfg):
    statics = flows.static_flowmods(cfg)
    r2 = [flows.cache_flowmod(0x1234, 11), flows.cache_flowmod(0xFF_FFFF_FFFF, 12)]
    plan = flows.plan_table(_as_switch_flows(list(reversed(statics)) + r2), statics, {11, 12})
    assert plan.adopt and plan.installed == {0x1200: 11, 0xFF_FFFF_FF00: 12} and plan.why == ""


def test_plan_table_flushes_when_anything_differs(cfg, cluster_dict):
    statics = flows.static_flowmods(cfg)
    ok = _as_switch_flows(statics)
    # empty table (a switch that restarted, or a fresh bridge)
    plan = flows.plan_table([], statics, {11, 12})
    # table 0's ingress checks, Ruleset 1 (6 nodes) + ARP; Ruleset 3 (256) is no static any more
    from exo_controller.ingress import ingress_flowmods
    n = len(statics) - 256
    assert n == len(ingress_flowmods(cfg)) + 7 and not plan.adopt and f"{n} of {n} static flows missing" in plan.why
    # one static missing
    assert not flows.plan_table(ok[1:], statics, {11, 12}).adopt
    # a static with another output (the config changed: a db node less, so Ruleset 1 differs)
    cluster_dict["db_nodes"].pop()
    other = flows.static_flowmods(parse_config(cluster_dict))
    plan = flows.plan_table(_as_switch_flows(other), statics, {11, 12})
    assert not plan.adopt and "missing or different" in plan.why
    # a foreign flow, or one in another table
    foreign = FlowMod(ADD, 5, 0x42, out_port=1, eth_dst=mac_to_int("02:00:00:00:00:09"))
    plan = flows.plan_table(ok + _as_switch_flows([foreign]), statics, {11, 12})
    assert not plan.adopt and "would not program" in plan.why
    assert not flows.plan_table(ok + _as_switch_flows([statics[0]], table_id=2), statics, {11, 12}).adopt
    # an ingress check in the forwarding table, or a forwarding rule in the ingress table
    assert not flows.plan_table(ok[1:] + _as_switch_flows(statics[:1], table_id=1), statics, {11, 12}).adopt
    assert not flows.plan_table(ok[:-1] + _as_switch_flows(statics[-1:], table_id=0), statics, {11, 12}).adopt
    # a static twice (once in a foreign form is the same thing as a foreign flow)
    assert not flows.plan_table(ok + ok[:1], statics, {11, 12}).adopt
    # Ruleset 2 flows we would never make: unknown port, wrong cookie index, masked
    bad_port = flows.cache_flowmod(5, 21)
    bad_cookie = FlowMod(ADD, 200, flows.make_cookie(2, 6), out_port=11, eth_dst=(0xAA << 40) | 7)
    masked = FlowMod(ADD, 200, flows.make_cookie(2, 8), out_port=11, eth_dst=(0xAA << 40) | 8,
                     eth_dst_mask=mac_to_int("ff:ff:ff:ff:ff:00"))
    for bad in (bad_port, bad_cookie, masked):
        assert not flows.plan_table(ok + _as_switch_flows([bad]), statics, {11, 12}).adopt, bad
    # a flow with more than we program (another match field, timeouts, more actions)
    from dataclasses import replace
    assert not flows.plan_table([replace(ok[0], plain=False), *ok[1:]], statics, {11, 12}).adopt


def test_to_ofp_of_withdrawal_and_flush():
    from os_ken.ofproto import ofproto_v1_3 as ofp

    from exo_controller.ofp_translate import to_ofp
    w = to_ofp(None, flows.withdraw_flowmod(12))
    assert (w.command, w.table_id, w.out_port, w.cookie, w.cookie_mask) == (
        ofp.OFPFC_DELETE, flows.FORWARD_TABLE, 12, 0xE2 << 56, 0xFF << 56)
    assert not list(w.match.items()) and w.instructions == []
    f = to_ofp(None, flows.flush_flowmod())
    assert (f.command, f.table_id, f.out_port, f.cookie_mask) == (ofp.OFPFC_DELETE, ofp.OFPTT_ALL, ofp.OFPP_ANY, 0)
    d = to_ofp(None, flows.cache_flowmod(5, None, DELETE_STRICT))
    assert (d.command, d.table_id, d.out_port) == (ofp.OFPFC_DELETE_STRICT, flows.FORWARD_TABLE, ofp.OFPP_ANY)


def test_from_stats_marks_flows_we_would_not_program():
    from os_ken.ofproto import ofproto_v1_3 as ofp
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    from exo_controller.ofp_translate import from_stats

    def stat(match, actions, table_id=0, idle=0, cookie=0):
        return parser.OFPFlowStats(table_id=table_id, duration_sec=0, duration_nsec=0, priority=200,
                                   idle_timeout=idle, hard_timeout=0, flags=0, cookie=cookie, packet_count=0,
                                   byte_count=0, match=match, instructions=[parser.OFPInstructionActions(
                                       ofp.OFPIT_APPLY_ACTIONS, actions)])
    out = [parser.OFPActionOutput(11)]
    good = from_stats(stat(parser.OFPMatch(eth_dst="aa:00:00:00:00:05"), out, cookie=flows.make_cookie(2, 5)))
    assert good.plain and good.table_id == 0 and good.ruleset == 2 and good.out_port == 11
    assert not from_stats(stat(parser.OFPMatch(vlan_vid=5, eth_dst="aa:00:00:00:00:05"), out)).plain
    assert not from_stats(stat(parser.OFPMatch(eth_src=("02:00:00:00:00:01", "ff:ff:ff:ff:ff:00")), out)).plain
    assert not from_stats(stat(parser.OFPMatch(eth_dst="aa:00:00:00:00:05"), out, idle=10)).plain
    assert not from_stats(stat(parser.OFPMatch(eth_dst="aa:00:00:00:00:05"),
                               [parser.OFPActionSetField(eth_dst="02:00:00:00:00:01"), *out])).plain
    other = from_stats(stat(parser.OFPMatch(eth_dst="aa:00:00:00:00:05"), out, table_id=3))
    assert other.table_id == 3


def test_eth_dst_match_is_the_thesis_exact_mac(cfg, cluster_dict):
    """switch.cache_match: eth_dst (a hardware L2 table): Ruleset 2 matches aa:<40-bit hash>
    exactly, hashes differing in their low bits get their own rules, and a table programmed in
    one form is not adopted by a controller configured for the other."""
    cluster_dict["switch"]["cache_match"] = "eth_dst"
    ecfg = parse_config(cluster_dict)
    book = CacheRuleBook.from_config(ecfg)
    a, b = 0x12_3456_7801, 0x12_3456_78FE
    res = book.add([CacheRule(a, "cache1"), CacheRule(b, "cache2")])
    assert len(res.flowmods) == 2 and len(book) == 2
    fm = res.flowmods[0]
    assert (fm.eth_dst, fm.eth_dst_mask, fm.ipv4_dst, fm.eth_type) == ((0xAA << 40) | a, None, None, None)
    assert fm.rule_hash == a
    t = FakeFlowTable().apply([*flows.forwarding_flowmods(ecfg), *res.flowmods])
    assert t.lookup(request_mac(PREFIX_GET, a)) == 11 and t.lookup(request_mac(PREFIX_GET, b)) == 12
    assert t.lookup(request_mac(PREFIX_OTHER, a)) == db_port_for(ecfg, a)
    statics = flows.static_flowmods(ecfg)
    table = _as_switch_flows(statics + res.flowmods)
    assert flows.plan_table(table, statics, {11, 12}, "eth_dst").installed == {a: 11, b: 12}
    assert not flows.plan_table(table, statics, {11, 12}, "ipv4_dst").adopt
    ip_table = _as_switch_flows(statics + [flows.cache_flowmod(a, 11)])
    assert not flows.plan_table(ip_table, statics, {11, 12}, "eth_dst").adopt
    with pytest.raises(ValueError):
        flows.cache_flowmod(a, 11, match="tcp_dst")


# ---------------------------------------------------------------- Ruleset 3 reconciled (PartitionBook)

def _moved(fm, port):
    from dataclasses import replace
    return replace(fm, out_port=port)


def _r3(statics):
    return [i for i, fm in enumerate(statics) if fm.ruleset == flows.RULESET_PARTITIONS]


def test_plan_table_adopts_a_ruleset3_rule_pointing_elsewhere_with_one_flowmod_queued(cfg):
    """Before chains, this table was flushed (a static that differs). Now the rule is adopted
    as installed state and the updater sends exactly one ADD that repoints it."""
    from exo_controller.rule_updater import CHAIN, RuleUpdater
    statics = flows.static_flowmods(cfg)
    i = _r3(statics)[5]
    want = statics[i].out_port
    elsewhere = next(p for p in (21, 22, 23) if p != want)
    table = list(statics)
    table[i] = _moved(statics[i], elsewhere)
    plan = flows.plan_table(_as_switch_flows(table), statics, {11, 12}, db_ports={21, 22, 23})
    assert plan.adopt and plan.why == "" and plan.partitions[5] == elsewhere and len(plan.partitions) == 256
    u = RuleUpdater.from_config(cfg)
    u.switch_connected(plan.installed, plan.partitions)
    assert not u.programmed and u.chain_pending([5])
    batch = u.next_batch(0.0)
    assert batch.mods == [statics[i]] and [it.kind for it in batch.items] == [CHAIN]
    assert RuleUpdater.ruleset2_kinds(batch) == [None] and u.metrics(0.0)["ruleset2_flow_mods_sent"] == 0
    u.batch_done(batch, {}, 0.01)
    assert u.programmed and u.partitions_installed == u.partitions.rules()
    assert not u.has_work() and u.flow_mods_sent == 1
    # the same table read again by a controller that has the same book: nothing to send
    u.switch_connected(plan.installed, {**plan.partitions, 5: want})
    assert u.programmed and not u.has_work()
    # a missing Ruleset 3 rule (a controller died while programming) is queued too, not flushed
    plan = flows.plan_table(_as_switch_flows(statics[:i] + statics[i + 1:]), statics, {11, 12})
    assert plan.adopt and 5 not in plan.partitions
    u.switch_connected(plan.installed, plan.partitions)
    assert u.next_batch(10.0).mods == [statics[i]]


def test_plan_table_still_flushes_every_other_ruleset3_difference(cfg, cluster_dict):
    """Adopted: a well-formed rule of the layout to a db node's port. Flushed: one to a port that
    is no db node's, with another mask (another layout), another cookie index, priority or table,
    or with more than an output."""
    from dataclasses import replace
    statics = flows.static_flowmods(cfg)
    i = _r3(statics)[7]
    r3 = statics[i]

    def plan_with(bad):
        table = list(statics)
        table[i] = bad
        return flows.plan_table(_as_switch_flows(table), statics, {11, 12}, db_ports={21, 22, 23})
    assert plan_with(_moved(r3, 23 if r3.out_port != 23 else 22)).adopt
    for bad in (_moved(r3, 11),                                   # a cache node's port
                _moved(r3, 99),                                   # no node's port
                replace(r3, eth_dst_mask=flows.read_match(7, 8)[1]),   # the rf-3 read rule's mask
                replace(r3, cookie=flows.make_cookie(3, 8)),       # slot 8's cookie on slot 7's match
                replace(r3, cookie=flows.make_cookie(3, flows.WRITE_RULE | 7)),  # a write rule at rf 1
                replace(r3, priority=101),
                replace(r3, set_ip_dscp=3),
                replace(r3, table=0)):
        plan = plan_with(bad)
        assert not plan.adopt and "would not program" in plan.why, bad
    # an rf-3 controller does not adopt an rf-1 table (the layout is the config's), nor the reverse
    cluster_dict["replication"] = {"factor": 3}
    statics3 = flows.static_flowmods(parse_config(cluster_dict))
    assert not flows.plan_table(_as_switch_flows(statics), statics3, {11, 12}).adopt
    assert not flows.plan_table(_as_switch_flows(statics3), statics, {11, 12}).adopt
    assert flows.plan_table(_as_switch_flows(statics3), statics3, {11, 12}).adopt


def test_rf1_ruleset3_is_the_owner_table(cfg):
    """At replication.factor 1 the book is exactly Ruleset 3 as it was a static: one rule per
    slot, cookie make_cookie(3, slot), partition_match, the owner's port, priority 100."""
    book = flows.PartitionBook.from_config(cfg)
    ports = {d.name: d.switch_port for d in cfg.db_nodes}
    want = []
    for slot, owner in enumerate(cfg.partitions()):
        value, mask = flows.partition_match(slot, 8)
        want.append(FlowMod(ADD, 100, flows.make_cookie(3, slot), out_port=ports[owner], eth_dst=value,
                            eth_dst_mask=mask))
    assert book.flowmods() == want == flows.partition_flowmods(cfg)
    assert not book.two_rules and book.indices() == list(range(256))
    assert flows.table_flow_limit(cfg) == 6 + 1 + 256 + 100
    assert flows.static_mods(cfg, ruleset3=False) == [m for m in flows.static_mods(cfg) if m not in want]


def test_rf3_layout_has_a_read_rule_to_the_tail_and_a_write_rule_to_the_head(cluster_dict):
    cluster_dict["replication"] = {"factor": 3}
    cluster_dict["switch"]["partition_bits"] = 4
    cfg3 = parse_config(cluster_dict)
    chains = cfg3.chains()
    ports = {d.name: d.switch_port for d in cfg3.db_nodes}
    book = flows.PartitionBook.from_config(cfg3)
    mods = flows.partition_flowmods(cfg3)
    assert book.two_rules and len(mods) == 2 * 16 and flows.table_flow_limit(cfg3) == 6 + 1 + 2 * 16 + 100
    assert all(m.priority == 100 and m.ruleset == 3 for m in mods)
    for slot in range(16):
        read, write = mods[2 * slot], mods[2 * slot + 1]
        assert read.cookie == flows.make_cookie(3, slot) and write.cookie == flows.make_cookie(3, 1 << 16 | slot)
        assert (read.eth_dst, read.eth_dst_mask) == flows.read_match(slot, 4)
        assert (write.eth_dst, write.eth_dst_mask) == flows.write_match(slot, 4)
        assert read.out_port == ports[chains[slot][-1]] and write.out_port == ports[chains[slot][0]]
        assert (book.read_port(slot), book.write_port(slot)) == (read.out_port, write.out_port)
    assert any(m.out_port != n.out_port for m, n in zip(mods[::2], mods[1::2]))  # tails are not heads
    t = FakeFlowTable().apply(flows.forwarding_flowmods(cfg3))
    assert t.count(3) == 32
    for k in keys(500, seed=5):
        h = key_hash(k)
        chain = chains[slot_of(h, 4)]
        tail, head = ports[chain[-1]], ports[chain[0]]
        assert t.lookup(request_mac(PREFIX_GET, h)) == tail
        assert t.lookup(request_mac(keyhash.PREFIX_FORWARDED, h)) == tail
        assert t.lookup(request_mac(PREFIX_OTHER, h)) == head
        assert t.lookup(request_mac(0xBE, h)) is None  # never sent; no rule of this layout takes it


def test_read_and_write_masks_against_all_256_first_bytes():
    for slot, bits in ((0, 8), (0xAB, 8), (0xABC, 12), (1, 1)):
        rv, rm = flows.read_match(slot, bits)
        wv, wm = flows.write_match(slot, bits)
        rest = slot << (40 - bits)
        reads = {b for b in range(256) if ((b << 40) | rest) & rm == rv}
        writes = {b for b in range(256) if ((b << 40) | rest) & wm == wv}
        assert reads == {0xAA, 0xAE} and writes == {0xBA}, (slot, bits)
        # and only this slot: the slot's last key matches, the next slot's first does not
        last = rest | ((1 << (40 - bits)) - 1)
        assert ((0xAA << 40) | last) & rm == rv and ((0xBA << 40) | last) & wm == wv
        if slot + 1 < 1 << bits:
            nxt = (slot + 1) << (40 - bits)
            assert ((0xAA << 40) | nxt) & rm != rv and ((0xBA << 40) | nxt) & wm != wv
    assert flows.int_to_mac(flows.read_match(5, 8)[1]) == "fb:ff:00:00:00:00"
    assert flows.int_to_mac(flows.write_match(5, 8)[0]) == "ba:05:00:00:00:00"
    with pytest.raises(ValueError, match="slot 256 out of range"):
        flows.read_match(256, 8)


def test_partition_book_moves_and_chain_tables(cluster_dict):
    cluster_dict["replication"] = {"factor": 3}
    cluster_dict["switch"]["partition_bits"] = 2
    cfg3 = parse_config(cluster_dict)
    ports = {d.name: d.switch_port for d in cfg3.db_nodes}
    book = flows.PartitionBook.from_config(cfg3)
    before = book.rules()
    assert book.apply_chains(cfg3.chains(), ports) == []  # the same table: nothing to send
    r, w = book.read_port(1), book.write_port(1)
    other = next(p for p in (21, 22, 23) if p not in (r, w))
    assert book.move(1, read_port=other) == [1] and book.port(1) == other and book.port(flows.WRITE_RULE | 1) == w
    assert book.move(1, read_port=other) == []
    assert book.move(1, read_port=r, write_port=other) == [1, flows.WRITE_RULE | 1]
    # db1 fails: chains without it (heads and tails move) -> exactly the rules that changed
    chains = [[n for n in c if n != "db1"] for c in cfg3.chains()]
    book = flows.PartitionBook.from_config(cfg3)
    changed = book.apply_chains(chains, ports)
    assert changed == [i for i in book.indices() if book.port(i) != before[i]]
    assert all(ports["db1"] not in (book.read_port(s), book.write_port(s)) for s in range(4))
    assert {before[i] for i in changed} == {ports["db1"]}
    # known-bad tables name the chain and change nothing
    snapshot = book.rules()
    for bad, why in (([["db1"]] * 3, "3 entries for 4 slots"), ([[]] + chains[1:], r"chains\[0\]: empty"),
                     ([["db9"]] + chains[1:], r"chains\[0\]\[0\]: 'db9' is not a db node")):
        with pytest.raises(ValueError, match=why):
            book.apply_chains(bad, ports)
        assert book.rules() == snapshot
    with pytest.raises(ValueError, match="out of range"):
        book.move(4, read_port=21)
    with pytest.raises(KeyError):
        book.port(4)
    # rf 1: one rule per slot has one port
    book1 = flows.PartitionBook.from_config(parse_config({**cluster_dict, "replication": {"factor": 1}}))
    assert book1.move(0, write_port=other if book1.port(0) != other else r) == [0]
    with pytest.raises(ValueError, match="one rule per slot"):
        book1.move(0, read_port=21, write_port=22)
    with pytest.raises(ValueError, match="one rule per slot"):
        book1.apply_chains([["db1", "db2"]] * 4, ports)
    with pytest.raises(KeyError):
        book1.port(flows.WRITE_RULE | 0)
