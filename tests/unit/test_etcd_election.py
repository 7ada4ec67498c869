"""exo_common.etcd.Election against a real etcd: one leader at a time, in campaign order; the
hand-over when the leader's lease is revoked (revoke_leader, what a standby does to a dead
master; the time is printed); known-bad: a guarded write of a deposed leader is refused."""
import threading
import time
import uuid

import pytest

from etcd_fixtures import client, etcd_plain  # noqa: F401  (fixtures)
from exo_common.etcd import Election, EtcdError, LeaderInfo, op_put, revoke_leader

TTL = 1  # etcd's minimum lease TTL with the test timing (docs/etcd.md)


def prefix() -> str:
    return f"/exo/t-{uuid.uuid4().hex[:8]}/leader"


class Candidate:
    """An Election campaigning on its own thread."""

    def __init__(self, client, pfx, name):
        self.e = Election(client, pfx, name, TTL)
        self.won_at = None
        self.generation = None
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.generation = self.e.campaign(timeout_s=10)
            self.won_at = time.monotonic()
        except EtcdError as err:
            self.error = err

    def wait_won(self, timeout=5.0) -> bool:
        self.thread.join(timeout)
        return self.won_at is not None


def wait_candidates(client, pfx, n, timeout=5.0):
    deadline = time.monotonic() + timeout
    while len(client.get_prefix(pfx + "/")) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(client.get_prefix(pfx + "/")) == n


def test_the_first_candidate_leads_and_its_generation_is_its_key_revision(client):
    pfx = prefix()
    a = Election(client, pfx, "ctl-a", TTL)
    gen = a.campaign(timeout_s=5)
    assert a.is_leader()
    kv = client.get(a.key)
    assert a.key == f"{pfx}/{a.lease_id:x}" and kv.value == b"ctl-a" and kv.create_revision == gen
    assert a.leader() == LeaderInfo("ctl-a", a.lease_id, gen)
    assert a.campaign() == gen  # already leading: the same term
    a.resign()
    assert not a.is_leader() and a.leader() is None and client.get(a.key) is None


def test_revoking_the_leaders_lease_hands_over_to_the_next_candidate(client):
    pfx = prefix()
    a = Election(client, pfx, "ctl-a", TTL)
    gen_a = a.campaign(timeout_s=5)
    b = Candidate(client, pfx, "ctl-b")
    wait_candidates(client, pfx, 2)  # b's key first: candidates lead in the order their keys were made
    c_ = Candidate(client, pfx, "ctl-c")
    wait_candidates(client, pfx, 3)
    time.sleep(TTL * 1.5)  # longer than a TTL: the standbys' keep-alives hold their keys
    assert not b.wait_won(0) and not c_.wait_won(0) and a.is_leader()
    # A standby deposes the master: what it does after two refused Pings (replication.md 5.4).
    t0 = time.monotonic()
    assert revoke_leader(client, a.leader().lease_id) is True
    assert b.wait_won(5), b.error
    handover = b.won_at - t0
    print(f"\nhand-over after LeaseRevoke: {handover * 1000:.1f} ms (generation {gen_a} -> {b.generation})")
    assert handover < 0.5
    assert b.generation > gen_a and b.e.is_leader()
    assert not c_.wait_won(0.2)  # campaign order: c is after b
    deadline = time.monotonic() + 2
    while a.is_leader() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not a.is_leader()  # a sees its key's deletion
    assert revoke_leader(client, a.lease_id) is False  # already gone
    b.e.resign()
    assert c_.wait_won(5) and c_.generation > b.generation
    c_.e.resign()
    a.resign()


def test_a_deposed_leaders_guarded_write_is_refused(client):
    pfx = prefix()
    a = Election(client, pfx, "ctl-a", TTL)
    a.campaign(timeout_s=5)
    ok, _ = a.guarded_txn([op_put(pfx + "-state", b"from a")])
    assert ok
    b = Candidate(client, pfx, "ctl-b")
    wait_candidates(client, pfx, 2)
    revoke_leader(client, a.lease_id)
    assert b.wait_won(5)
    # Known-bad: a still believes nothing or is slow to notice; its write must fail all the same.
    ok, _ = a.guarded_txn([op_put(pfx + "-state", b"from deposed a")])
    assert not ok
    assert client.get(pfx + "-state").value == b"from a"
    assert b.e.guarded_txn([op_put(pfx + "-state", b"from b")])[0]
    assert client.get(pfx + "-state").value == b"from b"
    b.e.resign()
    assert not b.e.guarded_txn([op_put(pfx + "-state", b"after resign")])[0]
    a.resign()


