"""ExoControllerApp against a fake datapath (no switch, no os-ken event loop): programming on
connect, the rate-limited sender thread, barrier-confirmed updates, no_wait, switch errors,
timeouts, disconnects, flow-stats readback, Stats. Tests that do not test the rate use a high R.
The fake datapath (fake_switch.py) keeps a flow table and answers flow-stats requests, because
on connect the app first reads the switch's table (kept if its statics are ours, else flushed).
These apps run without the cache node monitor; test_controller_liveness.py covers it."""
import threading
import time
from types import SimpleNamespace

import pytest
from os_ken.controller.handler import DEAD_DISPATCHER
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from exo_controller.app import ExoControllerApp, SwitchNotConnected, SwitchTimeout
from exo_common.config import parse_config
from exo_controller.flows import PRIORITY, PRIORITY_ARP, CacheRule, make_cookie, rule_hash
from exo_controller.grpc_service import ControllerServicer
from exoproto import control_pb2
from fake_switch import FakeDatapath, H  # H(i): key hash number i (i << flows.IP_SHIFT)

# A realistic 40-bit key hash: Ruleset 2 matches its top 32 bits (0x12345678 = 18.52.86.120) as
# the IPv4 destination; its low 8 bits (0x9a) are not part of the rule.
K = 0x12_3456_789A


def make_app(cluster_dict, rate=100_000.0, barrier_timeout=0.3, **switch):
    cluster_dict["switch"].update(rule_update_rate=rate, **switch)
    return ExoControllerApp(exo_config=parse_config(cluster_dict), barrier_timeout=barrier_timeout)


@pytest.fixture
def app(cluster_dict):
    app = make_app(cluster_dict)
    yield app
    app.stop()


def connect(app, answer_barriers=True, answer_stats=True, **kw):
    """A programmed switch; answer_barriers/answer_stats=False apply after the programming."""
    dp = FakeDatapath(app, **kw)
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert app.connected.wait(2)
    wait_for(lambda: not app._waiters)  # the statics' barrier is fully processed
    dp.answer_barriers = answer_barriers
    dp.answer_stats = answer_stats
    dp.sent.clear()
    return dp


