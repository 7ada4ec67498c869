"""The chaos faults that change the db nodes' chains (replication.factor > 1; docs/chaos.md,
"Db-node membership faults"):

  kill_db_disk  kill -9 a db node and delete its data directory (the machine is gone); after
                `hold_s` start it again on an empty disk (a replacement with the same name): a
                new incarnation, which the controller makes a learner, copies to and hands the
                tail over to
  remove_node   Controller.RemoveNode (what `exo node remove NAME` calls) under load
  add_node      Controller.AddNode (`exo node add NAME`) of a node removed before

Each records the fault-specific times next to the campaign's throughput measures:
failover_s and rejoin_s (kill_db_disk), removed_s (remove_node), caught_up_s (add_node). They
are read from the master controller (ListNodes: the live chain table) and from the switch (its
Ruleset 3 flows), as tests/integration/test_replication_failover.py does.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Optional

from exoproto import control_pb2 as pb

# A membership change must finish within this (failover, copy, hand-over); past it the time is
# recorded as None and the run fails (campaign.membership_failures).
CHANGE_TIMEOUT_S = 60.0
_OUTPUT_RE = re.compile(r"cookie=(0x[0-9a-f]+).*actions=output:(\d+)")


def wait_for(check: Callable[[], bool], since: float, timeout: float = CHANGE_TIMEOUT_S,
             step: float = 0.05) -> Optional[float]:
    """Seconds from `since` (time.monotonic) until check() held, or None after timeout. An
    exception in check() (a controller between masters, a node restarting) counts as not yet."""
    while time.monotonic() - since < timeout:
        try:
            if check():
                return time.monotonic() - since
        except Exception:  # noqa: BLE001 - asked again
            pass
        time.sleep(step)
    return None


def master_controller(cluster, timeout: float = 5.0):
    """The Controller stub of the master instance (with a failover group), else the one."""
    group = getattr(cluster, "group", None)
    if group is None:
        return cluster.stubs.controller()
    deadline = time.monotonic() + timeout
    while True:
        master = group.master(1.0)
        if master is not None:
            return group.stubs[master].controller()
        if time.monotonic() >= deadline:
            raise RuntimeError("no controller instance is master")
        time.sleep(0.1)


def list_nodes(cluster, timeout: float = 2.0) -> dict:
    """name -> DbNodeMembership, from the master's live chain table."""
    rep = master_controller(cluster, timeout).ListNodes(pb.StatsRequest(), timeout=timeout)
    return {n.name: n for n in rep.nodes}


def ruleset3_ports(bridge: str) -> dict[int, int]:
    """cookie -> output port of every Ruleset 3 flow the switch holds (one ovs-ofctl call)."""
    from exo_controller.flows import COOKIE_TAG
    tag = (COOKIE_TAG | 3) << 56
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge,
                          f"cookie={tag:#x}/{0xFF << 56:#x}"], capture_output=True, text=True,
                         check=True, timeout=10).stdout
    return {int(m.group(1), 16): int(m.group(2)) for m in map(_OUTPUT_RE.search, out.splitlines()) if m}


def out_of_chains(cluster, node: str) -> bool:
    """The controller's table names `node` in no chain (node nor learner), and every one of
    the switch's Ruleset 3 rules is there and sends to another port: the rules moved."""
    n = list_nodes(cluster)[node]
    if n.nodes or n.learners:
        return False
    cfg = cluster.cfg
    ports = ruleset3_ports(cfg.switch.bridge)
    return len(ports) == 2 << cfg.switch.partition_bits and cfg.node(node).switch_port not in ports.values()


def serving(cluster, node: str) -> bool:
    """`node` is a member in some chain and no slot has a learner left: every copy is done and
    handed over (it is a node, not a learner, of every slot it is in)."""
    nodes = list_nodes(cluster)
    return nodes[node].member and bool(nodes[node].nodes) and not any(n.learners for n in nodes.values())


def kill_db_disk(f, cluster, ev: dict, now_ns: Callable[[], int]) -> None:
    node = f.target
    data_dir = Path(cluster.cfg.node(node).data_dir)
    t_kill = time.monotonic()
    cluster.kill_node(node)
    ev["inject_ns"] = now_ns()
    shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    ev["failover_s"] = wait_for(lambda: out_of_chains(cluster, node), t_kill)
    time.sleep(max(0.0, f.hold_s - (time.monotonic() - t_kill)))
    t_start = time.monotonic()
    cluster.restart_node(node)
    ev["heal_ns"] = now_ns()
    ev["rejoin_s"] = wait_for(lambda: serving(cluster, node), t_start)
    ev["slots_after"] = len(list_nodes(cluster)[node].nodes) if ev["rejoin_s"] is not None else None


def remove_node(f, cluster, ev: dict, now_ns: Callable[[], int]) -> None:
    node = f.target
    t0 = time.monotonic()
    ev["inject_ns"] = now_ns()
    ev["table_version"] = master_controller(cluster).RemoveNode(pb.NodeRequest(name=node),
                                                                timeout=CHANGE_TIMEOUT_S).version
    ev["heal_ns"] = now_ns()  # the change is done: the RPC returns after the rules moved
    ev["removed_s"] = wait_for(lambda: not list_nodes(cluster)[node].member and out_of_chains(cluster, node), t0)


def add_node(f, cluster, ev: dict, now_ns: Callable[[], int]) -> None:
    node = f.target
    t0 = time.monotonic()
    ev["inject_ns"] = now_ns()
    ev["table_version"] = master_controller(cluster).AddNode(pb.NodeRequest(name=node),
                                                             timeout=CHANGE_TIMEOUT_S).version
    ev["heal_ns"] = now_ns()  # a member again, learner of every slot short of the factor
    ev["caught_up_s"] = wait_for(lambda: serving(cluster, node), t0)
    ev["slots_after"] = len(list_nodes(cluster)[node].nodes) if ev["caught_up_s"] is not None else None


def settled_chains(cluster, timeout: float = CHANGE_TIMEOUT_S) -> tuple[Optional[float], list[list[str]], list[str]]:
    """Wait until every member is in some chain and no slot has a learner (the controller has
    finished re-adding), then read the live table from the db nodes (the highest version any
    holds). Returns (seconds waited or None, per slot its nodes head first, per slot its read
    server)."""
    def done() -> bool:
        nodes = list_nodes(cluster)
        return (not any(n.learners for n in nodes.values())
                and all(n.nodes for n in nodes.values() if n.member))
    waited = wait_for(done, time.monotonic(), timeout)
    best = None
    for d in cluster.cfg.db_nodes:
        try:
            rep = cluster.stubs.db(d.name).ChainStatus(pb.StatsRequest(), timeout=5)
        except Exception:  # noqa: BLE001 - a node that is down has no say
            continue
        if best is None or rep.table.version > best.table.version:
            best = rep
    if best is None or best.table.version == 0:
        chains = [list(c) for c in cluster.cfg.chains()]
        return waited, chains, [c[-1] for c in chains]
    return waited, [list(s.nodes) for s in best.table.slots], [s.read_server for s in best.table.slots]
