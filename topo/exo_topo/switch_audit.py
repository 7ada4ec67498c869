"""What the switch itself saw of Ruleset 2 during a run, beside what the controller says it sent.

    with RuleAudit(cl) as audit:      # t0: recording on both sides
        ... the measured workload ...
    audit.result                      # t1 was the exit; see RuleAudit.result
    audit_problems(audit.result, R, C)  # [] when both records agree and the switch saw <= R, <= C

The controller's Stats are lifetime figures (the start-up programming of Rulesets 1 and 3
included) and its own bookkeeping. This reads the run's figures from two independent records:
- the controller's journal (exo_controller/rule_journal.py): every Ruleset 2 flow-mod it sent,
  with its OpenFlow xid, and the Ruleset 2 size it believes the switch may hold;
- Open vSwitch's side, from ovs-vswitchd itself:
  * `ovs-ofctl snoop BRIDGE`: ovs-vswitchd copies every message of its controller connection
    to the bridge's snoop socket as it takes it off the connection, so this lists every flow-mod
    the switch received (with xid) and every error it answered;
  * `ovs-ofctl monitor BRIDGE watch:`: the flow monitor reports every change of the flow table
    as it is applied, after an initial dump of the table, so the Ruleset 2 size over time is the
    initial count plus ADDED minus DELETED events. At the end it is checked against
    `ovs-ofctl dump-aggregate` (a paused or lossy monitor would not add up).
  Timestamps are ovs-ofctl's (--timestamp: wall clock, ms) as the messages arrive over the local
  unix socket. On a loaded machine that reader lags: in Figure 4.4 at 3x, flow-mods were
  stamped up to ~50 ms after the controller had received the barrier reply that follows them,
  which the switch sends only after processing them. So a flow-mod's switch time is its ovs-ofctl
  time, but no later than that barrier reply as the controller's journal records it
  (rule_window.bounded_by_barrier); the raw figure and the lag are reported beside it. Why not ovs-vswitchd's own log with vconn at debug level: vconn's message log is
  rate-limited to 600 messages a minute, so it silently drops messages at R = 50/s.

Both records use wall-clock time (time.time()), so one window [t0, t1] applies to both, and the
flow-mods are matched one to one by xid (rule_window.match_xids).
"""
from __future__ import annotations

import calendar
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from exo_controller.flows import PRIORITY, RULESET_CACHE, cookie_filter
from exo_controller.rule_journal import read_journal

from . import rule_window

RULESET2_TAG = (0xE0 | RULESET_CACHE)  # top byte of every Ruleset 2 cookie (flows.make_cookie)
_TS = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}): "
_MSG = re.compile(_TS + r"(\S+)(?: \S+)? \(OF1\.\d\) \(xid=0x([0-9a-f]+)\):\s*(.*)$")
_MON_HEADER = re.compile(r"^(?:" + _TS + r")?(?:ONF|NX)ST_FLOW_MONITOR reply \(OF1\.\d\) \(xid=0x([0-9a-f]+)\)")
_MON_EVENT = re.compile(r"^\s+event=(\w+)\b.*?\bcookie=0x([0-9a-f]+)")
_PRIORITY = re.compile(r"\bpriority=(\d+)")
_FLOW_COUNT = re.compile(r"flow_count=(\d+)")


class AuditError(RuntimeError):
    """The switch-side record could not be taken (ovs-ofctl failed, no controller connection)."""


def parse_ts(text: str) -> float:
    """ovs-ofctl --timestamp time (UTC, ms) -> seconds since the epoch."""
    date, clock = text.split(" ")
    whole, ms = clock.split(".")
    tm = time.strptime(f"{date} {whole}", "%Y-%m-%d %H:%M:%S")
    return calendar.timegm(tm) + int(ms) / 1000


def is_ruleset2_cookie(cookie: int) -> bool:
    return (cookie >> 56) & 0xFF == RULESET2_TAG


@dataclass
class SnoopRecord:
    """Ruleset 2 flow-mods the switch received, as (t, xid, command), and the xids it answered
    with an error (with the error's name)."""
    flow_mods: list[tuple[float, int, str]] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)
    stats_replies: int = 0


