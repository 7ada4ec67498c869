"""Cache node liveness: who is in the cluster, and what to do when that changes. Pure logic.

No threads, no gRPC, no clock of its own: the thin layer (monitor.py) feeds in events with the
time (`now`) and carries out the actions returned. So the state machine is unit-tested against a
fake clock (tests/unit/test_liveness.py). Not thread-safe: the monitor serialises calls.

Per cache node:

    UP ──(heartbeat_misses failures in a row, or its switch port link-down / deleted)──▶ DOWN
    DOWN ──(heartbeat answered again, and its port is not known to be down)──▶ REJOINING
    REJOINING ──(Reset done, after withdrawal confirmed and every db node forgot it)──▶ UP
    REJOINING ──(heartbeat_misses failures, or port down)──▶ DOWN (a new withdrawal)

Declaring a node DOWN returns WITHDRAW: the rule updater drops its desired rules and sends one
flow-mod that deletes all its Ruleset 2 rules. When the switch confirms that flow-mod (barrier),
`withdrawn()` returns one FORGET per db node (DbNode.ForgetCacheNode): from then on no GET can
reach the node, so the db nodes may stop propagating writes to it. A FORGET that fails is
retried every FORGET_RETRY_S (`due()`) until that db node answers.

A DOWN node that answers the heartbeat again becomes REJOINING. Once its withdrawal is confirmed
and every db node has acknowledged the forget, it gets RESET (CacheNode.Reset: drop every entry,
cancel every fetch); when that succeeds, REJOINED: it is UP and its rule adds are accepted again.
Reset comes after the forgets on purpose: a key the node fetched before a db node forgot it has
no write propagation any more and must not be served; Reset drops it. Anything the node fetches
after Reset is marked again by its db node, so it is safe to serve once its rule exists.

A freshly started controller does not know what the cache nodes hold. Every node starts UP and
"unsynced"; the first heartbeat answer returns SYNC (CacheNode.ListKeys, then one reference per
key in the rule book); a failed sync is retried on the next answer. A node that is declared DOWN
instead needs no sync (the updater's deletes wait for sync-or-DOWN of every node).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

LOG = logging.getLogger("exo_controller.liveness")

UP, DOWN, REJOINING = "up", "down", "rejoining"
STATE_CODE = {UP: 0, DOWN: 1, REJOINING: 2}  # the value of `cache_node_state <node>` in Stats

WITHDRAW, FORGET, RESET, REJOINED, SYNC = "withdraw", "forget", "reset", "rejoined", "sync"

FORGET_RETRY_S = 0.1  # a failed DbNode.ForgetCacheNode is retried this often until it answers


@dataclass(frozen=True)
class Action:
    """Something the thin layer must do. `gen` identifies the DOWN episode (or, for SYNC, the
    node's sync attempt): pass it back with the result so a late answer from an earlier episode
    is ignored."""
    kind: str                 # WITHDRAW, FORGET, RESET, REJOINED or SYNC
    node: str
    db: Optional[str] = None  # FORGET: the db node to call
    gen: int = 0


@dataclass
class _Node:
    name: str
    port: int
    state: str = UP
    misses: int = 0
    link_down: bool = False
    gen: int = 0                       # bumped on every DOWN declaration
    down_at: Optional[float] = None
    withdrawn: bool = False            # this episode's withdrawal is barrier-confirmed
    forgotten: dict[str, bool] = field(default_factory=dict)   # db node -> acknowledged
    forget_inflight: set[str] = field(default_factory=set)
    forget_retry_at: dict[str, float] = field(default_factory=dict)
    forget_failures: dict[str, int] = field(default_factory=dict)
    reset_inflight: bool = False
    reset_done: bool = False
    reset_failures: int = 0            # in a row, this episode (for quieter logs)
    need_sync: bool = True
    sync_inflight: bool = False
    sync_failures: int = 0             # in a row


def _log_failure(count: int) -> int:
    """Log level for the count-th failure in a row: the first and every 100th loudly."""
    return logging.WARNING if count == 1 or count % 100 == 0 else logging.DEBUG


class Liveness:
    """UP / DOWN / REJOINING per cache node; every event method returns the actions to take."""

    def __init__(self, cache_ports: Mapping[str, int], db_nodes: Iterable[str], misses: int = 3,
                 need_sync: bool = True):
        if misses < 1:
            raise ValueError("misses must be >= 1")
        self.threshold = misses
        self.db_nodes = list(db_nodes)
        self._nodes = {name: _Node(name, port, need_sync=need_sync) for name, port in cache_ports.items()}
        self._by_port = {port: name for name, port in cache_ports.items()}
        # metrics
        self.downs = 0
        self.withdrawals = 0
        self.rejoins = 0
        self.heartbeat_misses = 0
        self.forgets_acked = 0
        self.forget_failures = 0
        self.reset_failures = 0
        self.withdraw_s_last: Optional[float] = None
        self.withdraw_s_max = 0.0

    @classmethod
    def from_config(cls, cfg, need_sync: bool = True) -> "Liveness":
        return cls({c.name: c.switch_port for c in cfg.cache_nodes}, [d.name for d in cfg.db_nodes],
                   cfg.controller.heartbeat_misses, need_sync)

    # ------------------------------------------------------------------ queries

    def state(self, node: str) -> str:
        return self._nodes[node].state

    def states(self) -> dict[str, str]:
        return {n.name: n.state for n in self._nodes.values()}

    def node_of_port(self, port: int) -> Optional[str]:
        return self._by_port.get(port)

    def gen(self, node: str) -> int:
        return self._nodes[node].gen

    def synced(self, node: str) -> bool:
        return not self._nodes[node].need_sync

    # ------------------------------------------------------------------ events

    def heartbeat(self, node: str, ok: bool, now: float) -> list[Action]:
        """The result of one CacheNode.Stats poll (ok = answered within the deadline)."""
        n = self._nodes[node]
        if not ok:
            n.misses += 1
            self.heartbeat_misses += 1
            if n.state != DOWN and n.misses >= self.threshold:
                return self._declare_down(n, now, f"{n.misses} heartbeats in a row missed")
            return []
        n.misses = 0
        if n.state == UP:
            if n.need_sync and not n.sync_inflight:
                n.sync_inflight = True
                return [Action(SYNC, node, gen=n.gen)]
            return []
        if n.state == DOWN:
            if n.link_down:
                return []  # answers over the control network, but its switch port is down
            n.state = REJOINING
            LOG.info("cache node %s answers again: REJOINING (after the withdrawal, the db nodes' "
                     "forget and a Reset it is back)", node)
        return self._advance(n)

    def port_status(self, port: int, down: bool, now: float, why: str = "") -> list[Action]:
        """A switch port changed (OFPPortStatus). down: link down or port deleted."""
        node = self._by_port.get(port)
        if node is None:
            return []
        n = self._nodes[node]
        if not down:
            if n.link_down:
                LOG.info("cache node %s: switch port %d is up again", node, port)
            n.link_down = False
            return []
        n.link_down = True
        if n.state == DOWN:
            return []
        return self._declare_down(n, now, f"switch port {port} {why or 'down'}")

    def withdrawn(self, node: str, now: float) -> list[Action]:
        """The switch confirmed (barrier) the flow-mod that deleted the node's Ruleset 2 rules."""
        n = self._nodes[node]
        if n.state == UP or n.withdrawn:
            return []  # a repeated withdrawal (e.g. after a switch reconnect): nothing new
        n.withdrawn = True
        took = now - n.down_at if n.down_at is not None else 0.0
        self.withdrawals += 1
        self.withdraw_s_last = took
        self.withdraw_s_max = max(self.withdraw_s_max, took)
        LOG.warning("cache node %s: Ruleset 2 withdrawn %.3fs after it was declared DOWN; telling %d db "
                    "nodes to forget it", node, took, len(self.db_nodes))
        out = []
        for db in self.db_nodes:
            n.forget_inflight.add(db)
            out.append(Action(FORGET, node, db, n.gen))
        return out + self._advance(n)

    def forget_result(self, node: str, db: str, gen: int, ok: bool, now: float, error: str = "") -> list[Action]:
        """The answer of DbNode.ForgetCacheNode(node) from `db` (ok = acknowledged)."""
        n = self._nodes[node]
        if gen != n.gen or n.state == UP:
            return []
        n.forget_inflight.discard(db)
        if ok:
            if not n.forgotten.get(db):
                self.forgets_acked += 1
            n.forgotten[db] = True
            n.forget_retry_at.pop(db, None)
            if all(n.forgotten.values()):
                LOG.info("cache node %s: every db node forgot it", node)
            return self._advance(n)
        self.forget_failures += 1
        n.forget_failures[db] = n.forget_failures.get(db, 0) + 1
        LOG.log(_log_failure(n.forget_failures[db]), "db node %s did not forget cache node %s (%d times in a "
                "row: %s); retrying every %gs until it answers", db, node, n.forget_failures[db],
                error or "failed", FORGET_RETRY_S)
        n.forget_retry_at[db] = now + FORGET_RETRY_S
        return []

    def reset_result(self, node: str, gen: int, ok: bool, now: float, error: str = "") -> list[Action]:
        """The answer of CacheNode.Reset."""
        n = self._nodes[node]
        if gen != n.gen or n.state != REJOINING:
            return []
        n.reset_inflight = False
        if not ok:
            self.reset_failures += 1
            n.reset_failures += 1
            LOG.log(_log_failure(n.reset_failures), "cache node %s: Reset failed %d times in a row (%s); "
                    "retrying on its next heartbeat", node, n.reset_failures, error or "?")
            return []
        n.reset_done = True
        return self._advance(n)

    def sync_result(self, node: str, gen: int, ok: bool, now: float, error: str = "") -> bool:
        """The node's ListKeys was applied (ok) or failed. Returns False when the result is
        stale (the node went DOWN meanwhile): then it must not be applied."""
        n = self._nodes[node]
        if gen != n.gen or n.state != UP or not n.sync_inflight:
            return False
        n.sync_inflight = False
        if ok:
            n.need_sync = False
            n.sync_failures = 0
        else:
            n.sync_failures += 1
            LOG.log(_log_failure(n.sync_failures), "cache node %s: ListKeys failed %d times in a row (%s); "
                    "retrying on its next heartbeat", node, n.sync_failures, error or "?")
        return True

    def sync_valid(self, node: str, gen: int) -> bool:
        """A SYNC of this gen may still be applied (call before applying, under the same lock)."""
        n = self._nodes[node]
        return gen == n.gen and n.state == UP and n.sync_inflight

    def due(self, now: float) -> list[Action]:
        """Timed retries: FORGETs whose FORGET_RETRY_S has passed."""
        out = []
        for n in self._nodes.values():
            if n.state == UP or not n.withdrawn:
                continue
            for db, at in list(n.forget_retry_at.items()):
                if at <= now and db not in n.forget_inflight:
                    del n.forget_retry_at[db]
                    n.forget_inflight.add(db)
                    out.append(Action(FORGET, n.name, db, n.gen))
        return out

    def next_due(self) -> Optional[float]:
        times = [at for n in self._nodes.values() for at in n.forget_retry_at.values()]
        return min(times) if times else None

    # ------------------------------------------------------------------ transitions

    def _declare_down(self, n: _Node, now: float, why: str) -> list[Action]:
        was = n.state
        n.state = DOWN
        n.gen += 1
        n.down_at = now
        n.withdrawn = False
        n.forgotten = {db: False for db in self.db_nodes}
        n.forget_inflight.clear()
        n.forget_retry_at.clear()
        n.forget_failures.clear()
        n.reset_inflight = False
        n.reset_done = False
        n.reset_failures = 0
        n.need_sync = False
        n.sync_inflight = False
        self.downs += 1
        LOG.warning("cache node %s DOWN (%s; was %s): withdrawing its Ruleset 2 rules", n.name, why,
                    was.upper())
        return [Action(WITHDRAW, n.name, gen=n.gen)]

    def _advance(self, n: _Node) -> list[Action]:
        """REJOINING: Reset once withdrawn and forgotten everywhere; UP once Reset succeeded."""
        if n.state != REJOINING or not n.withdrawn or not all(n.forgotten.values()):
            return []
        if n.reset_done:
            n.state = UP
            n.misses = 0
            self.rejoins += 1
            LOG.info("cache node %s UP again: rejoined the cluster (reset, forgotten by every db node)", n.name)
            return [Action(REJOINED, n.name, gen=n.gen)]
        if not n.reset_inflight:
            n.reset_inflight = True
            return [Action(RESET, n.name, gen=n.gen)]
        return []

    # ------------------------------------------------------------------ metrics

    def metrics(self) -> dict[str, float]:
        out = {f"cache_node_state {n.name}": float(STATE_CODE[n.state]) for n in self._nodes.values()}
        out.update({
            "cache_nodes_down": float(sum(1 for n in self._nodes.values() if n.state != UP)),
            "cache_node_downs": float(self.downs),
            "cache_node_withdrawals": float(self.withdrawals),
            "cache_node_rejoins": float(self.rejoins),
            "cache_node_heartbeat_misses": float(self.heartbeat_misses),
            "cache_node_forgets": float(self.forgets_acked),
            "cache_node_forget_failures": float(self.forget_failures),
            "cache_node_reset_failures": float(self.reset_failures),
            "withdraw_s_last": float(self.withdraw_s_last or 0.0),
            "withdraw_ms_last": round((self.withdraw_s_last or 0.0) * 1000.0, 3),
            "withdraw_s_max": float(self.withdraw_s_max),
        })
        return out
