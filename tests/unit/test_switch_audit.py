"""The switch-side audit's parsers and verdict (exo_topo.switch_audit), on text as Open vSwitch
3.1 prints it: the snoop and flow-monitor lines below are copied from a run of
tests/integration/test_rule_limit_audit.py; the DEL_STRICT, withdrawal, flush and error lines are
`ovs-ofctl ofp-print` of the messages the controller sends (ofp_translate.to_ofp), with the
timestamp prefix `ovs-ofctl --timestamp snoop` adds. The Mininet test runs the real thing."""
from exo_controller.rule_journal import Ruleset2Journal, parse_journal, read_journal
from exo_topo.switch_audit import (MonitorRecord, SnoopRecord, audit_problems, compute, parse_monitor,
                                   parse_snoop, parse_ts)

SNOOP = """\
2026-11-23 21:07:11.407: OFPST_FLOW request (OF1.3) (xid=0xfc58e93e):
2026-11-23 21:07:11.407: OFPST_FLOW reply (OF1.3) (xid=0xfc58e93e):
 cookie=0xe20000ae73eada00, duration=6.031s, table=0, n_packets=0, n_bytes=0, priority=200,dl_dst=aa:ae:73:ea:da:00 actions=output:1
2026-11-23 21:07:11.471: OFPT_FLOW_MOD (OF1.3) (xid=0xfc58e93f): ADD priority=200,dl_dst=aa:ae:73:ea:da:00 cookie:0xe20000ae73eada00 actions=output:1
2026-11-23 21:07:11.471: OFPT_FLOW_MOD (OF1.3) (xid=0xfc58e940): ADD priority=200,dl_dst=aa:e1:b5:be:6e:01 cookie:0xe20000e1b5be6e01 actions=output:1
2026-11-23 21:07:11.471: OFPT_BARRIER_REQUEST (OF1.3) (xid=0xfc58e944):
2026-11-23 21:07:11.471: OFPT_BARRIER_REPLY (OF1.3) (xid=0xfc58e944):
2026-11-23 21:07:11.490: OFPT_FLOW_MOD (OF1.3) (xid=0x100): DEL_STRICT priority=200,dl_dst=aa:12:34:56:78:9a actions=drop
2026-11-23 21:07:11.510: OFPT_FLOW_MOD (OF1.3) (xid=0x101): DEL priority=200 cookie:0xe200000000000000/0xff00000000000000 out_port:2 actions=drop
2026-11-23 21:07:11.530: OFPT_FLOW_MOD (OF1.3) (xid=0x102): DEL table:255 priority=0 actions=drop
2026-11-23 21:07:11.530: OFPT_FLOW_MOD (OF1.3) (xid=0x104): ADD priority=100,dl_dst=aa:00:00:00:00:00/ef:ff:00:00:00:00 cookie:0xe300000000000000 actions=output:3
2026-11-23 21:07:11.550: OFPT_FLOW_MOD (OF1.3) (xid=0x103): ADD priority=200,dl_dst=aa:12:34:56:78:9a cookie:0xe20000123456789a actions=output:1
2026-11-23 21:07:11.551: OFPT_ERROR (OF1.3) (xid=0x103): OFPFMFC_TABLE_FULL
OFPT_FLOW_MOD (OF1.3) (xid=0x103):
(***truncated to 64 bytes from 88***)
00000000  04 0e 00 58 00 00 01 03-e2 00 00 12 34 56 78 9a |...X........4Vx.|
2026-11-23 21:07:17.502: OFPST_FLOW request (OF1.3) (xid=0xfc58eb7f):
2026-11-23 21:07:17.502: OFPST_FLOW reply (OF1.3) (xid=0xfc58eb7f):
2026-11-23T21:07:17Z|00001|fatal_signal|WARN|terminating with signal 15 (Terminated)
"""