def parse_snoop(lines: Iterable[str]) -> SnoopRecord:
    out = SnoopRecord()
    for line in lines:
        m = _MSG.match(line)
        if not m:
            continue  # a continuation line (flow-stats bodies, the request inside an error)
        ts, kind, xid, rest = m.group(1), m.group(2), int(m.group(3), 16), m.group(4)
        if kind == "OFPT_FLOW_MOD":
            # By priority: ovs-ofctl prints no cookie for a DEL_STRICT (its cookie mask is 0).
            p = _PRIORITY.search(rest)
            if p and int(p.group(1)) == PRIORITY[RULESET_CACHE]:
                out.flow_mods.append((parse_ts(ts), xid, rest.split(" ", 1)[0]))
        elif kind == "OFPT_ERROR":
            out.errors[xid] = rest.split(" ", 1)[0] if rest else "error"
        elif kind == "OFPST_FLOW" and "reply" in line.split("(OF1")[0]:
            out.stats_replies += 1
    return out


@dataclass
class MonitorRecord:
    """Ruleset 2 in the switch's flow table: the count in the monitor's initial dump, then
    (t, size) after every change event; events counted by kind; paused: the monitor fell
    behind at some point (its count is then not to be trusted)."""
    initial: Optional[int] = None
    levels: list[tuple[float, int]] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)
    event_kinds: list[str] = field(default_factory=list)  # parallel to levels
    paused: bool = False


def parse_monitor(lines: Iterable[str]) -> MonitorRecord:
    """The first reply with a non-zero xid is the initial dump (the answer to ovs-ofctl's request);
    updates come unsolicited with xid 0, one or more events each. The size is recorded after
    every event, so a message that adds and deletes still shows its peak."""
    out = MonitorRecord()
    level, mode, block_t, initial_xid = 0, None, None, None
    for line in lines:
        if "FLOW_MONITOR_PAUSED" in line:
            out.paused = True
            continue
        h = _MON_HEADER.match(line)
        if h:
            ts, xid = h.group(1), int(h.group(2), 16)
            if xid != 0 and mode in (None, "initial") and initial_xid in (None, xid):
                initial_xid, mode = xid, "initial"
                out.initial = out.initial or 0
            else:
                mode = "update"
                block_t = parse_ts(ts) if ts else block_t
            continue
        e = _MON_EVENT.match(line)
        if not e or not is_ruleset2_cookie(int(e.group(2), 16)):
            continue
        event = e.group(1)
        if mode == "initial":
            out.initial += 1
            level = out.initial
        elif mode == "update" and block_t is not None:
            out.events[event] = out.events.get(event, 0) + 1
            level += {"ADDED": 1, "DELETED": -1}.get(event, 0)
            out.levels.append((block_t, level))
            out.event_kinds.append(event)
    return out


def ruleset2_count(bridge: str) -> int:
    """Ruleset 2 flows in the switch's table now (OFPST_AGGREGATE by cookie)."""
    cookie, mask = cookie_filter(RULESET_CACHE)
    res = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-aggregate", bridge,
                          f"cookie={cookie:#x}/{mask:#x}"], capture_output=True, text=True, timeout=10)
    m = _FLOW_COUNT.search(res.stdout)
    if res.returncode != 0 or not m:
        raise AuditError(f"ovs-ofctl dump-aggregate {bridge}: {res.stderr.strip() or res.stdout.strip()}")
    return int(m.group(1))


def _ofctl(args: list[str], out: Path) -> subprocess.Popen:
    # stdbuf: ovs-ofctl's stdout is a file, and it is stopped with SIGTERM, which does not flush.
    f = open(out, "w")
    try:
        return subprocess.Popen(["stdbuf", "-oL", "ovs-ofctl", "-O", "OpenFlow13", "--timestamp", *args],
                                stdout=f, stderr=subprocess.STDOUT)
    finally:
        f.close()


