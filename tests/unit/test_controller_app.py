"""ExoControllerApp against a fake datapath (no switch, no os-ken event loop): programming on
connect, barrier-confirmed updates, switch errors, timeouts, flow-stats readback."""
import threading
from types import SimpleNamespace

import pytest
from os_ken.controller.handler import DEAD_DISPATCHER
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from exo_controller.app import ExoControllerApp, SwitchNotConnected, SwitchTimeout
from exo_controller.flows import CacheRule, make_cookie


class FakeDatapath:
    """Records messages; answers barriers (after optional errors) from another thread."""
    ofproto = ofp
    ofproto_parser = parser

    def __init__(self, app, dpid=1, answer_barriers=True, fail=lambda msg: False):
        self.app, self.id, self.address = app, dpid, ("127.0.0.1", 1)
        self.answer_barriers, self.fail = answer_barriers, fail
        self.sent, self.xid = [], 100

    def set_xid(self, msg):
        self.xid += 1
        msg.set_xid(self.xid)
        return self.xid

    def send_msg(self, msg):
        self.sent.append(msg)
        if isinstance(msg, parser.OFPFlowMod) and self.fail(msg):
            err = SimpleNamespace(xid=msg.xid, type=ofp.OFPET_FLOW_MOD_FAILED, code=ofp.OFPFMFC_TABLE_FULL)
            self.app._error(SimpleNamespace(msg=err))
        if isinstance(msg, parser.OFPBarrierRequest) and self.answer_barriers:
            reply = SimpleNamespace(msg=SimpleNamespace(xid=msg.xid))
            threading.Timer(0.01, self.app._barrier_reply, args=(reply,)).start()
        return True

    def mods(self, command=None):
        return [m for m in self.sent if isinstance(m, parser.OFPFlowMod)
                and (command is None or m.command == command)]


@pytest.fixture
def app(cfg):
    return ExoControllerApp(exo_config=cfg, barrier_timeout=0.3)


def connect(app, **kw):
    dp = FakeDatapath(app, **kw)
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert app.connected.wait(2)
    dp.sent.clear()
    return dp


def test_not_connected(app):
    with pytest.raises(SwitchNotConnected, match="not connected"):
        app.add_cache_rules([CacheRule(1, "cache1")])
    assert len(app.book) == 0
    with pytest.raises(SwitchNotConnected):
        app.list_flows(2)


def test_programming_on_connect(app, cfg):
    dp = FakeDatapath(app)
    app.book.add([CacheRule(5, "cache2")])  # survives reconnects
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert app.connected.wait(2)
    mods = dp.mods()
    assert mods[0].command == ofp.OFPFC_DELETE and mods[0].cookie_mask == 0
    adds = dp.mods(ofp.OFPFC_ADD)
    nodes = len(cfg.cache_nodes) + len(cfg.db_nodes) + len(cfg.clients)
    assert len(adds) == nodes + 1 + 2 ** cfg.switch.partition_bits + 1
    assert isinstance(dp.sent[-1], parser.OFPBarrierRequest)
    r2 = [m for m in adds if m.cookie == make_cookie(2, 5)]
    assert r2 and r2[0].match["eth_dst"] == "aa:00:00:00:00:05"
    assert r2[0].instructions[0].actions[0].port == 12
    r3 = [m for m in adds if m.priority == 100]
    assert r3[0].match["eth_dst"][1] == "ef:ff:00:00:00:00"


def test_other_dpid_ignored(app):
    dp = FakeDatapath(app, dpid=99)
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert dp.sent == [] and not app.is_connected()


def test_add_remove_wait_for_barrier(app):
    dp = connect(app)
    out = app.add_cache_rules([CacheRule(0x1234, "cache1"), CacheRule(7, "nope")])
    assert (out.accepted, out.rejected) == (1, 1) and "nope" in out.error
    (mod,) = dp.mods()
    assert mod.command == ofp.OFPFC_ADD and mod.priority == 200
    assert isinstance(dp.sent[-1], parser.OFPBarrierRequest)
    out = app.remove_cache_rules([CacheRule(0x1234, "cache1")])
    assert (out.accepted, out.rejected) == (1, 0)
    assert dp.mods()[-1].command == ofp.OFPFC_DELETE_STRICT
    assert len(app.book) == 0 and not app._waiters and not app._mod_xids


def test_barrier_timeout_rolls_back(app):
    dp = connect(app)
    dp.answer_barriers = False
    out = app.add_cache_rules([CacheRule(9, "cache1")])
    assert (out.accepted, out.rejected) == (0, 1) and "no barrier reply" in out.error
    assert len(app.book) == 0  # a retry will not double the refcount
    assert dp.mods()[-1].command == ofp.OFPFC_DELETE_STRICT  # undo sent


def test_table_full_error_rejects_that_rule(app):
    full = make_cookie(2, 0xBAD)
    dp = connect(app, fail=lambda m: m.cookie == full and m.command == ofp.OFPFC_ADD)
    out = app.add_cache_rules([CacheRule(0xBAD, "cache1"), CacheRule(0x600D, "cache2")])
    assert (out.accepted, out.rejected) == (1, 1)
    assert "TABLE_FULL" in out.error
    assert app.book.owner(0xBAD) is None and app.book.owner(0x600D) == "cache2"
    assert app.counters["ofp_errors"] == 1


def test_disconnect_fails_waiters(app):
    dp = connect(app)
    dp.answer_barriers = False
    app.barrier_timeout = 5
    t = threading.Timer(0.1, app._state_change, args=(SimpleNamespace(state=DEAD_DISPATCHER, datapath=dp),))
    t.start()
    out = app.add_cache_rules([CacheRule(9, "cache1")])
    assert out.rejected == 1 and "disconnected" in out.error
    assert not app.is_connected() and len(app.book) == 0


def _stat(cookie, prio, dst, port):
    return parser.OFPFlowStats(table_id=0, duration_sec=1, duration_nsec=0, priority=prio, idle_timeout=0,
                               hard_timeout=0, flags=0, cookie=cookie, packet_count=3, byte_count=300,
                               match=parser.OFPMatch(eth_dst=dst),
                               instructions=[parser.OFPInstructionActions(
                                   ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(port)])])


def test_list_flows_multipart(app):
    dp = connect(app)
    parts = [(ofp.OFPMPF_REPLY_MORE, [_stat(make_cookie(3, 1), 100, ("aa:01:00:00:00:00", "ef:ff:00:00:00:00"), 21)]),
             (0, [_stat(make_cookie(2, 5), 200, "aa:00:00:00:00:05", 12), _stat(0x42, 5, "02:00:00:00:00:09", 1)])]

    def reply():
        req = dp.sent[-1]
        assert isinstance(req, parser.OFPFlowStatsRequest)
        for flags, body in parts:
            app._flow_stats_reply(SimpleNamespace(msg=SimpleNamespace(xid=req.xid, flags=flags, body=body)))

    threading.Timer(0.05, reply).start()
    flows = app.list_flows(0)
    assert [(f.ruleset, f.priority, f.out_port) for f in flows] == [(2, 200, 12), (3, 100, 21), (0, 5, 1)]
    assert flows[1].eth_dst_mask == "ef:ff:00:00:00:00" and flows[0].eth_dst_mask == ""
    assert flows[0].packet_count == 3


def test_list_flows_filters_by_cookie_and_times_out(app):
    dp = connect(app)
    with pytest.raises(SwitchTimeout):
        app.list_flows(2)
    req = dp.sent[-1]
    assert req.cookie == 0xE2 << 56 and req.cookie_mask == 0xFF << 56
    with pytest.raises(ValueError):
        app.list_flows(4)
