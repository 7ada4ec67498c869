"""Table 0's ingress checks (exo_controller/ingress.py) on a fake two-table OpenFlow pipeline:
frames from each kind of port are checked, dropped by a rule whose cookie names the check, or
passed to table 1 (Rulesets 1-3), with the client's meter and the cache-port DSCP mark. Also the
meters, the barrier between meters and flows, the rate limit with the extra statics, the
OpenFlow translation both ways (a read-back table is adopted), and the counters in Stats."""
from dataclasses import dataclass, replace
from typing import Optional

import pytest

from exo_common.config import parse_config
from exo_controller import flows, ingress
from exo_controller.flows import ADD, DELETE, FlowMod, ip_to_int, mac_to_int
from exo_controller.ingress import MeterMod, cookie_name
from exo_controller.rule_updater import RuleUpdater
from exoskeleton.keyhash import PREFIX_FORWARDED, PREFIX_GET, PREFIX_OTHER, key_hash, request_ip, request_mac
from exoskeleton.wire import FORWARDED_DSCP

ARP, IPV4 = 0x0806, 0x0800


@dataclass(frozen=True)
class Frame:
    in_port: int
    eth_src: str
    eth_dst: bytes
    ip_src: str = ""
    ip_dst: bytes = b""
    eth_type: int = IPV4
    dscp: int = 0
    arp_sha: str = ""


@dataclass
class Verdict:
    cookie: int                 # the table 0 rule that decided
    out_port: Optional[int]     # None: dropped (table 0, or a table 1 miss)
    dscp: int                   # as it leaves the switch
    meter: Optional[int]

    @property
    def check(self) -> str:
        return cookie_name(self.cookie)[0]


def _matches(fm: FlowMod, f: Frame, table: int) -> bool:
    eth_dst = int.from_bytes(f.eth_dst, "big")
    ip_dst = int.from_bytes(f.ip_dst, "big") if f.ip_dst else None
    ip_src = ip_to_int(f.ip_src) if f.ip_src else None
    tests = [
        fm.table == table,
        fm.in_port is None or fm.in_port == f.in_port,
        fm.eth_type is None or fm.eth_type == f.eth_type,
        fm.eth_src is None or fm.eth_src == mac_to_int(f.eth_src),
        fm.eth_dst is None or eth_dst & (fm.eth_dst_mask or (1 << 48) - 1) == fm.eth_dst,
        fm.ipv4_src is None or (f.eth_type == IPV4 and fm.ipv4_src == ip_src),
        fm.ipv4_dst is None or (f.eth_type == IPV4 and fm.ipv4_dst == ip_dst),
        fm.ip_dscp is None or (f.eth_type == IPV4 and fm.ip_dscp == f.dscp),
        fm.arp_spa is None or (f.eth_type == ARP and fm.arp_spa == ip_src),
        fm.arp_sha is None or (f.eth_type == ARP and fm.arp_sha == mac_to_int(f.arp_sha)),
    ]
    return all(tests)


def _best(mods, f: Frame, table: int) -> Optional[FlowMod]:
    hits = [m for m in mods if m.command == ADD and _matches(m, f, table)]
    if not hits:
        return None
    top = max(m.priority for m in hits)
    best = [m for m in hits if m.priority == top]
    assert len(best) == 1, f"overlapping flows at priority {top}: {best}"
    return best[0]


def pipeline(mods, f: Frame) -> Verdict:
    """Table 0, then (goto) table 1, as OpenFlow 1.3 runs them."""
    first = _best(mods, f, flows.INGRESS_TABLE)
    assert first is not None, "table 0 must decide every frame (its lowest rule drops the rest)"
    if first.drop:
        return Verdict(first.cookie, None, f.dscp, None)
    dscp = first.set_ip_dscp if first.set_ip_dscp is not None else f.dscp
    assert first.goto_table == flows.FORWARD_TABLE
    second = _best(mods, replace(f, dscp=dscp), flows.FORWARD_TABLE)
    return Verdict(first.cookie, second.out_port if second else None, dscp, first.meter_id)


@pytest.fixture
def mods(cfg):
    return flows.static_flowmods(cfg)


def _request(cfg, who, key=b"k1", op_prefix=PREFIX_GET, **kw):
    n = cfg.node(who)
    h = key_hash(key)
    fields = dict(in_port=n.switch_port, eth_src=n.mac, eth_dst=request_mac(op_prefix, h), ip_src=n.ip,
                  ip_dst=request_ip(h))
    fields.update(kw)
    return Frame(**fields)


