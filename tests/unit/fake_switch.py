"""A fake OpenFlow 1.3 datapath for the app tests: records what the controller sends, applies
flow-mods and meter-mods to a fake flow table and meter table, and answers barriers, flow-stats
and meter-config/meter-stats requests from other threads, like os-ken's event loop would. The table can outlive a datapath (`table=`), which models the
same switch reconnecting, or a restarted controller meeting a switch that kept its flows."""
import threading
import time
from types import SimpleNamespace

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser


def H(i):
    """Key hash number i, as the tests mean it: a 40-bit hash whose top 32 bits (the request's
    IPv4 destination, what Ruleset 2 matches) are i and whose low IP_SHIFT bits are 0, so it is
    its own flows.rule_hash and distinct i are distinct Ruleset 2 rules."""
    from exo_controller.flows import IP_SHIFT
    return i << IP_SHIFT


def out_port_of(msg):
    for inst in msg.instructions:
        for action in getattr(inst, "actions", []) or []:
            if isinstance(action, parser.OFPActionOutput):
                return action.port
    return None


class FakeOFTable:
    """Every table of the switch, reduced to what the controller does: ADD (same match + priority
    replaces), DELETE_STRICT, and non-strict DELETE by cookie/cookie_mask and out_port with an
    empty match. Flows are kept as the OFPFlowMod that made them (plus a table id). Meters:
    ADD (an existing id is an error on a real switch: asserted), DELETE of one or all."""

    def __init__(self):
        self.flows = {}  # (table_id, priority, match items) -> OFPFlowMod
        self.meters = {}  # meter id -> OFPMeterMod
        self.packets = {}  # cookie -> the packet count its flow reports (0 if not set)
        self.meter_drops = {}  # meter id -> frames its band reports dropped (0 if not set)

    @staticmethod
    def _key(msg, table_id=0):
        return (table_id, msg.priority, tuple(sorted(msg.match.items(), key=lambda kv: kv[0])))

    def apply(self, msg):
        if msg.command == ofp.OFPFC_ADD:
            assert msg.table_id in (0, 1)
            self.flows[self._key(msg, msg.table_id)] = msg
        elif msg.command == ofp.OFPFC_DELETE_STRICT:
            self.flows.pop(self._key(msg, msg.table_id), None)
        elif msg.command == ofp.OFPFC_DELETE:
            assert not list(msg.match.items()), "the controller's non-strict deletes match everything"
            for key, f in list(self.flows.items()):
                if msg.table_id not in (ofp.OFPTT_ALL, key[0]):
                    continue
                if f.cookie & msg.cookie_mask != msg.cookie & msg.cookie_mask:
                    continue
                if msg.out_port != ofp.OFPP_ANY and out_port_of(f) != msg.out_port:
                    continue
                del self.flows[key]
        else:
            raise AssertionError(f"unexpected flow-mod command {msg.command}")

    def apply_meter(self, msg):
        if msg.command == ofp.OFPMC_ADD:
            assert msg.meter_id not in self.meters, f"meter {msg.meter_id} exists"
            self.meters[msg.meter_id] = msg
        elif msg.command == ofp.OFPMC_DELETE:
            if msg.meter_id == ofp.OFPM_ALL:
                self.meters.clear()
            else:
                self.meters.pop(msg.meter_id, None)
        else:
            raise AssertionError(f"unexpected meter-mod command {msg.command}")

    def meter_configs(self):
        return [parser.OFPMeterConfigStats(flags=m.flags, meter_id=m.meter_id, bands=m.bands)
                for m in self.meters.values()]

    def meter_stats(self):
        return [parser.OFPMeterStats(meter_id=i, flow_count=0, packet_in_count=0, byte_in_count=0, duration_sec=1,
                                     duration_nsec=0,
                                     band_stats=[parser.OFPMeterBandStats(self.meter_drops.get(i, 0), 0)])
                for i in self.meters]

    def add_foreign(self, table_id=0, **match):
        """A flow someone else installed (cookie 0x42, output:1)."""
        m = parser.OFPFlowMod(datapath=None, cookie=0x42, table_id=table_id, command=ofp.OFPFC_ADD, priority=5,
                              match=parser.OFPMatch(**match), instructions=[parser.OFPInstructionActions(
                                  ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(1)])])
        self.flows[self._key(m, table_id)] = m

    def stats(self, cookie=0, cookie_mask=0):
        out = []
        for (table_id, _, _), f in self.flows.items():
            if f.cookie & cookie_mask != cookie & cookie_mask:
                continue
            out.append(parser.OFPFlowStats(
                table_id=table_id, duration_sec=1, duration_nsec=0, priority=f.priority, idle_timeout=0,
                hard_timeout=0, flags=0, cookie=f.cookie, packet_count=self.packets.get(f.cookie, 0),
                byte_count=0, match=f.match,
                instructions=f.instructions))
        return out

    def ruleset2(self):
        """rule hash (flows.rule_hash: the 40-bit hash less its low IP_SHIFT bits) -> out port of the
        Ruleset 2 flows, read back from the match as the switch holds it (the hash's top 32 bits
        are the flow's ipv4_dst). Every Ruleset 2 flow must have the Ruleset 2 match: IPv4, the
        GET prefix byte under its mask, priority 200."""
        from exo_controller.flows import (ETH_TYPE_IPV4, GET_PREFIX_MASK, HASH_BITS, IP_SHIFT, PREFIX_GET,
                                          PRIORITY, RULESET_CACHE, int_to_mac, ip_to_int, ruleset_of_cookie)
        out = {}
        for f in self.flows.values():
            if ruleset_of_cookie(f.cookie) != RULESET_CACHE:
                continue
            assert f.priority == PRIORITY[RULESET_CACHE] and f.match["eth_type"] == ETH_TYPE_IPV4
            assert f.match["eth_dst"] == (int_to_mac(PREFIX_GET << HASH_BITS), int_to_mac(GET_PREFIX_MASK))
            out[ip_to_int(f.match["ipv4_dst"]) << IP_SHIFT] = out_port_of(f)
        return out

    def count(self, ruleset):
        from exo_controller.flows import ruleset_of_cookie
        return sum(1 for f in self.flows.values() if ruleset_of_cookie(f.cookie) == ruleset)