MONITOR = """\
ONFST_FLOW_MONITOR reply (OF1.3) (xid=0x6):
 event=ADDED table=0 cookie=0xe100000000000000 dl_dst=02:00:00:00:01:01 actions=output:1
 event=ADDED table=0 cookie=0xe300000000000000 dl_dst=aa:00:00:00:00:00/ef:ff:00:00:00:00 actions=output:3
 event=ADDED table=0 cookie=0xe20000d61eb649f6 dl_dst=aa:d6:1e:b6:49:f6 actions=output:2
2026-11-23 21:07:11.471: ONFST_FLOW_MONITOR reply (OF1.3) (xid=0x0):
 event=ADDED table=0 cookie=0xe200003a205e73ff dl_dst=aa:3a:20:5e:73:ff actions=output:2
2026-11-23 21:07:11.490: ONFST_FLOW_MONITOR reply (OF1.3) (xid=0x0):
 event=ADDED table=0 cookie=0xe20000ae73eada00 dl_dst=aa:ae:73:ea:da:00 actions=output:1
 event=DELETED reason=delete table=0 cookie=0xe20000d61eb649f6 dl_dst=aa:d6:1e:b6:49:f6 actions=output:2
2026-11-23 21:07:11.530: ONFST_FLOW_MONITOR reply (OF1.3) (xid=0x0):
 event=DELETED reason=delete table=0 cookie=0xe100000000000000 dl_dst=02:00:00:00:01:01 actions=output:1
2026-11-23T21:07:17Z|00001|fatal_signal|WARN|terminating with signal 15 (Terminated)
"""

T = parse_ts("2026-11-23 21:07:11.471")


def test_parse_ts_is_utc_ms():
    assert parse_ts("1970-01-01 00:00:01.250") == 1.25
    assert round(parse_ts("2026-11-23 21:07:11.490") - T, 3) == 0.019


def test_snoop_keeps_ruleset2_flow_mods_and_errors():
    rec = parse_snoop(SNOOP.splitlines())
    # adds, the DEL_STRICT (printed without its cookie) and the withdrawal; not the flush nor Ruleset 3
    assert [(x, c) for _, x, c in rec.flow_mods] == [
        (0xfc58e93f, "ADD"), (0xfc58e940, "ADD"), (0x100, "DEL_STRICT"), (0x101, "DEL"), (0x103, "ADD")]
    assert rec.flow_mods[0][0] == T
    assert rec.errors == {0x103: "OFPFMFC_TABLE_FULL"}
    assert rec.stats_replies == 2


def test_monitor_reconstructs_the_table_size():
    mon = parse_monitor(MONITOR.splitlines())
    assert mon.initial == 1 and not mon.paused
    # one level per Ruleset 2 event: a message that adds and deletes still shows its peak
    assert mon.levels == [(T, 2), (T + 0.019, 3), (T + 0.019, 2)]
    assert mon.events == {"ADDED": 2, "DELETED": 1}
    assert parse_monitor(["2026-11-23 21:07:11.530: NXT_FLOW_MONITOR_PAUSED (OF1.3) (xid=0x0):"]).paused


def _result(ctl_times, sw_times, sizes=(), levels=(), dumped=None, errors=None, t0=0.0, t1=100.0,
            confirmed=None):
    journal = parse_journal([])
    journal.mods = [(t, i, "add") for i, t in enumerate(ctl_times)]
    journal.sizes = list(sizes)
    journal.confirmed = dict(confirmed or {})
    snoop = SnoopRecord(flow_mods=[(t, i, "ADD") for i, t in enumerate(sw_times)], errors=errors or {})
    mon = MonitorRecord(initial=0, levels=list(levels), event_kinds=["ADDED"] * len(levels))
    final = levels[-1][1] if levels else 0
    return compute(journal, snoop, mon, final if dumped is None else dumped, t0, t1)


def test_verdict_accepts_a_run_within_limits_and_in_agreement():
    times = [10 + i / 50 for i in range(200)]  # 50/s for 4 s
    sizes = [(t, i + 1) for i, t in enumerate(times)]
    res = _result(times, [t + 0.001 for t in times], sizes, [(t + 0.001, n) for t, n in sizes])
    assert res["switch"]["rule_updates_per_s_max"] == 50 and res["switch"]["ruleset2_max"] == 200
    assert res["agreement"]["matched"] == 200 and res["agreement"]["delay_ms_max"] == 1.0
    assert audit_problems(res, 50, 256) == []


