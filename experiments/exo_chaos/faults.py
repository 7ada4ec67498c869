"""The faults of a chaos campaign. Each injects one fault into a running EmulatedCluster, waits
for it to play out, heals it, and returns what happened as a dict (times in the monotonic clock
the client histories use, so recovery can be read off the histories afterwards).

Kinds (docs/chaos.md says what each checks):
  link_loss     5% loss, 2 +/- 1 ms delay on every client link
  dup_reorder   10% duplicated, 25% reordered (3 +/- 2 ms delay) request frames
  kill_cache    kill -9 a cache node; it rejoins empty after `down_s`
  kill_db       kill -9 a db node while clients write; restart after `down_s`
  kill_ctl      kill -9 the controller (with a failover group: every instance); restart after `down_s`
  kill_master_controller  (failover group only) kill -9 the master instance; another takes over
                (takeover_s, exo_topo.takeover); the killed one restarts as a standby after `down_s`
  kill_db_disk, remove_node, add_node  (replication.factor > 1) db-node membership changes:
                exo_chaos.membership
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from exo_harness.impair import Impairment
from exo_topo.takeover import TakeoverProbe, flow_durations, flushed

log = logging.getLogger("exo.chaos")

LINK_LOSS = Impairment(loss=0.05, delay_s=0.002, jitter_s=0.001)
# Faults that change the db chains' membership (exo_chaos.membership; replication.factor > 1).
MEMBERSHIP_FAULTS = ("kill_db_disk", "remove_node", "add_node")
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


def controller_stats(cluster, timeout: float = 5.0) -> dict:
    """The controller's Stats; with a failover group, the master's (only the master watches the
    cache nodes: a standby's withdrawal counters stay 0). Raises when there is no master."""
    group = getattr(cluster, "group", None)
    if group is None:
        return cluster.stubs.controller_stats(timeout=timeout)
    master = group.master(timeout)
    if master is None:
        raise RuntimeError("no controller instance is master")
    return group.stats(master, timeout)


def _not_ruleset2(cookie: int) -> bool:
    """Flows the new master has no reason to change: everything but cache rules (Ruleset 2),
    which the clients' DELETEs and the cache loop add and retire all the time."""
    from exo_controller.flows import ruleset_of_cookie
    return ruleset_of_cookie(cookie) != 2


def kill_master_controller(f: Fault, cluster, ev: dict) -> None:
    """kill -9 the master; measure the survivor's takeover as test_controller_failover does;
    check that no flow outside Ruleset 2 was flushed; restart the killed one (a standby)."""
    group = cluster.group
    if group is None or len(group.procs) < 2:
        raise ValueError("kill_master_controller needs a failover group of 2+ controller instances "
                         "(run_campaign(controllers=2), --controllers 2)")
    found: list[str] = []
    if wait_until(lambda: found.append(group.master()) or found[-1] is not None, timeout=20) is None:
        raise RuntimeError("kill_master_controller: no controller instance became master within 20 s")
    master = found[-1]
    standby = next(n for n in group.procs if n != master)
    cache_node = cluster.cfg.cache_nodes[0].name
    probe = TakeoverProbe(cluster.cfg, cache_node, standby)
    try:
        ev.update(target=master, standby=standby, standby_refused_before=probe.refused_as_standby(master))
        flushed_before = group.stats(standby).get("switch_tables_flushed", 0)
        before = flow_durations(cluster.cfg.switch.bridge, keep=_not_ruleset2)
        t_kill = time.monotonic()
        group.kill(master)
        ev["inject_ns"] = now_ns()
        ev.update(probe.measure(t_kill, lambda: group.stats(standby, 0.5)))
        after = flow_durations(cluster.cfg.switch.bridge, keep=_not_ruleset2)
        gone, reset = flushed(before, after)
        new = group.stats(standby)
        ev.update(flows_checked=len(before), flows_flushed=len(gone) + len(reset),
                  flows_flushed_detail=(gone + reset)[:5],
                  switch_tables_flushed=new.get("switch_tables_flushed", 0) - flushed_before,
                  switch_tables_kept=new.get("switch_tables_kept", 0),
                  leader_revokes=new.get("leader_revokes", 0))
        if ev["takeover_s"] is not None:
            probe.remove()
    finally:
        probe.close()
    time.sleep(max(0.0, f.hold_s - (now_ns() - ev["inject_ns"]) / 1e9))
    group.start_instance(master)
    ev["heal_ns"] = now_ns()
    # Back as a standby: it answers Stats and the survivor is still the master.
    ev["restarted_standby_s"] = wait_until(
        lambda: group.stats(master).get("controller_master") == 0 and group.master() == standby, timeout=30)


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
        stats = lambda: controller_stats(cluster)  # noqa: E731
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
        group = getattr(cluster, "group", None)
        names = list(group.procs) if group is not None else []
        for name in names:  # a failover group: the whole control plane goes
            group.kill(name)
        if group is None:
            cluster.kill_controller()
        ev["inject_ns"] = now_ns()
        time.sleep(f.hold_s)
        t = now_ns()
        for name in names:
            group.start_instance(name)
        if group is None:
            cluster.restart_controller(wait=False)
        ev["heal_ns"] = t
        ev["programmed_s"] = wait_until(
            lambda: controller_stats(cluster, timeout=1.0).get("switch_programmed", 0) == 1, timeout=30)
    elif f.kind == "kill_master_controller":
        kill_master_controller(f, cluster, ev)
    elif f.kind in MEMBERSHIP_FAULTS:
        from . import membership
        getattr(membership, f.kind)(f, cluster, ev, now_ns)
    else:
        raise ValueError(f"unknown fault kind {f.kind!r}")
    return ev