def _db_port(cfg, key):
    from exo_common.partitions import slot_of
    owner = cfg.partitions()[slot_of(key_hash(key), cfg.switch.partition_bits)]
    return cfg.node(owner).switch_port


def test_honest_client_traffic_passes_with_its_meter(cfg, mods):
    for prefix in (PREFIX_GET, PREFIX_OTHER):  # a GET, a PUT/DELETE
        v = pipeline(mods, _request(cfg, "client1", b"k1", prefix))
        assert (v.check, v.out_port, v.meter, v.dscp) == ("client_ip", _db_port(cfg, b"k1"), 1, 0)
    arp = Frame(31, "02:00:00:00:03:01", b"\xff" * 6, ip_src="10.0.3.1", eth_type=ARP, arp_sha="02:00:00:00:03:01")
    v = pipeline(mods, arp)
    assert v.check == "client_arp" and v.meter == 1 and v.out_port == flows.OFPP_FLOOD


@pytest.mark.parametrize("lie", [dict(eth_src="02:00:00:00:03:99"), dict(ip_src="10.0.3.99"),
                                 dict(eth_src="02:00:00:00:01:01", ip_src="10.0.1.1")])  # posing as cache1
def test_client_frames_with_another_source_are_dropped(cfg, mods, lie):
    v = pipeline(mods, _request(cfg, "client1", **lie))
    assert (v.check, v.out_port) == ("client_source", None)


def test_arp_with_another_address_is_dropped(cfg, mods):
    spoof = Frame(31, "02:00:00:00:03:01", b"\xff" * 6, ip_src="10.0.2.1", eth_type=ARP, arp_sha="02:00:00:00:03:01")
    assert pipeline(mods, spoof).check == "client_source_arp"
    for lie in (dict(ip_src="10.0.3.1", arp_sha="02:00:00:00:02:01"), dict(eth_src="02:00:00:00:02:01")):
        assert pipeline(mods, replace(spoof, **lie)).check == "client_source_arp"


def test_other_protocols_from_a_client_are_dropped_apart_from_spoofs(cfg, mods):
    """The cluster speaks IPv4 and ARP: a host's own IPv6 neighbour discovery is dropped too,
    but counted apart (client_other), so client_source counts spoofs only."""
    for lie in ({}, dict(eth_src="02:00:00:00:03:99")):
        v = pipeline(mods, _request(cfg, "client1", eth_type=0x86DD, **lie))
        assert (v.check, v.out_port) == ("client_other", None)


def test_client_frames_with_the_forwarded_prefix_are_dropped(cfg, mods):
    """A client never sends prefix 0xAE (only a cache node forwards a GET): any such frame from a
    client port is a client posing as a cache node, dropped whatever its source or DSCP."""
    for lie in ({}, dict(eth_src="02:00:00:00:01:01"), dict(dscp=FORWARDED_DSCP)):
        v = pipeline(mods, _request(cfg, "client1", op_prefix=PREFIX_FORWARDED, **lie))
        assert (v.check, v.out_port) == ("client_forwarded", None)


def test_client_frames_claiming_the_cache_port_mark_are_dropped(cfg, mods):
    """A 0xBA frame with the DSCP only the switch writes on cache ports is a client posing as an
    older cache node's forwarded miss (db nodes still serve those at rf 1): dropped whatever its
    source, and counted with the 0xAE drops."""
    for lie in ({}, dict(eth_src="02:00:00:00:01:01")):
        v = pipeline(mods, _request(cfg, "client1", op_prefix=PREFIX_OTHER, dscp=FORWARDED_DSCP, **lie))
        assert (v.check, v.out_port) == ("client_forwarded_mark", None)
    assert ingress.DROPS["client_forwarded_mark"] == ingress.DROPS["client_forwarded"]
    # the same DSCP on a 0xAA GET is no claim (it goes to a cache node or a db node as a GET,
    # and a db node refuses a FORWARDED flag without the mark it gets from cache ports only)
    assert pipeline(mods, _request(cfg, "client1", dscp=FORWARDED_DSCP)).check == "client_ip"


