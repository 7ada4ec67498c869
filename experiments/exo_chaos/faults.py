"""The faults of a chaos campaign. Each injects one fault into a running EmulatedCluster, waits
for it to play out, heals it, and returns what happened as a dict (times in the monotonic clock
the client histories use, so recovery can be read off the histories afterwards).

Kinds (docs/chaos.md says what each checks):
  link_loss     5% loss, 2 +/- 1 ms delay on every client link
  dup_reorder   10% duplicated, 25% reordered (3 +/- 2 ms delay) request frames
  kill_cache    kill -9 a cache node; it rejoins empty after `down_s`
  kill_db       kill -9 a db node while clients write; restart after `down_s`
  kill_ctl      kill -9 the controller; restart after `down_s`
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from exo_harness.impair import Impairment

log = logging.getLogger("exo.chaos")

LINK_LOSS = Impairment(loss=0.05, delay_s=0.002, jitter_s=0.001)
DUP_REORDER = Impairment(duplicate=0.10, reorder=0.25, delay_s=0.003, jitter_s=0.002)


def now_ns() -> int:
    return time.monotonic_ns()


@dataclass
class Links:
    """Applies an Impairment to the client links: tc netem on the Mininet interfaces where the
    kernel has sch_netem, else the workers' own shim (exo_harness.impair) via their impair files."""
    cluster: object
    clients: list[str]
    impair_files: dict[str, Path]
    use_netem: bool = False

    @staticmethod
    def netem_available(cluster, host: str) -> bool:
        try:
            cluster.set_netem(host, "delay 0ms")
            cluster.clear_netem(host)
            return True
        except RuntimeError as err:
            log.info("tc netem unavailable (%s): impairing links in the clients instead",
                     str(err).splitlines()[-1][:120])
            return False

    def apply(self, imp: Impairment) -> None:
        for c in self.clients:
            if self.use_netem:
                spec = (f"delay {imp.delay_s * 1e3:g}ms {imp.jitter_s * 1e3:g}ms loss {imp.loss * 100:g}% "
                        f"duplicate {imp.duplicate * 100:g}% reorder {imp.reorder * 100:g}%")
                self.cluster.set_netem(c, spec)
            else:
                tmp = self.impair_files[c].with_suffix(".tmp")
                tmp.write_text(json.dumps(imp.__dict__))
                tmp.replace(self.impair_files[c])

    def clear(self) -> None:
        for c in self.clients:
            if self.use_netem:
                self.cluster.clear_netem(c)
            else:
                self.impair_files[c].unlink(missing_ok=True)


@dataclass
class Fault:
    kind: str
    target: str = ""
    hold_s: float = 6.0   # link faults: how long; kills: how long the process stays dead
    settle_s: float = 5.0  # quiet time after healing before the next fault
    extra: dict = field(default_factory=dict)


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.05) -> float | None:
    """Seconds until check() was true, or None after timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if check():
                return time.monotonic() - t0
        except Exception:  # a node restarting refuses RPCs for a moment
            pass
        time.sleep(step)
    return None


def run_fault(f: Fault, cluster, links: Links) -> dict:
    ev = {"kind": f.kind, "target": f.target, "inject_ns": now_ns()}
    if f.kind in ("link_loss", "dup_reorder"):
        imp = LINK_LOSS if f.kind == "link_loss" else DUP_REORDER
        ev["impairment"] = imp.describe() + (" (tc netem)" if links.use_netem else " (client shim)")
        links.apply(imp)
        time.sleep(f.hold_s)
        links.clear()
        ev["heal_ns"] = now_ns()
    elif f.kind == "kill_cache":
        stats = cluster.stubs.controller_stats
        withdrawals = stats().get("cache_node_withdrawals", 0)
        cluster.kill_node(f.target)
        ev["inject_ns"] = now_ns()
        # The controller notices (heartbeat loss), withdraws the node's Ruleset 2 with one
        # flow-mod, and tells the db nodes to forget it.
        ev["withdrawn_s"] = wait_until(lambda: stats().get("cache_node_withdrawals", 0) > withdrawals,
                                       timeout=10)
        time.sleep(max(0.0, f.hold_s - (time.monotonic_ns() - ev["inject_ns"]) / 1e9))
        rejoins = stats().get("cache_node_rejoins", 0)
        cluster.restart_node(f.target)
        ev["heal_ns"] = now_ns()
        ev["rejoined_s"] = wait_until(lambda: stats().get("cache_node_rejoins", 0) > rejoins, timeout=15)
        ev["refilled_keys"] = None
        if wait_until(lambda: len(cluster.stubs.cached_keys(f.target)) > 0, timeout=f.settle_s) is not None:
            ev["refilled_keys"] = len(cluster.stubs.cached_keys(f.target))
    elif f.kind == "kill_db":
        cluster.kill_node(f.target)
        ev["inject_ns"] = now_ns()
        time.sleep(f.hold_s)
        cluster.restart_node(f.target)
        ev["heal_ns"] = now_ns()
        st = cluster.stubs.stats(f.target)
        ev["txns_recovered"] = st.get("txns_recovered", 0)
    elif f.kind == "kill_ctl":
        cluster.kill_controller()
        ev["inject_ns"] = now_ns()
        time.sleep(f.hold_s)
        t = now_ns()
        cluster.restart_controller(wait=False)
        ev["heal_ns"] = t
        ev["programmed_s"] = wait_until(
            lambda: cluster.stubs.controller_stats(timeout=1.0).get("switch_programmed", 0) == 1, timeout=30)
    else:
        raise ValueError(f"unknown fault kind {f.kind!r}")
    return ev