def test_verdict_rejects_what_a_broken_controller_or_record_does():
    burst = [10 + i / 1000 for i in range(300)]  # the limiter off: 300 in 0.3 s
    res = _result(burst, burst, levels=[(t, i + 1) for i, t in enumerate(burst)], sizes=[(burst[-1], 300)])
    assert any(p.startswith("switch received 300") for p in audit_problems(res, 50, 4096))
    assert any(p.startswith("switch held 300") for p in audit_problems(res, 50, 256))
    # the journal lacks one flow-mod the switch got, and vice versa
    res = _result([1.0, 2.0], [1.0, 2.0, 3.0])
    assert any(p.startswith("records disagree: 0 flow-mods sent but not received, 1 received")
               for p in audit_problems(res, 50, 256))
    # a refused add; a monitor count that does not match the final dump
    res = _result([1.0], [1.0], errors={0: "OFPFMFC_TABLE_FULL"})
    assert "switch refused 1 Ruleset 2 flow-mods" in audit_problems(res, 50, 256)
    res = _result([1.0], [1.0], sizes=[(1.0, 1)], levels=[(1.0, 1)], dumped=2)
    assert any(p.startswith("switch flow monitor record incomplete") for p in audit_problems(res, 50, 256))


def test_a_lagging_reader_clock_is_bounded_by_the_barrier_reply():
    """50/s sent evenly, each confirmed 1 ms later; ovs-ofctl stamped one second's worth 50 ms
    late, which bunches them with the next second's. The switch processed each one before its
    barrier reply, so that is the latest it can have had it."""
    sent = [10 + i / 50 for i in range(200)]
    snoop = [t + (0.05 if 11.0 <= t < 12.0 else 0.001) for t in sent]
    confirmed = {i: t + 0.001 for i, t in enumerate(sent)}
    raw = _result(sent, snoop)
    assert raw["switch"]["rule_updates_per_s_max"] > 50  # what the raw reader clock says
    res = _result(sent, snoop, confirmed=confirmed)
    assert res["switch"]["rule_updates_per_s_max"] == 50
    assert res["switch"]["rule_updates_per_s_max_snoop_clock"] > 50
    assert res["switch"]["snoop_clock_late"] == 50 and res["switch"]["snoop_clock_late_ms_max"] == 49.0
    assert audit_problems(res, 50, 256) == []


def test_the_barrier_bound_still_catches_a_controller_without_a_rate_limit():
    burst = [10 + i / 1000 for i in range(300)]
    res = _result(burst, [t + 0.2 for t in burst], confirmed={i: burst[-1] + 0.01 for i in range(300)})
    assert any(p.startswith("switch received 300") for p in audit_problems(res, 50, 4096))


def test_journal_round_trip(tmp_path):
    from exo_controller.flows import ADD, DELETE_STRICT, cache_flowmod, withdraw_flowmod
    now = iter([100.0, 100.5, 100.6, 100.7, 100.8, 100.9, 101.0])
    j = Ruleset2Journal(tmp_path / "j.jsonl", clock=lambda: next(now))
    j.start(50.0, 256, None)
    j.sent(cache_flowmod(0x12345, 3, ADD), "add", 7)
    j.size(1)
    j.size(1)  # unchanged: not written
    j.sent(cache_flowmod(0x12345, None, DELETE_STRICT), "delete", 8)
    j.sent(withdraw_flowmod(3), "withdraw", 9)
    j.abandoned()  # that barrier timed out: no bound for 8 and 9
    j.sent(cache_flowmod(0x6789, 3, ADD), "add", 11)
    j.confirmed()
    j.close()
    with open(tmp_path / "j.jsonl", "a") as f:
        f.write('{"t": 1, "xid"')  # a torn last line (controller killed mid-write)
    rec = read_journal(tmp_path / "j.jsonl")
    assert rec.mods == [(100.5, 7, "add"), (100.7, 8, "delete"), (100.8, 9, "withdraw"), (100.9, 11, "add")]
    assert rec.confirmed == {11: 101.0}
    assert rec.sizes == [(100.6, 1)] and rec.bad_lines == 1
    assert rec.starts[0][1]["rule_update_rate"] == 50.0 and rec.starts[0][1]["fault"] is None
    j.sent(cache_flowmod(1, 3, ADD), "add", 10)  # closed: ignored, no error
