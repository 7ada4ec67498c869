"""Measurements of the chaos campaign over histories: throughput recovery and lost writes."""
from exo_chaos import metrics

S = 1_000_000_000


def op(op, key, value, invoke_s, complete_s, outcome="ok", result=None):
    return {"op": op, "key": key, "value": value, "invoke_ns": int(invoke_s * S),
            "complete_ns": None if complete_s is None else int(complete_s * S),
            "outcome": outcome, "result": result}


def steady(rate, start_s, end_s):
    n = int((end_s - start_s) * rate)
    return [int((start_s + i / rate) * S) for i in range(n)]


def test_recovery_zero_when_throughput_never_dips():
    t = steady(100, 0, 20)
    assert metrics.recovery_s(t, 10 * S, 7 * S) == 0.0


def test_recovery_is_time_until_throughput_holds_again():
    t = steady(100, 0, 10) + steady(100, 11.4, 25)  # 1.4 s outage from 10 s
    r = metrics.recovery_s(t, 10 * S, 7 * S)
    assert 1.3 <= r <= 1.5


def test_recovery_none_when_never_back():
    t = steady(100, 0, 10)
    assert metrics.recovery_s(t, 10 * S, 7 * S, window_s=5) is None


def test_final_value_from_last_acked_write_is_not_lost():
    ops = [op("put", b"k", b"1", 0, 1), op("put", b"k", b"2", 2, 3)]
    assert metrics.lost_acked_writes(ops, {b"k": b"2"}) == []


def test_final_value_older_than_an_acked_write_is_lost():
    ops = [op("put", b"k", b"1", 0, 1), op("put", b"k", b"2", 2, 3)]
    lost = metrics.lost_acked_writes(ops, {b"k": b"1"})
    assert [x["key"] for x in lost] == [b"k"]


def test_concurrent_acked_writes_either_may_win():
    ops = [op("put", b"k", b"1", 0, 3), op("put", b"k", b"2", 1, 2)]
    assert metrics.lost_acked_writes(ops, {b"k": b"1"}) == []
    assert metrics.lost_acked_writes(ops, {b"k": b"2"}) == []


def test_unknown_write_may_or_may_not_be_final():
    ops = [op("put", b"k", b"1", 0, 1), op("put", b"k", b"2", 2, None, outcome="unknown")]
    assert metrics.lost_acked_writes(ops, {b"k": b"1"}) == []
    assert metrics.lost_acked_writes(ops, {b"k": b"2"}) == []


def test_acked_delete_then_old_value_is_lost_and_failed_write_never_counts():
    ops = [op("put", b"k", b"1", 0, 1), op("delete", b"k", None, 2, 3),
           op("put", b"k", b"9", 4, 5, outcome="fail")]
    assert metrics.lost_acked_writes(ops, {b"k": None}) == []
    assert len(metrics.lost_acked_writes(ops, {b"k": b"1"})) == 1
    assert len(metrics.lost_acked_writes(ops, {b"k": b"9"})) == 1


def test_initial_value_only_without_acked_writes():
    assert metrics.lost_acked_writes([], {b"k": b"0"}, {b"k": b"0"}) == []
    ops = [op("put", b"k", b"1", 0, 1)]
    assert len(metrics.lost_acked_writes(ops, {b"k": b"0"}, {b"k": b"0"})) == 1