class FakeDatapath:
    """Records messages (and when they were sent); applies flow-mods to `table`; answers
    barriers (after optional errors) and flow-stats requests (in two multipart parts) from
    another thread."""
    ofproto = ofp
    ofproto_parser = parser

    def __init__(self, app, dpid=1, answer_barriers=True, fail=lambda msg: False, barrier_delay=0.01,
                 table=None, answer_stats=True):
        self.app, self.id, self.address = app, dpid, ("127.0.0.1", 1)
        self.answer_barriers, self.fail, self.barrier_delay = answer_barriers, fail, barrier_delay
        self.answer_stats = answer_stats
        self.table = FakeOFTable() if table is None else table
        self.sent, self.times, self.xid = [], [], 100
        self.unanswered = []

    def set_xid(self, msg):
        self.xid += 1
        msg.set_xid(self.xid)
        return self.xid

    def send_msg(self, msg):
        self.sent.append(msg)
        self.times.append(time.monotonic())
        if isinstance(msg, parser.OFPFlowMod):
            if self.fail(msg):
                err = SimpleNamespace(xid=msg.xid, type=ofp.OFPET_FLOW_MOD_FAILED, code=ofp.OFPFMFC_TABLE_FULL)
                self.app._error(SimpleNamespace(msg=err))
            else:
                self.table.apply(msg)
        if isinstance(msg, parser.OFPMeterMod):
            self.table.apply_meter(msg)
        if isinstance(msg, parser.OFPBarrierRequest):
            if self.answer_barriers:
                self.answer(msg, self.barrier_delay)
            else:
                self.unanswered.append(msg)
        multipart = {parser.OFPFlowStatsRequest: lambda: self.table.stats(msg.cookie, msg.cookie_mask),
                     parser.OFPMeterConfigStatsRequest: self.table.meter_configs,
                     parser.OFPMeterStatsRequest: self.table.meter_stats}.get(type(msg))
        if multipart is not None and self.answer_stats:
            body = multipart()
            half = len(body) // 2
            parts = [(ofp.OFPMPF_REPLY_MORE, body[:half]), (0, body[half:])]

            def reply():
                for flags, part in parts:
                    self.app._flow_stats_reply(SimpleNamespace(msg=SimpleNamespace(xid=msg.xid, flags=flags,
                                                                                  body=part)))
            threading.Timer(0.005, reply).start()
        return True

    def answer(self, barrier, delay=0.0):
        reply = SimpleNamespace(msg=SimpleNamespace(xid=barrier.xid))
        threading.Timer(delay, self.app._barrier_reply, args=(reply,)).start()

    def mods(self, command=None):
        return [m for m in self.sent if isinstance(m, parser.OFPFlowMod)
                and (command is None or m.command == command)]

    def stats_requests(self):
        return [m for m in self.sent if isinstance(m, parser.OFPFlowStatsRequest)]


def wait_for(pred, timeout=3.0):
    """Polls until `pred()` holds (the app reacts to a fake switch event on its own threads);
    fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)
