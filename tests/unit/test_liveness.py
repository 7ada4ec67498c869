"""The cache node liveness state machine (exo_controller.liveness) against a fake clock: miss
counting, port events, withdrawal -> forget (with retries) -> reset -> rejoin, stale answers,
the sync of a freshly started controller, metrics."""
import pytest

from exo_controller.liveness import (DOWN, FORGET, FORGET_RETRY_S, REJOINED, REJOINING, RESET, SYNC, UP,
                                     WITHDRAW, Action, Liveness)

PORTS = {"c1": 11, "c2": 12}
DBS = ["d1", "d2"]


def kinds(actions):
    return [(a.kind, a.node, a.db) for a in actions]


def fresh(misses=3, need_sync=False):
    return Liveness(PORTS, DBS, misses, need_sync=need_sync)


def take_down(lv, node="c1", now=1.0):
    out = []
    for i in range(lv.threshold):
        out += lv.heartbeat(node, False, now + i * 0.1)
    assert lv.state(node) == DOWN
    return out


def test_down_after_consecutive_misses_only():
    lv = fresh()
    assert lv.heartbeat("c1", False, 0.0) == [] and lv.heartbeat("c1", False, 0.1) == []
    assert lv.heartbeat("c1", True, 0.2) == []  # an answer resets the count
    assert lv.heartbeat("c1", False, 0.3) == [] and lv.heartbeat("c1", False, 0.4) == []
    assert lv.state("c1") == UP
    acts = lv.heartbeat("c1", False, 0.5)
    assert kinds(acts) == [(WITHDRAW, "c1", None)] and lv.state("c1") == DOWN
    assert lv.heartbeat("c1", False, 0.6) == []  # no second withdrawal while DOWN
    assert lv.state("c2") == UP
    m = lv.metrics()
    assert m["cache_node_state c1"] == 1 and m["cache_node_state c2"] == 0
    assert m["cache_nodes_down"] == 1 and m["cache_node_downs"] == 1 and m["cache_node_heartbeat_misses"] == 6


@pytest.mark.parametrize("misses", [1, 5])
def test_configurable_misses(misses):
    lv = fresh(misses)
    for i in range(misses - 1):
        assert lv.heartbeat("c2", False, i) == []
    assert kinds(lv.heartbeat("c2", False, 9)) == [(WITHDRAW, "c2", None)]


def test_port_down_declares_down_at_once():
    lv = fresh()
    assert lv.port_status(99, True, 0.0) == []  # not a cache node's port
    acts = lv.port_status(12, True, 0.0, "link down")
    assert kinds(acts) == [(WITHDRAW, "c2", None)] and lv.state("c2") == DOWN
    assert lv.port_status(12, True, 0.1) == []  # already DOWN
    # answering over the control network is not enough while the port is down
    assert lv.heartbeat("c2", True, 0.2) == [] and lv.state("c2") == DOWN
    assert lv.port_status(12, False, 0.3) == []
    lv.heartbeat("c2", True, 0.4)
    assert lv.state("c2") == REJOINING


def test_withdrawn_then_forget_every_db_node_then_reset_then_up():
    lv = fresh()
    take_down(lv, now=10.0)  # declared DOWN at 10.2
    assert lv.heartbeat("c1", True, 10.3) == [] and lv.state("c1") == REJOINING  # waits for the withdrawal
    acts = lv.withdrawn("c1", 10.45)
    assert kinds(acts) == [(FORGET, "c1", "d1"), (FORGET, "c1", "d2")]
    gen = acts[0].gen
    assert lv.metrics()["withdraw_s_last"] == pytest.approx(0.25)
    assert lv.metrics()["withdraw_ms_last"] == pytest.approx(250.0)
    assert lv.metrics()["cache_node_withdrawals"] == 1
    assert lv.withdrawn("c1", 10.5) == []  # a repeated confirmation changes nothing
    assert lv.forget_result("c1", "d1", gen, True, 10.5) == []  # d2 still missing: no reset yet
    assert kinds(lv.forget_result("c1", "d2", gen, True, 10.6)) == [(RESET, "c1", None)]
    assert lv.heartbeat("c1", True, 10.7) == []  # the reset is in flight: not sent twice
    assert lv.state("c1") == REJOINING
    acts = lv.reset_result("c1", gen, True, 10.8)
    assert kinds(acts) == [(REJOINED, "c1", None)] and lv.state("c1") == UP
    m = lv.metrics()
    assert m["cache_node_rejoins"] == 1 and m["cache_nodes_down"] == 0 and m["cache_node_forgets"] == 2


def test_reset_only_after_every_forget_even_if_node_answers_first():
    lv = fresh()
    take_down(lv)
    gen = lv.gen("c1")
    lv.withdrawn("c1", 2.0)
    lv.forget_result("c1", "d1", gen, True, 2.0)
    lv.forget_result("c1", "d2", gen, True, 2.0)
    assert lv.state("c1") == DOWN  # forgotten, but not answering: no reset
    assert kinds(lv.heartbeat("c1", True, 3.0)) == [(RESET, "c1", None)]


