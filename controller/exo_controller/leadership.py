"""Which controller instance may write to the switch: a pure state machine, events in, actions out
(docs/design/replication.md, 5.1 and 5.4). No I/O here: app.py feeds it OpenFlow events, the
election thread feeds it etcd results, the probe thread feeds it Ping outcomes, and each carries
out the actions it returns.

The rules it encodes:
* every new OpenFlow connection is first sent ROLE_REQUEST(SLAVE, gen) (a new connection is
  EQUAL and could write);
* only the election winner sends ROLE_REQUEST(MASTER, gen), gen = its election generation, and
  only after the switch answers ROLE_REPLY(MASTER) may it read the table and write (adopt);
* STALE in answer to MASTER, or IS_SLAVE on a flow-mod, means a newer master exists: stop
  writing and resign;
* a standby probes the master; two refused connections in a row revoke the master's lease once;
  a probe that only times out never does (a slow master keeps its job until its lease expires);
* a master whose switch connection has been down longer than `disconnected_resign_s` resigns,
  so a standby that still reaches the switch takes over.
Without etcd (`single=True`) there is no election and no role request: every connection is
adopted at once, as before failover existed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

SLAVE, MASTER = "slave", "master"
PROBE_OK, PROBE_REFUSED, PROBE_TIMEOUT = "ok", "refused", "timeout"
REFUSALS_TO_REVOKE = 2  # refused Pings in a row that mean the master's process is gone


# ---- actions ----
@dataclass(frozen=True)
class SendRoleRequest:
    role: str        # SLAVE or MASTER
    generation: int


@dataclass(frozen=True)
class StartAdopting:
    """The switch confirmed us as MASTER: read its table (plan_table), then send flow-mods."""


@dataclass(frozen=True)
class StopSending:
    """No modify-state message may leave this instance any more."""
    why: str


@dataclass(frozen=True)
class Resign:
    """Revoke our own election lease (the next candidate takes over)."""
    why: str


@dataclass(frozen=True)
class RevokeLeader:
    """LeaseRevoke the master's lease: its process is gone."""
    name: str
    lease_id: int


@dataclass(frozen=True)
class Leader:
    """Who etcd says is master (exo_common.etcd.LeaderInfo's fields)."""
    name: str
    lease_id: int
    generation: int


