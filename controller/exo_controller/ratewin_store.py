"""The rate-window record in etcd (docs/design/replication.md, 5.5): the switch takes at most R
flow-mods in any second and does not care which controller sent them, so a new master must
count the old master's last second too. Without `controller.etcd` nothing here runs.

    /exo/<cluster>/ratewin   {"batches": [{"decided_at": t, "n": n, "confirmed_at": t|null,
                                            "failed_at": t|null}, ...]}

Before it sends a batch the master adds (decided_at, n); after the barrier reply it sets the
batch's confirmed_at (or failed_at when no reply came). Each write carries every batch the
master's own window may still hold, so the record is at most R entries; every write is a Txn
guarded by the master's election key. Times are wall-clock (time.time()), the time base of
rule_journal.py and the switch audit; across hosts that needs NTP, and CLOCK_GUARD_S is added to
every seeded entry.

A new master seeds its window (seed_leave_times, pure) at role_at, the wall time the switch
confirmed it MASTER:
* a confirmed batch counts until confirmed_at + 1 s + 1 ms (the updater's own rule,
  rule_updater.CLOCK_RESOLUTION_S): it reached the switch before its barrier reply;
* a batch never confirmed counts until role_at + 1 s: after the role change the switch refuses
  the old master's flow-mods, so none of them reaches it later than role_at;
* no record at all (the first master, or etcd lost it): a full window, R entries until
  role_at + 1 s: safe, only slower.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Optional, Sequence

from .etcd_keys import cluster_prefix
from .rule_updater import CLOCK_RESOLUTION_S, SEND_GUARD_S

LOG = logging.getLogger("exo_controller.ratewin")
# Added to every seeded entry: the old master's clock (another host) may be behind ours by this
# much (the design's replication.clock_guard_ms, default 50; a constant until a deployment needs
# to set it).
CLOCK_GUARD_S = 0.05


def key(cfg) -> str:
    return f"{cluster_prefix(cfg)}/ratewin"


@dataclass(frozen=True)
class BatchRecord:
    decided_at: float
    n: int
    confirmed_at: Optional[float] = None
    failed_at: Optional[float] = None  # no barrier reply: it may still reach the switch

    def leaves_at(self) -> Optional[float]:
        """When the sender's own window lets it go (None: in flight, still counted)."""
        if self.confirmed_at is not None:
            return self.confirmed_at + 1.0 + CLOCK_RESOLUTION_S
        if self.failed_at is not None:
            return self.failed_at + 1.0 + SEND_GUARD_S
        return None


def encode(batches: Sequence[BatchRecord]) -> bytes:
    return json.dumps({"batches": [{"decided_at": b.decided_at, "n": b.n, "confirmed_at": b.confirmed_at,
                                    "failed_at": b.failed_at} for b in batches]},
                      separators=(",", ":")).encode()


def decode(value: Optional[bytes]) -> Optional[list[BatchRecord]]:
    """None when there is no record; a value that does not parse raises ValueError naming the key."""
    if value is None:
        return None
    try:
        parsed = json.loads(value)
        out = []
        for i, b in enumerate(parsed["batches"]):
            n = b["n"]
            times = [b["decided_at"], b.get("confirmed_at"), b.get("failed_at")]
            if type(n) is not int or n < 0:
                raise ValueError(f"batches[{i}].n: {n!r} is not a whole number >= 0")
            if not all(t is None or isinstance(t, (int, float)) for t in times) or times[0] is None:
                raise ValueError(f"batches[{i}]: times must be numbers (decided_at required)")
            out.append(BatchRecord(float(times[0]), n, *(None if t is None else float(t) for t in times[1:])))
        return out
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"etcd key ratewin: {err}") from None


def prune(batches: Sequence[BatchRecord], now: float) -> list[BatchRecord]:
    """The batches the sender's window still holds at `now` (what the next write carries)."""
    return [b for b in batches if b.leaves_at() is None or b.leaves_at() > now]


def seed_leave_times(record: Optional[Sequence[BatchRecord]], role_at: float, window_cap: int,
                     guard_s: float = CLOCK_GUARD_S) -> list[float]:
    """When each flow-mod the old master(s) may have sent leaves the new master's window (wall
    clock, sorted), given the record read after the switch confirmed us MASTER at `role_at`.
    Entries that left before role_at are not returned."""
    unconfirmed_until = role_at + 1.0 + guard_s
    if record is None:
        return [unconfirmed_until] * window_cap
    out = []
    for b in record:
        until = (b.confirmed_at + 1.0 + CLOCK_RESOLUTION_S + guard_s if b.confirmed_at is not None
                 else unconfirmed_until)
        if until > role_at:
            out += [until] * b.n
    return sorted(out)


class RateWindowStoreError(RuntimeError):
    pass


class EtcdRateWindowStore:
    """decided() / finished() / load() through the master's election (failover.Failover)."""

    def __init__(self, cfg, failover):
        self.failover = failover
        self.key = key(cfg)
        self._batches: list[BatchRecord] = []
        self.writes = 0
        self.failures = 0

    def load(self) -> Optional[list[BatchRecord]]:
        """The record as etcd holds it (None: none). EtcdError / ValueError propagate."""
        kv = self.failover.client.get(self.key)
        return decode(kv.value if kv is not None else None)

    def reset(self, record: Optional[Sequence[BatchRecord]], now: float) -> None:
        """A new master: the record it seeded from is what its own writes continue."""
        self._batches = prune(record or [], now)

    def decided(self, decided_at: float, n: int) -> None:
        """Before a batch of n flow-mods is sent. RateWindowStoreError: do not send it."""
        self._write(prune(self._batches, decided_at) + [BatchRecord(decided_at, n)])

    def finished(self, at: float, confirmed: bool) -> None:
        """The last batch decided got its barrier reply (confirmed) or none (failed) at `at`."""
        if not self._batches or self._batches[-1].leaves_at() is not None:
            return
        last = self._batches[-1]
        done = BatchRecord(last.decided_at, last.n, at if confirmed else None, None if confirmed else at)
        self._write(prune(self._batches[:-1], at) + [done])

    def _write(self, batches: list[BatchRecord]) -> None:
        from exo_common.etcd import EtcdError, op_put
        try:
            ok, _ = self.failover.election.guarded_txn([op_put(self.key, encode(batches))])
        except EtcdError as err:
            self.failures += 1
            raise RateWindowStoreError(f"writing the rate-window record to etcd: {err}") from err
        if not ok:
            self.failures += 1
            raise RateWindowStoreError("writing the rate-window record refused: no longer the elected master")
        self._batches = batches
        self.writes += 1