def _wait(pred, timeout: float, what: str, poke=None, every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    next_poke = 0.0
    while not pred():
        now = time.monotonic()
        if now > deadline:
            raise AuditError(f"switch audit: timed out waiting for {what}")
        if poke is not None and now >= next_poke:
            poke()
            next_poke = now + every
        time.sleep(0.05)


class RuleAudit:
    """Records Ruleset 2 on both sides while the `with` block runs. `cl` is an EmulatedCluster
    (its bridge, its controller's journal, gRPC to the controller for sync points)."""

    def __init__(self, cl, name: str = "audit", out_dir: Optional[Path] = None):
        self.cl = cl
        self.bridge = cl.cfg.switch.bridge
        self.journal = Path(cl.ruleset2_journal)
        out_dir = Path(out_dir or cl.run_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        self.snoop_file = out_dir / f"{name}-snoop.txt"
        self.monitor_file = out_dir / f"{name}-monitor.txt"
        self._procs: list[subprocess.Popen] = []
        self.t0: Optional[float] = None
        self.t1: Optional[float] = None
        self.result: Optional[dict] = None

    def __enter__(self) -> "RuleAudit":
        try:
            self._procs = [_ofctl(["snoop", self.bridge], self.snoop_file),
                           _ofctl(["monitor", self.bridge, "watch:"], self.monitor_file)]
            _wait(lambda: parse_monitor(self._lines(self.monitor_file)).initial is not None, 10,
                  "the flow monitor's initial dump", poke=self._check_procs)
            self._sync_snoop()
        except BaseException:
            self._stop()
            raise
        self.t0 = time.time()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.t1 = time.time()
        try:
            if exc_type is None:
                self._sync_snoop()  # everything sent before t1 has reached the snoop by then
                self.result = self._settle_and_compute()
        finally:
            self._stop()

    # ---- internals ----
    @staticmethod
    def _lines(path: Path) -> list[str]:
        try:
            return path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def _check_procs(self) -> None:
        for p in self._procs:
            if p.poll() is not None:
                raise AuditError(f"ovs-ofctl {' '.join(p.args[6:])} exited with {p.returncode}: "
                                 f"{self._lines(self.snoop_file)[-3:]} {self._lines(self.monitor_file)[-3:]}")

    def _sync_snoop(self) -> None:
        """A flow-stats request through the controller's connection, answered after every message
        before it (one TCP stream, processed in order): once its reply is in the snoop file, so
        is everything the controller sent earlier."""
        def replies() -> int:  # a plain count: the file grows long in a run of minutes
            try:
                return self.snoop_file.read_text(errors="replace").count(": OFPST_FLOW reply (")
            except FileNotFoundError:
                return 0
        before = replies()

        def poke():
            self._check_procs()
            try:
                self.cl.stubs.rules(2, timeout=2.0)
            except Exception:  # noqa: BLE001 - retried until the timeout, then AuditError
                pass
        _wait(lambda: replies() > before, 10,
              "a flow-stats reply in the snoop record (is the controller connected?)", poke=poke, every=1.0)

    def _settle_and_compute(self) -> dict:
        """The monitor reports applied changes asynchronously: wait (up to 3 s) until its count
        matches a dump-aggregate of the table."""
        deadline = time.monotonic() + 3.0
        while True:
            dumped = ruleset2_count(self.bridge)
            mon = parse_monitor(self._lines(self.monitor_file))
            counted = mon.levels[-1][1] if mon.levels else mon.initial
            if counted == dumped or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        return compute(read_journal(self.journal), parse_snoop(self._lines(self.snoop_file)), mon,
                       dumped, self.t0, self.t1, {"snoop": str(self.snoop_file), "monitor": str(self.monitor_file),
                                                  "journal": str(self.journal)})

    def _stop(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.terminate()
        for p in self._procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self._procs = []


def compute(journal, snoop: SnoopRecord, mon: MonitorRecord, dumped_at_end: Optional[int],
            t0: float, t1: float, files: Optional[dict] = None) -> dict:
    """Both sides' figures over [t0, t1] (rule_window.figures) and their agreement."""
    ctl = rule_window.figures([t for t, _, _ in journal.mods], journal.sizes, t0, t1)
    ctl["by_op"] = _count(op for t, _, op in journal.mods if t0 <= t <= t1)
    snoop_times = [t for t, _, _ in snoop.flow_mods]
    bounded, lag = rule_window.bounded_by_barrier([(t, x) for t, x, _ in snoop.flow_mods],
                                                  journal.confirmed)
    sw = rule_window.figures(bounded, mon.levels, t0, t1, mon.initial or 0)
    # The raw ovs-ofctl clock's figure beside it, and how often and by how much it lagged.
    sw["rule_updates_per_s_max_snoop_clock"] = rule_window.busiest_window(
        rule_window.in_window(snoop_times, t0, t1), t0, t1)
    sw.update(lag)
    sw["by_command"] = _count(cmd for t, _, cmd in snoop.flow_mods if t0 <= t <= t1)
    sw["flow_mods_refused"] = sum(1 for t, xid, _ in snoop.flow_mods if t0 <= t <= t1 and xid in snoop.errors)
    sw["table_changes"] = _count(ev for (t, _), ev in zip(mon.levels, mon.event_kinds) if t0 <= t <= t1)
    final = mon.levels[-1][1] if mon.levels else mon.initial
    sw["ruleset2_dumped_at_end"] = dumped_at_end
    sw["record_complete"] = bool(mon.initial is not None and not mon.paused and final == dumped_at_end)
    agree = rule_window.match_xids([(t, x) for t, x, _ in journal.mods], [(t, x) for t, x, _ in snoop.flow_mods],
                                   t0, t1)
    return {"t0": round(t0, 3), "t1": round(t1, 3), "window_s": round(t1 - t0, 3),
            "controller": ctl, "switch": sw, "agreement": agree,
            "journal_bad_lines": journal.bad_lines, **({"files": files} if files else {})}


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for it in items:
        out[it] = out.get(it, 0) + 1
    return out


def summary(result: dict) -> dict:
    """The flat fields demo.json and the figures report: the controller's windowed figures under
    the existing names, the switch's with a switch_ prefix."""
    c, s = result["controller"], result["switch"]
    return {"rule_updates_per_s_max": c["rule_updates_per_s_max"], "ruleset2_max": c["ruleset2_max"],
            "switch_rule_updates_per_s_max": s["rule_updates_per_s_max"], "switch_ruleset2_max": s["ruleset2_max"],
            "ruleset2_flow_mods": c["flow_mods"], "switch_ruleset2_flow_mods": s["flow_mods"]}


def audit_problems(result: dict, rule_update_rate: float, cache_rule_capacity: int,
                   rate_tolerance: int = 2, size_tolerance: int = 2) -> list[str]:
    """What is wrong with a run's Ruleset 2, judged on the switch's record: more than R flow-mods
    received in some 1 s, more than C rules held, a refused flow-mod, or a switch record that does
    not match the controller's (a flow-mod one side has and the other has not, busiest seconds
    more than `rate_tolerance` apart, peak sizes more than `size_tolerance` apart, an incomplete
    monitor record). The tolerances cover the window's edges: a flow-mod the controller sent just
    before t1 reaches the switch just after it.
    Empty: the run is within the switch's limits by the switch's own account."""
    c, s, a = result["controller"], result["switch"], result["agreement"]
    cap = max(1, int(rule_update_rate))
    out = []
    if s["rule_updates_per_s_max"] > cap:
        out.append(f"switch received {s['rule_updates_per_s_max']} Ruleset 2 flow-mods in one second (R = {cap})")
    if s["ruleset2_max"] > cache_rule_capacity:
        out.append(f"switch held {s['ruleset2_max']} Ruleset 2 rules (C = {cache_rule_capacity})")
    if s["flow_mods_refused"]:
        out.append(f"switch refused {s['flow_mods_refused']} Ruleset 2 flow-mods")
    if not s["record_complete"]:
        out.append(f"switch flow monitor record incomplete (counted vs dumped {s['ruleset2_dumped_at_end']})")
    if a["missing_at_switch"] or a["unknown_to_controller"]:
        out.append(f"records disagree: {a['missing_at_switch']} flow-mods sent but not received, "
                   f"{a['unknown_to_controller']} received but not in the controller's journal")
    if abs(s["rule_updates_per_s_max"] - c["rule_updates_per_s_max"]) > rate_tolerance:
        out.append(f"busiest second: switch {s['rule_updates_per_s_max']}, controller {c['rule_updates_per_s_max']}")
    if abs(s["ruleset2_max"] - c["ruleset2_max"]) > size_tolerance:
        out.append(f"largest Ruleset 2: switch {s['ruleset2_max']}, controller {c['ruleset2_max']}")
    return out