class Leadership:
    def __init__(self, name: str, single: bool = False, disconnected_resign_s: float = 2.0):
        self.name = name
        self.single = single
        self.disconnected_resign_s = disconnected_resign_s
        self.connected = False
        self.disconnected_at: Optional[float] = None
        self.generation: Optional[int] = None   # ours, while we hold the election
        self.leader: Optional[Leader] = None    # the current master per etcd (maybe us)
        self.role_requested: Optional[str] = None  # the last role we asked the switch for
        self.slave_generation = 0               # the generation of our last SLAVE request
        self.confirmed = False                  # ROLE_REPLY(MASTER) with our generation arrived
        self.writing = False                    # StartAdopting issued, no StopSending since
        self.refusals = 0                       # consecutive refused Pings of the current leader
        self.revoked: set[int] = set()          # lease ids we already revoked

    # ---- queries ----
    @property
    def elected(self) -> bool:
        return self.generation is not None

    def is_master(self) -> bool:
        """May write to the switch and answer rule changes."""
        return self.writing

    def master_name(self) -> Optional[str]:
        if self.single or self.elected:
            return self.name
        return self.leader.name if self.leader is not None else None

    def known_generation(self) -> int:
        """The newest generation we know of: what a SLAVE request carries (0: none known)."""
        gens = [g for g in (self.generation, self.leader.generation if self.leader else None) if g is not None]
        return max(gens, default=0)

    # ---- events ----
    def switch_connected(self, now: float) -> list:
        self.connected, self.disconnected_at = True, None
        self.confirmed = False
        out = self._stop("switch (re)connected") if self.writing else []
        if self.single:
            self.writing = True
            return out + [StartAdopting()]
        self.role_requested = SLAVE
        self.slave_generation = self.known_generation()
        out.append(SendRoleRequest(SLAVE, self.slave_generation))
        if self.elected:
            self.role_requested = MASTER
            out.append(SendRoleRequest(MASTER, self.generation))
        return out

    def switch_disconnected(self, now: float) -> list:
        self.connected, self.disconnected_at = False, now
        self.confirmed, self.role_requested = False, None
        return self._stop("switch disconnected") if self.writing else []

    def elected_as(self, generation: int) -> list:
        """We won the election with this generation (the create revision of our key)."""
        self.generation = generation
        self.leader = Leader(self.name, self.leader.lease_id if self.leader and self.leader.name == self.name
                             else 0, generation)
        self.refusals = 0
        if not self.connected:
            return []
        self.role_requested = MASTER
        return [SendRoleRequest(MASTER, generation)]

    def role_reply(self, role: str, generation: int) -> list:
        if role == MASTER and self.elected and self.role_requested == MASTER and generation == self.generation:
            self.confirmed = True
            if not self.writing:
                self.writing = True
                return [StartAdopting()]
            return []
        if role != MASTER and self.writing:
            # Demoted (a reply to a SLAVE request we did not expect while master): fenced.
            return self._stop(f"the switch reports role {role}") + self._resign("demoted by the switch")
        return []

    def role_stale(self) -> list:
        """The switch refused our role request: its generation is older than one it has seen."""
        if self.role_requested == MASTER:
            return self._stop("ROLE_REQUEST(MASTER) refused STALE: a newer master exists") + \
                self._resign("a newer master exists (STALE)")
        if self.role_requested == SLAVE and self.known_generation() > self.slave_generation:
            return self._slave_again()
        return []  # a SLAVE request refused: the connection stays EQUAL until we learn the generation

    def demoted(self, why: str) -> list:
        """The switch refused one of our modify-state messages with IS_SLAVE."""
        if not self.elected and not self.writing:
            return []
        return self._stop(why) + self._resign(why)

    def lost_lease(self) -> list:
        """Our election key is gone (lease expired or revoked, or we resigned)."""
        self.generation = None
        self.confirmed = False
        if self.role_requested == MASTER:
            self.role_requested = None
        return self._stop("lost the election lease") if self.writing else []

    def leader_changed(self, leader: Optional[Leader]) -> list:
        if leader != self.leader:
            self.refusals = 0
        if leader is not None and self.elected and leader.name == self.name:
            leader = Leader(leader.name, leader.lease_id, self.generation)
        self.leader = leader
        # A SLAVE request older than the master's generation is refused STALE (the connection
        # would stay EQUAL): keep ours current.
        if (self.connected and not self.single and not self.elected and self.role_requested == SLAVE
                and self.known_generation() > self.slave_generation):
            return self._slave_again()
        return []

    def _slave_again(self) -> list:
        self.slave_generation = self.known_generation()
        return [SendRoleRequest(SLAVE, self.slave_generation)]

    def probe(self, result: str) -> list:
        """The outcome of one Ping of the current master (standbys only)."""
        if self.single or self.elected or self.leader is None or self.leader.name == self.name:
            self.refusals = 0
            return []
        if result != PROBE_REFUSED:
            self.refusals = 0
            return []
        self.refusals += 1
        lease = self.leader.lease_id
        if self.refusals >= REFUSALS_TO_REVOKE and lease not in self.revoked:
            self.revoked.add(lease)
            return [RevokeLeader(self.leader.name, lease)]
        return []

    def tick(self, now: float) -> list:
        if (self.elected and not self.connected and self.disconnected_at is not None
                and now - self.disconnected_at > self.disconnected_resign_s):
            self.disconnected_at = None  # resign once
            return self._resign(f"switch disconnected for more than {self.disconnected_resign_s:g}s")
        return []

    # ---- helpers ----
    def _stop(self, why: str) -> list:
        self.writing = False
        return [StopSending(why)]

    def _resign(self, why: str) -> list:
        return [Resign(why)] if self.elected else []