def test_cache_node_misses_get_the_mark_and_reach_the_db_node(cfg, mods):
    """A forwarded miss keeps the client's source addresses: the port vouches for it."""
    fwd = _request(cfg, "client1", b"k7", PREFIX_FORWARDED, in_port=11)
    v = pipeline(mods, fwd)
    assert (v.check, v.out_port, v.dscp, v.meter) == ("cache_forwarded", _db_port(cfg, b"k7"), FORWARDED_DSCP, None)
    # a 0xBA frame from a cache port (a cache node sends no writes on the data plane) is not marked
    v = pipeline(mods, _request(cfg, "client1", b"k7", PREFIX_OTHER, in_port=11))
    assert (v.check, v.out_port, v.dscp) == ("node_port", _db_port(cfg, b"k7"), 0)
    # its replies (to a client's MAC) and ARP pass unmarked
    reply = Frame(11, "02:00:00:00:01:01", bytes.fromhex("020000000301"), ip_src="10.0.1.1", ip_dst=b"\x0a\x00\x03\x01")
    v = pipeline(mods, reply)
    assert (v.check, v.out_port, v.dscp) == ("node_port", 31, 0)


def test_db_node_ports_pass_and_unknown_ports_are_dropped(cfg, mods):
    reply = Frame(22, "02:00:00:00:02:02", bytes.fromhex("020000000301"), ip_src="10.0.2.2", ip_dst=b"\x0a\x00\x03\x01")
    assert (pipeline(mods, reply).check, pipeline(mods, reply).out_port) == ("node_port", 31)
    for port in (7, 0xFFFF_FFFE):  # a port the config does not name; the bridge's LOCAL port
        v = pipeline(mods, _request(cfg, "client1", in_port=port))
        assert (v.check, v.out_port) == ("unknown_port", None)
        assert cookie_name(v.cookie) == ("unknown_port", 0)


def test_the_checker_catches_a_missing_rule(cfg, mods):
    """Known-bad inputs: without the spoof drop, a spoofed frame falls to the unknown-port drop
    (a different counter); without the 0xAE drop a client's forwarded-prefix frame passes, and
    without the mark check a marked 0xBA frame is forwarded to a db node marked."""
    def kind(m):
        return (cookie_name(m.cookie) or ("table 1",))[0]
    no_source = [m for m in mods if kind(m) != "client_source"]
    assert pipeline(no_source, _request(cfg, "client1", eth_src="02:00:00:00:03:99")).check == "client_other"
    no_fwd = [m for m in mods if kind(m) != "client_forwarded"]
    v = pipeline(no_fwd, _request(cfg, "client1", op_prefix=PREFIX_FORWARDED))
    assert v.check == "client_ip" and v.out_port is not None
    no_mark = [m for m in mods if kind(m) != "client_forwarded_mark"]
    v = pipeline(no_mark, _request(cfg, "client1", op_prefix=PREFIX_OTHER, dscp=FORWARDED_DSCP))
    assert v.out_port is not None and v.dscp == FORWARDED_DSCP


def test_emulator_nodes_share_one_port_rule(cluster_dict):
    for d in cluster_dict["db_nodes"]:
        d.update(emulator="wimpy1", ip="10.0.2.9", switch_port=29, iface="wimpy1-eth0")
    cfg = parse_config(cluster_dict)
    names = [cookie_name(m.cookie) for m in ingress.ingress_flowmods(cfg)]
    assert names.count(("node_port", 29)) == 1
    assert len(names) == len(set(names))


def test_cookies_name_the_check_and_the_port(cfg, mods):
    table0 = [m for m in mods if m.table == flows.INGRESS_TABLE]
    assert all(m.ruleset == flows.RULESET_INGRESS for m in table0)
    assert [cookie_name(m.cookie) for m in table0] == [
        ("client_forwarded", 31), ("client_forwarded_mark", 31), ("client_ip", 31), ("client_arp", 31), ("client_source", 31),
        ("client_source_arp", 31), ("client_other", 31), ("cache_forwarded", 11), ("node_port", 11), ("cache_forwarded", 12), ("node_port", 12),
        ("node_port", 21), ("node_port", 22), ("node_port", 23), ("unknown_port", 0)]
    assert ingress.ingress_cookie("client_source", 31) == 0xE4_0000_0300_0000_1F
    assert cookie_name(flows.make_cookie(2, 5)) is None
    with pytest.raises(ValueError, match="unknown ingress rule kind"):
        ingress.ingress_cookie("client_typo", 1)


# ---------------------------------------------------------------- meters