def wait_for(pred, timeout=2.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def dead(app, dp):
    app._state_change(SimpleNamespace(state=DEAD_DISPATCHER, datapath=dp))


def test_not_connected(app):
    with pytest.raises(SwitchNotConnected, match="not connected"):
        app.add_cache_rules([CacheRule(H(1), "cache1")])
    assert len(app.book) == 0
    with pytest.raises(SwitchNotConnected):
        app.list_flows(2)


def test_programming_on_connect(app, cfg):
    dp = FakeDatapath(app)
    app.updater.add([CacheRule(H(5) | 0x3C, "cache2")])  # desired rules survive reconnects
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert app.connected.wait(2)
    # The table (and its meters) is read first; this fake switch's is empty (not our statics), so: flush.
    assert isinstance(dp.sent[0], parser.OFPFlowStatsRequest) and dp.sent[0].table_id == ofp.OFPTT_ALL
    assert isinstance(dp.sent[1], parser.OFPMeterConfigStatsRequest)
    mods = dp.mods()
    assert mods[0].command == ofp.OFPFC_DELETE and mods[0].cookie_mask == 0
    assert mods[0].table_id == ofp.OFPTT_ALL and mods[0].out_port == ofp.OFPP_ANY
    # then every meter is deleted and the client's meter added, each batch ended by a barrier
    meters = [(i, m) for i, m in enumerate(dp.sent) if isinstance(m, parser.OFPMeterMod)]
    assert [(m.command, m.meter_id) for _, m in meters] == [(ofp.OFPMC_DELETE, ofp.OFPM_ALL), (ofp.OFPMC_ADD, 1)]
    assert all(isinstance(dp.sent[i + 1], parser.OFPBarrierRequest) for i, _ in meters)
    assert list(dp.table.meters) == [1]
    # table 0: the ingress checks (ingress.py), all before table 1's rules
    ingress = [m for m in dp.mods(ofp.OFPFC_ADD) if m.table_id == 0]
    assert len(ingress) == 7 + 2 * 2 + 3 + 1  # client: 7; cache node: 2; db node: 1; other ports: 1
    adds = [m for m in dp.mods(ofp.OFPFC_ADD) if m.table_id == 1]
    nodes = len(cfg.cache_nodes) + len(cfg.db_nodes) + len(cfg.clients)
    assert len(adds) == nodes + 1 + 2 ** cfg.switch.partition_bits + 1
    assert adds[-1].cookie == make_cookie(2, H(5))  # Ruleset 2 after the statics, indexed by rule hash
    assert isinstance(dp.sent[-1], parser.OFPBarrierRequest)
    # Ruleset 2: the GET prefix byte (masked) and the hash's top 32 bits as the IPv4 destination
    assert adds[-1].priority == PRIORITY[2] == 200
    assert adds[-1].match["eth_type"] == 0x0800
    assert adds[-1].match["eth_dst"] == ("aa:00:00:00:00:00", "ff:00:00:00:00:00")
    assert adds[-1].match["ipv4_dst"] == "0.0.0.5"
    assert adds[-1].instructions[0].actions[0].port == 12
    r3 = [m for m in adds if m.priority == 100]
    assert len(r3) == 2 ** cfg.switch.partition_bits and r3[0].match["eth_dst"][1] == "eb:ff:00:00:00:00"
    # Ruleset 1 (one exact-MAC rule per node) and ARP sit below the request rules
    r1 = [m for m in adds if m.priority == PRIORITY[1]]
    assert PRIORITY[1] == 50 and len(r1) == nodes and all(isinstance(m.match["eth_dst"], str) for m in r1)
    assert [m.match["eth_type"] for m in adds if m.priority == PRIORITY_ARP] == [0x0806] and PRIORITY_ARP == 40


def test_statics_are_rate_limited(cluster_dict):
    # flush + 2 meter-mods + 15 ingress checks + 6 nodes + ARP + 2 slots = 27
    app = make_app(cluster_dict, rate=8.0, partition_bits=1)
    dp = FakeDatapath(app)
    start = time.monotonic()
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert app.connected.wait(8)
    assert time.monotonic() - start >= 2.0  # 27 messages at 8/s
    times = [t for t, m in zip(dp.times, dp.sent) if isinstance(m, (parser.OFPFlowMod, parser.OFPMeterMod))]
    assert len(times) == 27
    assert all(times[i + 8] - times[i] >= 1.0 for i in range(len(times) - 8))
    assert app.stats()["rule_updates_per_s_max"] <= 8
    app.stop()


def test_other_dpid_ignored(app):
    dp = FakeDatapath(app, dpid=99)
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    time.sleep(0.05)
    assert dp.sent == [] and not app.is_connected()


def test_add_remove_wait_for_barrier(app):
    dp = connect(app, barrier_delay=0.2)
    start = time.monotonic()
    out = app.add_cache_rules([CacheRule(K, "cache1"), CacheRule(H(7), "nope")])
    assert time.monotonic() - start >= 0.2  # returned after the barrier reply
    assert (out.accepted, out.rejected) == (1, 1) and "nope" in out.error
    assert app.updater.installed == {rule_hash(K): 11} == {0x12_3456_7800: 11}
    (mod,) = dp.mods()
    assert mod.command == ofp.OFPFC_ADD and mod.priority == 200
    assert mod.match["ipv4_dst"] == "18.52.86.120" and mod.cookie == make_cookie(2, rule_hash(K))
    assert dp.table.ruleset2() == {rule_hash(K): 11}
    assert isinstance(dp.sent[-1], parser.OFPBarrierRequest)
    out = app.remove_cache_rules([CacheRule(K, "cache1")])
    assert (out.accepted, out.rejected, out.error) == (1, 0, "")
    assert dp.mods()[-1].command == ofp.OFPFC_DELETE_STRICT
    assert dp.mods()[-1].match["ipv4_dst"] == "18.52.86.120" and dp.table.ruleset2() == {}
    assert len(app.book) == 0 and app.updater.installed == {}
    assert not app._waiters and not app._mod_xids


def test_no_wait_returns_before_the_rule_is_sent(app):
    app.barrier_timeout = 5
    dp = connect(app, answer_barriers=False)
    out = app.add_cache_rules([CacheRule(H(1), "cache1")], wait=False)
    assert (out.accepted, out.rejected) == (1, 0)
    wait_for(lambda: dp.unanswered)  # the sender sent rule 1 and waits for its barrier
    out = app.add_cache_rules([CacheRule(H(2), "cache2")], loads=[3.0], wait=False)
    assert (out.accepted, out.rejected, out.error) == (1, 0, "")
    assert len(dp.mods()) == 1 and app.stats()["rule_adds_queued"] == 1
    dp.answer(dp.unanswered.pop())
    wait_for(lambda: len(dp.mods()) == 2)
    assert dp.mods()[1].cookie == make_cookie(2, H(2))


def test_wait_timeout_keeps_the_change_queued(app):
    dp = connect(app, answer_barriers=False)
    app.barrier_timeout = 0.1
    out = app.add_cache_rules([CacheRule(H(9), "cache1")], timeout=0.35)
    assert (out.accepted, out.rejected) == (0, 0) and "not confirmed" in out.error  # neither: pending
    assert app.book.owner(H(9)) == "cache1"
    assert len(dp.mods(ofp.OFPFC_ADD)) >= 2  # resent after each barrier timeout
    assert app.counters["batches_failed"] >= 2
    dp.answer_barriers = True
    wait_for(lambda: app.updater.installed == {H(9): 11})


def test_table_full_error_rejects_that_rule(app):
    full = make_cookie(2, H(0xBAD))
    dp = connect(app, fail=lambda m: m.cookie == full and m.command == ofp.OFPFC_ADD)
    out = app.add_cache_rules([CacheRule(H(0xBAD), "cache1"), CacheRule(H(0x600D), "cache2")])
    assert (out.accepted, out.rejected) == (1, 1)
    assert "TABLE_FULL" in out.error
    assert app.book.owner(H(0xBAD)) is None and app.book.owner(H(0x600D)) == "cache2"
    assert app.counters["ofp_errors"] == 1 and app.stats()["flow_mods_refused"] == 1


def test_capacity(app, cfg):
    connect(app)
    c = cfg.switch.cache_rule_capacity
    out = app.add_cache_rules([CacheRule(H(i), "cache1") for i in range(1, c + 2)])
    assert (out.accepted, out.rejected) == (c, 1) and "full" in out.error
    assert app.stats()["ruleset2_installed"] == c


def test_disconnect_while_waiting_then_reconnect(app):
    dp = connect(app, answer_barriers=False)
    app.barrier_timeout = 5
    threading.Timer(0.1, dead, args=(app, dp)).start()
    out = app.add_cache_rules([CacheRule(H(9), "cache1")])
    assert (out.accepted, out.rejected) == (0, 0) and "disconnected" in out.error
    assert not app.is_connected() and app.book.owner(H(9)) == "cache1"
    # known switch, down for now: changes queue up instead of failing
    out = app.add_cache_rules([CacheRule(H(10), "cache2")])
    assert (out.accepted, out.rejected) == (0, 0) and "not connected" in out.error
    out = app.add_cache_rules([CacheRule(H(11), "cache2")], wait=False)
    assert (out.accepted, out.rejected, out.error) == (1, 0, "")
    # The same switch reconnects with its flows. This used to flush and re-add everything; now
    # the controller reads the table, finds its statics intact and keeps them: the ADD of 9 did
    # reach the switch (only its barrier reply was lost), so only 10 and 11 are sent.
    dp2 = connect_keep(app, table=dp.table)
    wait_for(lambda: app.updater.installed == {H(9): 11, H(10): 12, H(11): 12})
    assert not dp2.mods(ofp.OFPFC_DELETE)
    assert {m.cookie for m in dp2.mods(ofp.OFPFC_ADD)} == {make_cookie(2, H(i)) for i in (10, 11)}
    assert dp2.table.ruleset2() == {H(9): 11, H(10): 12, H(11): 12}
    assert app.counters["switch_tables_kept"] == 1 and app.counters["switch_tables_flushed"] == 1


def connect_keep(app, **kw):
    dp = FakeDatapath(app, **kw)
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert app.connected.wait(2)
    return dp


def test_stats_and_grpc(app):
    dp = connect(app)
    svc = ControllerServicer(app)
    ctx = SimpleNamespace(time_remaining=lambda: 5.0)
    req = control_pb2.CacheRulesRequest(rules=[control_pb2.CacheRule(key_hash=H(3), cache_node="cache1", load=2.0),
                                               control_pb2.CacheRule(key_hash=H(4), cache_node="cache1", load=9.0)])
    rep = svc.AddCacheRules(req, ctx)
    assert (rep.accepted, rep.rejected) == (2, 0)
    assert [m.cookie for m in dp.mods()] == [make_cookie(2, H(4)), make_cookie(2, H(3))]  # hottest first
    rep = svc.RemoveCacheRules(control_pb2.CacheRulesRequest(
        rules=[control_pb2.CacheRule(key_hash=H(3), cache_node="cache1")], no_wait=True), ctx)
    assert (rep.accepted, rep.rejected) == (1, 0)
    wait_for(lambda: app.updater.installed == {H(4): 11})
    stats = svc.Stats(control_pb2.StatsRequest(), ctx)
    assert stats.node == "controller"
    counters = {c.name: c.value for c in stats.counters}
    static = 1 + 2 + 15 + 6 + 1 + 256  # flush, meters, ingress checks, Ruleset 1 + ARP, Ruleset 3
    assert counters["flow_mods_sent"] == static + 3
    assert counters["ruleset2_installed"] == 1 and counters["ruleset2_max"] == 2
    assert counters["ruleset2_capacity"] == 100
    assert counters["rule_adds_queued"] == counters["rule_deletes_queued"] == counters["static_pending"] == 0
    assert counters["rule_updates_last_1s"] == static + 3 and counters["switch_connects"] == 1
    assert counters["flow_mods_refused"] == 0 and counters["switch_connected"] == 1


def _stat(cookie, prio, dst, port, **match):
    return parser.OFPFlowStats(table_id=0, duration_sec=1, duration_nsec=0, priority=prio, idle_timeout=0,
                               hard_timeout=0, flags=0, cookie=cookie, packet_count=3, byte_count=300,
                               match=parser.OFPMatch(eth_dst=dst, **match),
                               instructions=[parser.OFPInstructionActions(
                                   ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(port)])])


