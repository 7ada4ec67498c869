"""Db node liveness (exo_controller.db_liveness) against a fake clock: misses, restarts seen as a
new incarnation, port events, a DOWN node answering again."""
import pytest

from exo_controller.db_liveness import DOWN, NODE_DOWN, NODE_JOINED, UNKNOWN, UP, DbLiveness, Event

PORTS = {"d0": 3, "d1": 4}


def kinds(events):
    return [(e.kind, e.node, e.incarnation) for e in events]


def test_first_answer_joins_then_misses_declare_down():
    lv = DbLiveness(PORTS, misses=3)
    assert lv.state("d0") == UNKNOWN
    assert kinds(lv.heartbeat("d0", True, 7, 0.0)) == [(NODE_JOINED, "d0", 7)]
    assert lv.heartbeat("d0", True, 7, 0.1) == []
    assert lv.heartbeat("d0", False, 0, 0.2) == [] and lv.heartbeat("d0", False, 0, 0.3) == []
    assert lv.heartbeat("d0", True, 7, 0.35) == []  # an answer resets the count
    for t in (0.4, 0.5):
        assert lv.heartbeat("d0", False, 0, t) == []
    assert kinds(lv.heartbeat("d0", False, 0, 0.6)) == [(NODE_DOWN, "d0", 7)]
    assert lv.state("d0") == DOWN and lv.heartbeat("d0", False, 0, 0.7) == []
    assert lv.up() == {} and lv.down_since("d0") == 0.6
    m = lv.metrics()
    assert m["db_nodes_down"] == 1 and m["db_node_state d0"] == 1 and m["db_node_heartbeat_misses"] == 6


def test_another_incarnation_is_a_restart():
    lv = DbLiveness(PORTS, misses=5)
    lv.heartbeat("d1", True, 1, 0.0)
    ev = lv.heartbeat("d1", True, 2, 0.1)
    assert kinds(ev) == [(NODE_DOWN, "d1", 1), (NODE_JOINED, "d1", 2)]
    assert lv.state("d1") == UP and lv.incarnation("d1") == 2 and lv.metrics()["db_node_restarts"] == 1


def test_down_node_that_answers_joins_again():
    lv = DbLiveness(PORTS, misses=1)
    lv.heartbeat("d0", True, 1, 0.0)
    assert kinds(lv.heartbeat("d0", False, 0, 0.1)) == [(NODE_DOWN, "d0", 1)]
    assert kinds(lv.heartbeat("d0", True, 9, 0.5)) == [(NODE_JOINED, "d0", 9)]
    assert lv.up() == {"d0": 9}


def test_never_seen_node_goes_down_with_incarnation_zero():
    lv = DbLiveness(PORTS, misses=2)
    lv.heartbeat("d1", False, 0, 0.0)
    assert lv.heartbeat("d1", False, 0, 0.1) == [Event(NODE_DOWN, "d1", 0, "2 heartbeats in a row missed", 0.0)]


def test_port_down_declares_down_and_keeps_it_down():
    lv = DbLiveness(PORTS, misses=5)
    lv.heartbeat("d0", True, 1, 0.0)
    assert lv.port_status(99, True, 0.1) == []
    assert kinds(lv.port_status(3, True, 0.1, "link down")) == [(NODE_DOWN, "d0", 1)]
    assert lv.heartbeat("d0", True, 1, 0.2) == [] and lv.state("d0") == DOWN
    lv.port_status(3, False, 0.3)
    assert kinds(lv.heartbeat("d0", True, 1, 0.4)) == [(NODE_JOINED, "d0", 1)]


def test_bad_threshold_is_refused():
    with pytest.raises(ValueError, match="misses"):
        DbLiveness(PORTS, misses=0)


def test_config_field_and_its_errors(cluster_dict):
    from exo_common.config import ConfigError, parse_config, resolve
    cfg = parse_config(cluster_dict)
    assert cfg.replication.db_heartbeat_misses == 5 and DbLiveness.from_config(cfg).threshold == 5
    assert "db_heartbeat_misses" not in resolve(cfg)["replication"]  # the controller's alone
    cluster_dict["replication"] = {"db_heartbeat_misses": 0}
    with pytest.raises(ConfigError, match=r"replication\.db_heartbeat_misses"):
        parse_config(cluster_dict, "c.yaml")


def test_down_carries_the_time_of_the_first_miss():
    lv = DbLiveness(PORTS, misses=3)
    lv.heartbeat("d0", True, 1, 0.0)
    lv.heartbeat("d0", False, 0, 0.4)
    lv.heartbeat("d0", False, 0, 0.5)
    (e,) = lv.heartbeat("d0", False, 0, 0.6)
    assert e.kind == NODE_DOWN and e.since == 0.4  # the executor's last_failover_s starts here