def test_a_leader_that_stops_renewing_loses_by_lease_expiry(client):
    pfx = prefix()
    lost = threading.Event()
    a = Election(client, pfx, "ctl-a", TTL, on_lost=lost.set)
    a.campaign(timeout_s=5)
    b = Candidate(client, pfx, "ctl-b")
    wait_candidates(client, pfx, 2)
    a._stop.set()  # a's keep-alive thread stops, as if a were frozen (the lease runs out)
    t0 = time.monotonic()
    assert b.wait_won(5), b.error
    print(f"\nhand-over by lease expiry (TTL {TTL} s): {b.won_at - t0:.2f} s")
    assert 0.5 < b.won_at - t0 < 3.0
    a._stop.clear()
    assert not a.guarded_txn([op_put(pfx + "-x", b"late")])[0]
    b.e.resign()
    a.resign()


def test_observe_reports_each_leader_change(client):
    pfx = prefix()
    seen, lock = [], threading.Lock()

    def cb(info):
        with lock:
            seen.append(None if info is None else info.name)
    obs = Election(client, pfx, "observer", TTL)
    w = obs.observe(cb)
    a = Election(client, pfx, "ctl-a", TTL)
    a.campaign(timeout_s=5)
    b = Candidate(client, pfx, "ctl-b")
    wait_candidates(client, pfx, 2)
    a.resign()
    assert b.wait_won(5)
    b.e.resign()
    deadline = time.monotonic() + 3
    while seen[-1:] != [None] and time.monotonic() < deadline:
        time.sleep(0.01)
    w.cancel()
    assert seen == [None, "ctl-a", "ctl-b", None]


def test_campaign_times_out_and_withdraws_and_resign_cancels_a_campaign(client):
    pfx = prefix()
    a = Election(client, pfx, "ctl-a", TTL)
    a.campaign(timeout_s=5)
    b = Election(client, pfx, "ctl-b", TTL)
    with pytest.raises(EtcdError, match="not the leader after the campaign's timeout"):
        b.campaign(timeout_s=0.3)
    assert [kv.value for kv in client.get_prefix(pfx + "/")] == [b"ctl-a"]  # b's key withdrawn
    c_ = Candidate(client, pfx, "ctl-c")
    wait_candidates(client, pfx, 2)
    c_.e.resign()
    c_.thread.join(5)
    assert c_.error is not None and "cancelled" in str(c_.error)
    a.resign()


def test_bad_election_arguments_are_named(client):
    for args, says in [(("", "n", 1), "prefix"), (("/p", "", 1), "name"), (("/p", "n", 0), "ttl_s"),
                       (("/p", "n", 1.5), "ttl_s")]:
        with pytest.raises(EtcdError, match=says):
            Election(client, *args)
    with pytest.raises(EtcdError, match="before campaign"):
        Election(client, "/p", "n", 1).guarded_txn([])


def test_a_broken_watch_of_the_leaders_own_key_is_renewed_not_taken_for_a_lost_lead(client):
    # What happens when the etcd member a leader's watch used dies (docs/etcd.md, 3 members): the
    # key lives on in the other members, so the leader must watch it again, not step down.
    pfx = prefix()
    a = Election(client, pfx, "ctl-a", TTL)
    a.campaign(timeout_s=5)
    first = a._own_watch
    first.cancel()
    a._own_watch_broke(EtcdError("etcd watch: UNAVAILABLE: Stream removed (as when a member dies)"))
    assert a.is_leader() and a._own_watch is not first and a._own_watch.active
    revoke_leader(client, a.lease_id)  # the renewed watch still sees the key go
    deadline = time.monotonic() + 2
    while a.is_leader() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not a.is_leader()
    a.resign()