def test_list_flows_multipart(app):
    dp = connect(app, answer_stats=False)  # answered by hand below
    parts = [(ofp.OFPMPF_REPLY_MORE, [_stat(make_cookie(3, 1), 100, ("aa:01:00:00:00:00", "ef:ff:00:00:00:00"), 21)]),
             (0, [_stat(make_cookie(2, H(5)), 200, ("aa:00:00:00:00:00", "ff:00:00:00:00:00"), 12,
                        eth_type=0x0800, ipv4_dst="0.0.0.5"),
                  _stat(0x42, 5, "02:00:00:00:00:09", 1)])]

    def reply():
        req = dp.sent[-1]
        assert isinstance(req, parser.OFPFlowStatsRequest)
        for flags, body in parts:
            app._flow_stats_reply(SimpleNamespace(msg=SimpleNamespace(xid=req.xid, flags=flags, body=body)))

    threading.Timer(0.05, reply).start()
    flows = app.list_flows(0)
    assert [(f.ruleset, f.priority, f.out_port) for f in flows] == [(2, 200, 12), (3, 100, 21), (0, 5, 1)]
    assert flows[1].eth_dst_mask == "ef:ff:00:00:00:00" and flows[2].eth_dst_mask == ""
    assert (flows[0].eth_dst, flows[0].eth_dst_mask) == ("aa:00:00:00:00:00", "ff:00:00:00:00:00")
    assert (flows[0].eth_type, flows[0].ipv4_dst) == (0x0800, "0.0.0.5") and flows[1].ipv4_dst == ""
    assert flows[0].packet_count == 3