def test_meters_one_per_client_and_none_when_off(cluster_dict):
    cluster_dict["clients"].append({"name": "client2", "mac": "02:00:00:00:03:02", "ip": "10.0.3.2",
                                    "switch_port": 32})
    cluster_dict["switch"]["client_meter_pps"] = 5000
    cfg = parse_config(cluster_dict)
    assert ingress.meter_mods(cfg) == [MeterMod(DELETE, ingress.OFPM_ALL), MeterMod(ADD, 1, 5000, 500),
                                       MeterMod(ADD, 2, 5000, 500)]
    assert ingress.client_meter_id(cfg, "client2") == 2
    metered = {cookie_name(m.cookie): m.meter_id for m in ingress.ingress_flowmods(cfg) if m.meter_id}
    assert metered == {("client_ip", 31): 1, ("client_arp", 31): 1, ("client_ip", 32): 2, ("client_arp", 32): 2}
    cluster_dict["switch"]["client_meter_pps"] = 0
    off = parse_config(cluster_dict)
    assert ingress.meter_mods(off) == [] and not any(m.meter_id for m in ingress.ingress_flowmods(off))
    assert flows.static_mods(off) == flows.static_flowmods(off)


def test_meter_rate_is_checked_by_the_config(cluster_dict):
    from exo_common.config import ConfigError
    cluster_dict["switch"]["client_meter_pps"] = -1
    with pytest.raises(ConfigError, match="client_meter_pps"):
        parse_config(cluster_dict)


def _drain(u: RuleUpdater, t0=0.0):
    """Run the updater's statics to the end on a fake clock (barriers answered at once);
    returns [(time, batch mods)]."""
    out, now = [], t0
    u.switch_connected(None)
    while not u.programmed:
        wake = u.next_wakeup(now)
        assert wake is not None
        now = max(now, wake)
        batch = u.next_batch(now)
        if batch.mods:
            out.append((now, batch.mods))
            u.mark_sent(batch, now)
            u.batch_done(batch, {}, now)
    return out


def test_meters_go_before_the_flows_that_use_them_with_a_barrier_between(cfg):
    u = RuleUpdater.from_config(cfg)  # R = 50 (the default)
    batches = [mods for _, mods in _drain(u)]
    sent = [m for b in batches for m in b]
    assert sent[0] == flows.flush_flowmod() and sent[1] == MeterMod(DELETE, ingress.OFPM_ALL)
    assert sent[2] == MeterMod(ADD, 1, 1_000_000, 100_000)
    assert sent[3:] == flows.static_flowmods(cfg)
    # a barrier after the delete of every meter and after the last meter: each ends its batch
    ends = [b[-1] for b in batches]
    assert sent[1] in ends and sent[2] in ends
    assert not any(isinstance(m, MeterMod) for b in batches for m in b if b[-1] is not m and isinstance(b[-1], FlowMod))


def test_statics_with_meters_and_ingress_checks_respect_the_rate(cluster_dict):
    """switch.rule_update_rate holds for every message that changes the switch, meter-mods and
    the ingress checks included (at most R in any 1 s window, decision to barrier)."""
    cluster_dict["switch"].update(rule_update_rate=20.0, partition_bits=4)
    cfg = parse_config(cluster_dict)
    u = RuleUpdater.from_config(cfg)
    sends = [t for t, mods in _drain(u) for _ in mods]
    assert len(sends) == 1 + len(flows.static_mods(cfg)) == 1 + 2 + 15 + 7 + 16
    assert all(sends[i + 20] - sends[i] >= 1.0 for i in range(len(sends) - 20))
    assert u.max_per_s <= 20


# ---------------------------------------------------------------- OpenFlow, both ways

def _as_read_back(mods):
    """The flows as a switch holds them: our flow-mods translated to OpenFlow and back."""
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    from exo_controller.ofp_translate import from_stats, to_ofp
    out = []
    for fm in mods:
        msg = to_ofp(None, fm)
        out.append(from_stats(parser.OFPFlowStats(
            table_id=msg.table_id, duration_sec=1, duration_nsec=0, priority=msg.priority, idle_timeout=0,
            hard_timeout=0, flags=0, cookie=msg.cookie, packet_count=0, byte_count=0, match=msg.match,
            instructions=msg.instructions)))
    return out


