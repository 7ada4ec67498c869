"""Db node liveness at replication.factor > 1: who is alive, and which process it is. Pure logic.

No threads, no gRPC, no clock of its own: chain_exec.py feeds in each DbNode.ChainStatus result
(answered or not, and the incarnation it reported) with the time, and acts on the events
returned. Unit-tested against a fake clock (tests/unit/test_db_liveness.py).

Per db node (docs/design/replication.md, 4.1):

    UNKNOWN ──(answers)──▶ UP                      (a freshly started controller)
    UP ──(misses failures in a row, or its switch port down)──▶ DOWN     event DOWN(old incarnation)
    UP ──(answers with another incarnation)──▶ DOWN then UP            events DOWN(old), JOINED(new)
    DOWN ──(answers, port not known down)──▶ UP                        event JOINED(incarnation)
    UNKNOWN ──(misses failures in a row)──▶ DOWN                       event DOWN(0)

A restart is a failure followed by a new node joining: chain replication assumes fail-stop
servers, and a restarted process may hold a write its peers never got (its on-disk dedup record
would call it OK). The new incarnation comes back with an empty role and copies its slots anew.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

LOG = logging.getLogger("exo_controller.db_liveness")

UNKNOWN, UP, DOWN = "unknown", "up", "down"
STATE_CODE = {UP: 0, DOWN: 1, UNKNOWN: 2}  # `db_node_state <node>` in Stats

HEARTBEAT_S = 0.1   # one ChainStatus per db node this often; its deadline is the same

NODE_DOWN, NODE_JOINED = "down", "joined"


@dataclass(frozen=True)
class Event:
    kind: str          # NODE_DOWN or NODE_JOINED
    node: str
    incarnation: int   # DOWN: the incarnation that failed (0: never seen); JOINED: the new one
    why: str = ""
    since: float = 0.0  # DOWN: when the failure was first seen (the first miss of the run)


@dataclass
class _Node:
    name: str
    port: int
    state: str = UNKNOWN
    misses: int = 0
    incarnation: int = 0
    link_down: bool = False
    down_at: Optional[float] = None
    first_miss_at: Optional[float] = None  # of the current run of misses


class DbLiveness:
    def __init__(self, ports: Mapping[str, int], misses: int = 5):
        if misses < 1:
            raise ValueError("misses must be >= 1")
        self.threshold = misses
        self._nodes = {n: _Node(n, p) for n, p in ports.items()}
        self._by_port = {p: n for n, p in ports.items()}
        self.downs = 0
        self.restarts = 0
        self.heartbeat_misses = 0

    @classmethod
    def from_config(cls, cfg) -> "DbLiveness":
        return cls({d.name: d.switch_port for d in cfg.db_nodes}, cfg.replication.db_heartbeat_misses)

    # ---------------------------------------------------------------- queries

    def state(self, node: str) -> str:
        return self._nodes[node].state

    def incarnation(self, node: str) -> int:
        return self._nodes[node].incarnation

    def up(self) -> dict[str, int]:
        """node -> incarnation of every UP node."""
        return {n.name: n.incarnation for n in self._nodes.values() if n.state == UP}

    def names(self) -> list[str]:
        return list(self._nodes)

    def down_since(self, node: str) -> Optional[float]:
        return self._nodes[node].down_at

    # ---------------------------------------------------------------- events

    def heartbeat(self, node: str, ok: bool, incarnation: int, now: float) -> list[Event]:
        """One ChainStatus result: ok = answered in time, with `incarnation`."""
        n = self._nodes[node]
        if not ok:
            if n.misses == 0:
                n.first_miss_at = now
            n.misses += 1
            self.heartbeat_misses += 1
            if n.state != DOWN and n.misses >= self.threshold:
                return [self._down(n, now, f"{n.misses} heartbeats in a row missed")]
            return []
        n.misses = 0
        n.first_miss_at = None
        if n.state == UP and incarnation == n.incarnation:
            return []
        out = []
        if n.state == UP:
            self.restarts += 1
            out.append(self._down(n, now, f"it answers as incarnation {incarnation:#x}: it restarted"))
        if n.link_down:
            return out  # answers over the control network, but its switch port is down
        was = n.state
        n.state, n.incarnation, n.down_at = UP, incarnation, None
        LOG.info("db node %s UP (incarnation %#x; was %s)", node, incarnation, was.upper())
        out.append(Event(NODE_JOINED, node, incarnation, f"answers (was {was})"))
        return out

    def port_status(self, port: int, down: bool, now: float, why: str = "") -> list[Event]:
        node = self._by_port.get(port)
        if node is None:
            return []
        n = self._nodes[node]
        if not down:
            n.link_down = False
            return []
        n.link_down = True
        if n.state == DOWN:
            return []
        return [self._down(n, now, f"switch port {port} {why or 'down'}")]

    def _down(self, n: _Node, now: float, why: str) -> Event:
        old = n.incarnation
        n.state, n.down_at = DOWN, now
        self.downs += 1
        LOG.warning("db node %s DOWN (%s)", n.name, why)
        since = n.first_miss_at if n.first_miss_at is not None and n.misses else now
        return Event(NODE_DOWN, n.name, old, why, since)

    # ---------------------------------------------------------------- metrics

    def metrics(self, members: Iterable[str] = ()) -> dict[str, float]:
        members = set(members)
        out = {f"db_node_state {n.name}": float(STATE_CODE[n.state]) for n in self._nodes.values()}
        out.update({
            "db_nodes_down": float(sum(1 for n in self._nodes.values()
                                       if n.state == DOWN and (not members or n.name in members))),
            "db_node_downs": float(self.downs),
            "db_node_restarts": float(self.restarts),
            "db_node_heartbeat_misses": float(self.heartbeat_misses),
        })
        return out
