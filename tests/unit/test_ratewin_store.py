"""The rate-window record (controller/exo_controller/ratewin_store.py): what a new master seeds its
window with (pure), a failover simulated with two real RuleUpdaters and checked the way the
switch audit checks a run (rule_window.busiest_window: at most R flow-mods in any 1 s, counting
both masters), where the old behaviour (an empty window) is caught; and against a real etcd the
master's record round trip and a deposed master's write refused (known-bad)."""
import types
import uuid

import pytest

from etcd_fixtures import client, etcd_plain  # noqa: F401  (fixtures)
from exo_common.etcd import Election, revoke_leader
from exo_controller.failover import election_prefix
from exo_controller.flows import CacheRule
from exo_controller.ratewin_store import (CLOCK_GUARD_S, BatchRecord, EtcdRateWindowStore, RateWindowStoreError,
                                          decode, encode, prune, seed_leave_times)
from exo_controller.rule_updater import CLOCK_RESOLUTION_S, RuleUpdater
from exo_topo.rule_window import busiest_window

R = 10
RTT = 0.01  # barrier round trip of the simulated switch


def test_seed_counts_confirmed_until_their_second_is_over_and_unconfirmed_until_role_at_plus_1s():
    record = [BatchRecord(0.0, 3, confirmed_at=0.01), BatchRecord(0.5, 2, confirmed_at=0.51),
              BatchRecord(0.9, 4)]  # the last one: decided, never confirmed (the master died)
    got = seed_leave_times(record, role_at=1.02, window_cap=R, guard_s=0.0)
    # the first batch left at 1.011, before role_at; the unconfirmed one stays until role_at + 1 s
    assert got == [0.51 + 1 + CLOCK_RESOLUTION_S] * 2 + [2.02] * 4
    # the guard (the old master's clock may be behind ours) is added to every entry: with it the
    # first batch still counts
    with_guard = seed_leave_times(record, role_at=1.02, window_cap=R)
    assert with_guard == pytest.approx([0.011 + 1 + CLOCK_GUARD_S] * 3 + [t + CLOCK_GUARD_S for t in got])
    # No record at all (first master, or etcd lost it): a full window until role_at + 1 s.
    assert seed_leave_times(None, 1.0, R, guard_s=0.0) == [2.0] * R
    assert seed_leave_times([], 1.0, R) == []  # a record with nothing in the last second


def test_prune_keeps_what_the_senders_window_still_holds():
    batches = [BatchRecord(0.0, 1, confirmed_at=0.01), BatchRecord(0.2, 1, failed_at=0.3), BatchRecord(0.4, 1)]
    assert prune(batches, 1.0) == batches
    assert prune(batches, 1.02) == batches[1:]
    assert prune(batches, 5.0) == batches[2:]  # in flight: kept until it ends


def test_record_values_round_trip_and_bad_ones_name_the_key():
    batches = [BatchRecord(1.5, 3, confirmed_at=1.52), BatchRecord(2.0, 1, failed_at=3.0)]
    assert decode(encode(batches)) == batches and decode(None) is None
    for bad in (b"nope", b'{"batches": [{"n": 1}]}', b'{"batches": [{"decided_at": 1, "n": -1}]}'):
        with pytest.raises(ValueError, match="etcd key ratewin"):
            decode(bad)


# ---------------------------------------------------------------- a failover, simulated

def updater() -> RuleUpdater:
    up = RuleUpdater({"cache1": 1}, capacity=10_000, rate=R)
    up.switch_connected({})  # a table that is ours: no statics, only Ruleset 2 work
    up.add([CacheRule(h << 8, "cache1") for h in range(1, 200)])
    return up


def drive(up: RuleUpdater, t: float, t_end: float, record: list) -> list[tuple[float, float]]:
    """Send whatever up decides until t_end; every flow-mod as (decided, confirmed); `record`
    gets the batches as the master writes them to etcd (ratewin_store)."""
    out = []
    while True:
        wake = up.next_wakeup(t)
        if wake is None or wake >= t_end:
            return out
        t = max(t, wake)
        batch = up.next_batch(t)
        if not batch.mods:
            t += 0.001
            continue
        up.batch_done(batch, now=t + RTT)
        record.append(BatchRecord(t, len(batch), confirmed_at=t + RTT))
        out += [(t, t + RTT)] * len(batch)
        t += RTT


def failover(seed) -> int:
    """The old master sends until it dies at 0.95 s; the switch confirms the new one MASTER at
    role_at = 1.0 s; it seeds its window with seed(record, role_at) and drains the backlog.
    Returns the busiest 1 s the switch saw: the old master's flow-mods at their latest (barrier
    reply), the new one's at their earliest (decision)."""
    old, record = updater(), []
    sent_old = drive(old, 0.0, 0.95, record)
    assert len(sent_old) == R, "the old master filled its window"
    role_at = 1.0
    new = updater()
    new.seed_window(seed(prune(record, role_at), role_at))
    sent_new = drive(new, role_at, 4.0, [])
    assert len(sent_new) >= 2 * R, "the new master resumed rule updates"
    times = [c for _, c in sent_old] + [d for d, _ in sent_new]
    return busiest_window(times, 0.0, 4.0)


def test_the_seeded_window_holds_R_across_a_failover():
    assert failover(lambda record, role_at: seed_leave_times(record, role_at, R)) <= R


def test_the_checker_catches_a_new_master_that_starts_with_an_empty_window():
    # Known-bad: the behaviour before the record existed.
    assert failover(lambda record, role_at: []) > R


def test_without_a_record_the_new_master_waits_a_full_second():
    new = updater()
    new.seed_window(seed_leave_times(None, 1.0, R, guard_s=0.0))
    assert new.budget(1.5) == 0 and new.next_wakeup(1.5) == pytest.approx(2.0)
    assert new.budget(2.0) >= 1


# ---------------------------------------------------------------- against a real etcd

def store_for(client):
    cfg = types.SimpleNamespace(cluster=types.SimpleNamespace(name=f"t-{uuid.uuid4().hex[:8]}"))
    election = Election(client, election_prefix(cfg), "c1", 1)
    election.campaign(timeout_s=5)
    return EtcdRateWindowStore(cfg, types.SimpleNamespace(client=client, election=election)), election


def test_the_masters_record_round_trips(client):
    store, election = store_for(client)
    assert store.load() is None
    store.decided(100.0, 3)
    assert store.load() == [BatchRecord(100.0, 3)]
    store.finished(100.02, confirmed=True)
    store.decided(100.5, 2)
    store.finished(100.6, confirmed=False)
    assert store.load() == [BatchRecord(100.0, 3, confirmed_at=100.02), BatchRecord(100.5, 2, failed_at=100.6)]
    store.decided(101.1, 1)  # the first batch left the window at 101.021: no longer carried
    assert [b.decided_at for b in store.load()] == [100.5, 101.1]
    election.resign()


def test_a_deposed_masters_record_write_is_refused(client):
    store, election = store_for(client)
    store.decided(100.0, 1)
    revoke_leader(client, election.lease_id)
    with pytest.raises(RateWindowStoreError, match="no longer the elected master"):
        store.decided(100.1, 5)  # known-bad: a master that lost its election
    assert store.load() == [BatchRecord(100.0, 1)]