def test_list_flows_filters_by_cookie_and_times_out(app):
    dp = connect(app, answer_stats=False)
    with pytest.raises(SwitchTimeout):
        app.list_flows(2)
    req = dp.sent[-1]
    assert req.cookie == 0xE2 << 56 and req.cookie_mask == 0xFF << 56
    # ruleset 4 (table 0's ingress checks) is valid; 5 is not
    with pytest.raises(ValueError):
        app.list_flows(5)


def test_ingress_counters_in_stats(cluster_dict):
    """Table 0's drop counts and the meter's drops, read from the switch (ingress.counters), show
    in Stats: by the poller (ingress_poll_s), or at once with ingress_counters()."""
    from exo_controller.ingress import ingress_cookie
    cluster_dict["switch"].update(rule_update_rate=100_000.0)
    app = ExoControllerApp(exo_config=parse_config(cluster_dict), barrier_timeout=0.3, ingress_poll_s=0.05)
    try:
        dp = connect(app)
        dp.table.packets.update({ingress_cookie("client_source", 31): 5, ingress_cookie("unknown_port"): 2,
                                 ingress_cookie("client_ip", 31): 900})
        dp.table.meter_drops[1] = 40
        wait_for(lambda: app.stats().get("ingress_meter_dropped") == 40)
        s = app.stats()
        assert (s["ingress_client_source_dropped"], s["ingress_client_source_dropped client1"]) == (5, 5)
        assert (s["ingress_unknown_port_dropped"], s["ingress_client_forwarded_dropped"]) == (2, 0)
        req = [m for m in dp.stats_requests() if m.cookie]
        assert req and all((m.cookie, m.cookie_mask) == (0xE4 << 56, 0xFF << 56) for m in req)
        dp.table.packets[ingress_cookie("client_forwarded", 31)] = 3
        assert app.ingress_counters()["ingress_client_forwarded_dropped client1"] == 3
        assert [f.ruleset for f in app.list_flows(4)] == [4] * 15
    finally:
        app.stop()


def test_a_switch_whose_meters_differ_is_reprogrammed(cluster_dict):
    """A controller restarted with another switch.client_meter_pps finds the old meter: flush,
    delete every meter, add the new one."""
    first = make_app(cluster_dict)
    dp = connect(first)
    table = dp.table
    first.stop()
    cluster_dict["switch"]["client_meter_pps"] = 2000
    second = make_app(cluster_dict)
    try:
        dp2 = connect(second, table=table)
        assert second.stats()["switch_tables_flushed"] == 1
        assert [(m.meter_id, m.bands[0].rate, m.bands[0].burst_size) for m in table.meters.values()] == [(1, 2000, 200)]
        assert dp2.table is table and len(table.flows) == 15 + 263
    finally:
        second.stop()