def test_translation_round_trips_and_a_read_back_table_is_adopted(cfg):
    from exo_controller.ofp_translate import meter_from_config, to_ofp
    from os_ken.ofproto import ofproto_v1_3 as ofp
    from os_ken.ofproto import ofproto_v1_3_parser as parser
    statics = flows.static_mods(cfg)
    back = _as_read_back(flows.static_flowmods(cfg))
    assert all(f.plain for f in back)
    assert [flows.switch_flow_as_flowmod(f) for f in back] == flows.static_flowmods(cfg)
    meters = [m for m in statics if isinstance(m, MeterMod) and m.command == ADD]
    read_meters = []
    for m in meters:
        msg = to_ofp(None, m)
        assert (msg.command, msg.flags, msg.meter_id) == (ofp.OFPMC_ADD, ofp.OFPMF_PKTPS | ofp.OFPMF_BURST
                                                          | ofp.OFPMF_STATS, 1)
        read_meters.append(meter_from_config(parser.OFPMeterConfigStats(flags=msg.flags, meter_id=msg.meter_id,
                                                                       bands=msg.bands)))
    assert read_meters == meters
    plan = flows.plan_table(back, statics, {11, 12}, meters=read_meters)
    assert plan.adopt, plan.why
    # the instructions as OpenFlow orders them: meter, apply-actions, goto-table
    allow = to_ofp(None, next(m for m in flows.static_flowmods(cfg) if m.meter_id))
    assert [type(i).__name__ for i in allow.instructions] == ["OFPInstructionMeter", "OFPInstructionGotoTable"]
    mark = to_ofp(None, next(m for m in flows.static_flowmods(cfg) if m.set_ip_dscp))
    assert [type(i).__name__ for i in mark.instructions] == ["OFPInstructionActions", "OFPInstructionGotoTable"]
    assert to_ofp(None, next(m for m in flows.static_flowmods(cfg) if m.drop)).instructions == []
    delete_all = to_ofp(None, MeterMod(DELETE, ingress.OFPM_ALL))
    assert (delete_all.command, delete_all.meter_id, delete_all.bands) == (ofp.OFPMC_DELETE, ofp.OFPM_ALL, [])


def test_a_table_with_other_meters_is_flushed(cfg):
    statics = flows.static_mods(cfg)
    back = _as_read_back(flows.static_flowmods(cfg))
    right = [MeterMod(ADD, 1, 1_000_000, 100_000)]
    assert flows.plan_table(back, statics, {11, 12}, meters=right).adopt
    for wrong, why in (([MeterMod(ADD, 1, 999, 99)], "meters differ"), ([], "meters differ"),
                       (right + [MeterMod(ADD, 9, 5, 1)], "meters differ"), (None, "could not be read")):
        plan = flows.plan_table(back, statics, {11, 12}, meters=wrong)
        assert not plan.adopt and why in plan.why
    # an ingress check changed (e.g. a client's new MAC in the config) is a missing static
    changed = [replace(back[1], eth_src="02:00:00:00:03:77"), *back[:1], *back[2:]]
    assert not flows.plan_table(changed, statics, {11, 12}, meters=right).adopt


def test_bad_flowmods_are_refused_by_the_translation():
    from exo_controller.ofp_translate import to_ofp
    with pytest.raises(ValueError, match="without out_port, goto_table or drop"):
        to_ofp(None, FlowMod(ADD, 1, 0, table=0))
    with pytest.raises(ValueError, match="drop rule with actions"):
        to_ofp(None, FlowMod(ADD, 1, 0, table=0, drop=True, goto_table=1))


# ---------------------------------------------------------------- the counters

def test_counters_sum_the_drop_rules_and_the_meters(cfg):
    @dataclass
    class Stat:
        cookie: int
        packet_count: int
    read = [Stat(ingress.ingress_cookie("client_source", 31), 5), Stat(ingress.ingress_cookie("client_source_arp", 31), 1),
            Stat(ingress.ingress_cookie("client_forwarded", 31), 2), Stat(ingress.ingress_cookie("client_other", 31), 3),
            Stat(ingress.ingress_cookie("client_forwarded_mark", 31), 4),
            Stat(ingress.ingress_cookie("unknown_port"), 7), Stat(ingress.ingress_cookie("client_ip", 31), 1000),
            Stat(flows.make_cookie(2, 0x1200), 99)]
    c = ingress.counters(cfg, read, {1: 40})
    assert c == {"ingress_client_source_dropped": 6, "ingress_client_forwarded_dropped": 6,
                 "ingress_client_other_dropped": 3, "ingress_unknown_port_dropped": 7, "ingress_meter_dropped": 40,
                 "ingress_client_source_dropped client1": 6, "ingress_client_forwarded_dropped client1": 6,
                 "ingress_client_other_dropped client1": 3, "ingress_meter_dropped client1": 40}
