"""The controller's timestamped record of Ruleset 2: every Ruleset 2 flow-mod it sent (with its
OpenFlow xid) and every change of the most rules the switch may hold. One JSON object a line:

    {"t": 1764000000.123456, "start": {"rule_update_rate": 50.0, "cache_rule_capacity": 4096, "fault": null, "pid": 1}}
    {"t": 1764000001.234567, "xid": 4097, "op": "add", "hash": 123456, "port": 1}
    {"t": 1764000001.234602, "ruleset2": 12}
    {"t": 1764000001.236001, "confirmed": [4097]}

`confirmed` lists the Ruleset 2 flow-mods that the barrier reply just received covers: the switch
processed each of them before that time (OpenFlow: a switch answers a barrier only after every
message before it). The switch-side audit uses it as an upper bound on when the switch had each
flow-mod, because ovs-ofctl's own timestamps can lag (exo_topo.switch_audit).

Why a journal: the controller's Stats are lifetime figures that include the start-up programming
of Rulesets 1 and 3 (every flow-mod counts against R), so they cannot tell what a run did. A
harness takes the records between the start and the end of its workload (exo_topo.switch_audit)
and matches the xids against what the switch itself received. `t` is wall-clock time
(time.time()), the clock ovs-ofctl --timestamp prints, so both records share one time base.

A write error (disk full, ...) disables the journal with one log line: losing the record must
never stop the rule sender.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

LOG = logging.getLogger("exo_controller.journal")


class Ruleset2Journal:
    def __init__(self, path: str | Path, clock: Callable[[], float] = time.time):
        self.path = Path(path)
        self.clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Append: a restarted controller continues the same record.
        self._f = open(self.path, "a", buffering=1)
        self._last_size: Optional[int] = None
        self._unconfirmed: list[int] = []  # Ruleset 2 xids sent since the last barrier outcome

    def _write(self, rec: dict) -> None:
        if self._f is None:
            return
        try:
            self._f.write(json.dumps(rec, separators=(",", ":")) + "\n")
        except (OSError, ValueError) as err:
            LOG.error("Ruleset 2 journal %s: %s; no longer recording", self.path, err)
            self.close()

    def start(self, rule_update_rate: float, cache_rule_capacity: int, fault: Optional[str]) -> None:
        self._write({"t": self.clock(), "start": {"rule_update_rate": rule_update_rate,
                     "cache_rule_capacity": cache_rule_capacity, "fault": fault, "pid": os.getpid()}})
        self._last_size = None

    def sent(self, fm, kind: str, xid: int) -> None:
        """One Ruleset 2 flow-mod (`kind` "add", "delete" or "withdraw", as
        RuleUpdater.ruleset2_kinds says) just handed to the switch connection with `xid`."""
        if self._f is None:
            return
        rec = {"t": self.clock(), "xid": xid, "op": kind}
        if kind != "withdraw":
            rec["hash"] = fm.rule_hash
        if fm.out_port is not None:
            rec["port"] = fm.out_port
        self._write(rec)
        self._unconfirmed.append(xid)

    def confirmed(self) -> None:
        """The barrier after the flow-mods sent since the last call has just been answered."""
        xids, self._unconfirmed = self._unconfirmed, []
        if self._f is not None and xids:
            self._write({"t": self.clock(), "confirmed": xids})

    def abandoned(self) -> None:
        """That barrier was not answered (timeout, disconnect): no bound is known for them."""
        self._unconfirmed = []

    def size(self, n: int) -> None:
        """The most Ruleset 2 rules the switch may hold (RuleUpdater.ruleset2_may_hold); only
        changes are written."""
        if self._f is not None and n != self._last_size:
            self._last_size = n
            self._write({"t": self.clock(), "ruleset2": n})

    def close(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass


@dataclass
class JournalRecords:
    """A journal read back: flow-mods as (t, xid, op), sizes as (t, n), and controller starts."""
    mods: list[tuple[float, int, str]] = field(default_factory=list)
    sizes: list[tuple[float, int]] = field(default_factory=list)
    starts: list[tuple[float, dict]] = field(default_factory=list)
    confirmed: dict[int, float] = field(default_factory=dict)  # xid -> when its barrier reply came
    bad_lines: int = 0


def read_journal(path: str | Path) -> JournalRecords:
    """Parse a journal; a torn last line (the controller killed mid-write) counts as bad."""
    return parse_journal(Path(path).read_text(errors="replace").splitlines())


def parse_journal(lines: Iterable[str]) -> JournalRecords:
    out = JournalRecords()
    for line in lines:
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            t = float(rec["t"])
            if "xid" in rec:
                out.mods.append((t, int(rec["xid"]), str(rec["op"])))
            elif "ruleset2" in rec:
                out.sizes.append((t, int(rec["ruleset2"])))
            elif "start" in rec:
                out.starts.append((t, dict(rec["start"])))
            elif "confirmed" in rec:
                for xid in rec["confirmed"]:
                    out.confirmed[int(xid)] = t
            else:
                out.bad_lines += 1
        except (ValueError, KeyError, TypeError):
            out.bad_lines += 1
    return out
