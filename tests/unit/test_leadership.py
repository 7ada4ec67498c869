"""controller/exo_controller/leadership.py: events in, actions out (docs/design/replication.md, 5.1, 5.4)."""
from __future__ import annotations

import pytest

from exo_controller.leadership import (MASTER, PROBE_OK, PROBE_REFUSED, PROBE_TIMEOUT, SLAVE, Leader, Leadership,
                                       Resign, RevokeLeader, SendRoleRequest, StartAdopting, StopSending)

OTHER = Leader("c2", 0x77, 5)


def run(m: Leadership, steps):
    """steps: (method name, args...) -> the actions of the last step; every step's actions are
    checked against the expected ones when a step is (name, args, expected)."""
    for step in steps:
        name, args, expected = step
        got = getattr(m, name)(*args)
        assert got == expected, f"{name}{args}: {got} != {expected}"


# Each case: a sequence of (event, args, expected actions), from a fresh standby "c1".
CASES = {
    "a new connection is made SLAVE first, with the known master's generation": [
        ("leader_changed", (OTHER,), []),
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 5)]),
        ("role_reply", (SLAVE, 5), []),
    ],
    "no leader known: SLAVE with generation 0, again with the master's once it is known": [
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 0)]),
        ("role_stale", (), []),
        ("leader_changed", (OTHER,), [SendRoleRequest(SLAVE, 5)]),
        ("leader_changed", (OTHER,), []),
        ("leader_changed", (Leader("c3", 0x78, 7),), [SendRoleRequest(SLAVE, 7)]),
    ],
    "winning the election asks for MASTER; only the MASTER reply starts adoption": [
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 0)]),
        ("role_reply", (SLAVE, 0), []),
        ("elected_as", (9,), [SendRoleRequest(MASTER, 9)]),
        ("role_reply", (MASTER, 8), []),  # not our generation
        ("role_reply", (MASTER, 9), [StartAdopting()]),
        ("role_reply", (MASTER, 9), []),  # once
    ],
    "elected before the switch connects: SLAVE then MASTER on connect": [
        ("elected_as", (9,), []),
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 9), SendRoleRequest(MASTER, 9)]),
        ("role_reply", (MASTER, 9), [StartAdopting()]),
    ],
    "STALE in answer to MASTER: stop and resign": [
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 0)]),
        ("elected_as", (9,), [SendRoleRequest(MASTER, 9)]),
        ("role_stale", (), [StopSending("ROLE_REQUEST(MASTER) refused STALE: a newer master exists"),
                            Resign("a newer master exists (STALE)")]),
    ],
    "STALE in answer to SLAVE: nothing (the connection stays EQUAL, we never write)": [
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 0)]),
        ("role_stale", (), []),
    ],
    "IS_SLAVE on a flow-mod of a master: fenced, stop and resign": [
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 0)]),
        ("elected_as", (9,), [SendRoleRequest(MASTER, 9)]),
        ("role_reply", (MASTER, 9), [StartAdopting()]),
        ("demoted", ("IS_SLAVE",), [StopSending("IS_SLAVE"), Resign("IS_SLAVE")]),
    ],
    "losing the lease stops writing": [
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 0)]),
        ("elected_as", (9,), [SendRoleRequest(MASTER, 9)]),
        ("role_reply", (MASTER, 9), [StartAdopting()]),
        ("lost_lease", (), [StopSending("lost the election lease")]),
        ("role_reply", (MASTER, 9), []),  # a late reply does not bring writing back
    ],
    "two refused Pings in a row revoke the master's lease, once": [
        ("leader_changed", (OTHER,), []),
        ("probe", (PROBE_REFUSED,), []),
        ("probe", (PROBE_REFUSED,), [RevokeLeader("c2", 0x77)]),
        ("probe", (PROBE_REFUSED,), []),
    ],
    "a refusal, then a success: no revoke": [
        ("leader_changed", (OTHER,), []),
        ("probe", (PROBE_REFUSED,), []),
        ("probe", (PROBE_OK,), []),
        ("probe", (PROBE_REFUSED,), []),
    ],
    "deadlines never revoke (a slow master keeps its job until its lease expires)": [
        ("leader_changed", (OTHER,), []),
        *[("probe", (PROBE_TIMEOUT,), [])] * 5,
        ("probe", (PROBE_REFUSED,), []),
        ("probe", (PROBE_TIMEOUT,), []),
        ("probe", (PROBE_REFUSED,), []),
    ],
    "a new leader resets the count": [
        ("leader_changed", (OTHER,), []),
        ("probe", (PROBE_REFUSED,), []),
        ("leader_changed", (Leader("c3", 0x78, 6),), []),
        ("probe", (PROBE_REFUSED,), []),
        ("probe", (PROBE_REFUSED,), [RevokeLeader("c3", 0x78)]),
    ],
    "the master does not probe itself": [
        ("elected_as", (9,), []),
        ("leader_changed", (Leader("c1", 0x11, 9),), []),
        ("probe", (PROBE_REFUSED,), []),
        ("probe", (PROBE_REFUSED,), []),
    ],
    "a master cut off from the switch for more than 2 s resigns, once": [
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 0)]),
        ("elected_as", (9,), [SendRoleRequest(MASTER, 9)]),
        ("role_reply", (MASTER, 9), [StartAdopting()]),
        ("switch_disconnected", (10.0,), [StopSending("switch disconnected")]),
        ("tick", (11.9,), []),
        ("tick", (12.1,), [Resign("switch disconnected for more than 2s")]),
        ("tick", (13.0,), []),
    ],
    "a reconnect of a master: SLAVE, MASTER again, adopt again only after the reply": [
        ("switch_connected", (0.0,), [SendRoleRequest(SLAVE, 0)]),
        ("elected_as", (9,), [SendRoleRequest(MASTER, 9)]),
        ("role_reply", (MASTER, 9), [StartAdopting()]),
        ("switch_disconnected", (1.0,), [StopSending("switch disconnected")]),
        ("switch_connected", (1.5,), [SendRoleRequest(SLAVE, 9), SendRoleRequest(MASTER, 9)]),
        ("role_reply", (MASTER, 9), [StartAdopting()]),
    ],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_leadership_table(case):
    run(Leadership("c1"), CASES[case])


def test_a_standby_is_never_master():
    m = Leadership("c1")
    m.leader_changed(OTHER)
    m.switch_connected(0.0)
    m.role_reply(MASTER, 5)  # not asked for: ignored
    assert not m.is_master() and m.master_name() == "c2"


def test_single_controller_adopts_without_role_requests():
    """Without etcd: today's behaviour, every connection adopted at once, no role request."""
    m = Leadership("controller", single=True)
    assert m.switch_connected(0.0) == [StartAdopting()]
    assert m.is_master() and m.master_name() == "controller"
    assert m.probe(PROBE_REFUSED) == [] and m.probe(PROBE_REFUSED) == []


def test_known_bad_a_table_that_expects_a_revoke_on_one_refusal_fails():
    """The checker can fail: one refusal is not enough."""
    with pytest.raises(AssertionError):
        run(Leadership("c1"), [("leader_changed", (OTHER,), []),
                               ("probe", (PROBE_REFUSED,), [RevokeLeader("c2", 0x77)])])