def test_failed_forget_is_retried_every_100ms_until_answered():
    lv = fresh()
    take_down(lv)
    gen = lv.gen("c1")
    lv.withdrawn("c1", 5.0)
    lv.forget_result("c1", "d1", gen, True, 5.01)
    assert lv.forget_result("c1", "d2", gen, False, 5.02, "UNAVAILABLE") == []
    assert lv.next_due() == pytest.approx(5.02 + FORGET_RETRY_S)
    assert lv.due(5.1) == []
    acts = lv.due(5.13)
    assert acts == [Action(FORGET, "c1", "d2", gen)]
    assert lv.due(5.5) == []  # in flight: not sent again
    lv.forget_result("c1", "d2", gen, False, 5.6)
    assert lv.due(5.69) == [] and len(lv.due(5.71)) == 1
    lv.heartbeat("c1", True, 5.72)
    assert lv.state("c1") == REJOINING
    assert kinds(lv.forget_result("c1", "d2", gen, True, 5.8)) == [(RESET, "c1", None)]
    assert lv.metrics()["cache_node_forget_failures"] == 2


def test_failed_reset_is_retried_on_next_heartbeat():
    lv = fresh()
    take_down(lv)
    gen = lv.gen("c1")
    lv.withdrawn("c1", 1.0)
    for db in DBS:
        lv.forget_result("c1", db, gen, True, 1.0)
    assert kinds(lv.heartbeat("c1", True, 1.1)) == [(RESET, "c1", None)]
    assert lv.reset_result("c1", gen, False, 1.2, "UNIMPLEMENTED") == []
    assert lv.state("c1") == REJOINING
    assert kinds(lv.heartbeat("c1", True, 1.3)) == [(RESET, "c1", None)]
    assert kinds(lv.reset_result("c1", gen, True, 1.4)) == [(REJOINED, "c1", None)]


def test_rejoining_node_that_fails_again_is_withdrawn_again_and_old_answers_are_ignored():
    lv = fresh()
    take_down(lv)
    old = lv.gen("c1")
    lv.withdrawn("c1", 1.0)
    lv.heartbeat("c1", True, 1.1)
    assert lv.state("c1") == REJOINING
    acts = take_down(lv, now=2.0)
    assert kinds(acts) == [(WITHDRAW, "c1", None)] and lv.gen("c1") == old + 1
    # answers of the earlier episode change nothing
    assert lv.forget_result("c1", "d1", old, True, 2.5) == [] and lv.forget_result("c1", "d2", old, True, 2.5) == []
    assert lv.reset_result("c1", old, True, 2.5) == []
    lv.heartbeat("c1", True, 2.6)
    assert lv.state("c1") == REJOINING  # needs this episode's withdrawal and forgets
    assert kinds(lv.withdrawn("c1", 2.7)) == [(FORGET, "c1", "d1"), (FORGET, "c1", "d2")]
    assert lv.metrics()["cache_node_downs"] == 2


def test_port_down_while_rejoining():
    lv = fresh()
    take_down(lv)
    lv.heartbeat("c1", True, 1.0)
    assert kinds(lv.port_status(11, True, 1.1, "deleted")) == [(WITHDRAW, "c1", None)]
    assert lv.state("c1") == DOWN


def test_fresh_controller_syncs_each_node_once():
    lv = fresh(need_sync=True)
    assert not lv.synced("c1")
    acts = lv.heartbeat("c1", True, 0.0)
    assert kinds(acts) == [(SYNC, "c1", None)]
    assert lv.heartbeat("c1", True, 0.1) == []  # in flight
    assert lv.sync_valid("c1", acts[0].gen)
    assert lv.sync_result("c1", acts[0].gen, False, 0.2, "DEADLINE_EXCEEDED")
    retry = lv.heartbeat("c1", True, 0.3)
    assert kinds(retry) == [(SYNC, "c1", None)]
    assert lv.sync_result("c1", retry[0].gen, True, 0.4) and lv.synced("c1")
    assert lv.heartbeat("c1", True, 0.5) == []


def test_sync_result_of_a_node_that_went_down_is_stale():
    lv = fresh(need_sync=True)
    (sync,) = lv.heartbeat("c2", True, 0.0)
    lv.port_status(12, True, 0.1)
    assert not lv.sync_valid("c2", sync.gen)
    assert lv.sync_result("c2", sync.gen, True, 0.2) is False
    # a node declared DOWN needs no sync: after rejoining it is empty
    lv.port_status(12, False, 0.3)
    lv.withdrawn("c2", 0.3)
    for db in DBS:
        lv.forget_result("c2", db, lv.gen("c2"), True, 0.3)
    (reset,) = lv.heartbeat("c2", True, 0.4)
    lv.reset_result("c2", reset.gen, True, 0.5)
    assert lv.state("c2") == UP and lv.synced("c2")
    assert lv.heartbeat("c2", True, 0.6) == []


def test_from_config(cfg):
    lv = Liveness.from_config(cfg)
    assert lv.threshold == cfg.controller.heartbeat_misses == 3
    assert lv.node_of_port(11) == "cache1" and lv.db_nodes == ["db1", "db2", "db3"]
    assert set(lv.states().values()) == {UP}
