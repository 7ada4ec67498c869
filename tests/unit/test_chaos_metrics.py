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


# ---- the dip of one fault, measured from its injection (known-bad inputs for the metric) ----

def test_a_1_5_s_outage_shows_from_the_injection():
    # Throughput stops at the injection (10 s) for 1.5 s; the fault is healed at 11.5 s, when
    # traffic resumes at once. Measured from the heal (the old recovery_s of link faults and db
    # kills) that is 0; from the injection it must be at least the 1.5 s outage.
    t = steady(100, 0, 10) + steady(100, 11.5, 25)
    assert metrics.recovery_s(t, int(11.5 * S), 7 * S, baseline_to_ns=10 * S) == 0.0
    d = metrics.dip(t, 10 * S, int(11.5 * S), 7 * S)
    assert 1.5 <= d["recovery_from_inject_s"] <= 1.7
    assert d["depth"] == 0.0
    assert 1.5 <= d["length_s"] <= 1.7
    assert d["baseline_per_s"] == 100.0


def test_a_fault_that_never_recovers_is_none_not_left_out():
    t = steady(100, 0, 10)
    d = metrics.dip(t, 10 * S, 11 * S, 7 * S)
    assert d["recovery_from_inject_s"] is None
    assert d["depth"] == 0.0
    assert d["length_s"] >= 10.0
    # Stopping the data early (the next fault, the end of the load) is not a recovery either.
    assert metrics.dip(t, 10 * S, 11 * S, 7 * S, end_ns=12 * S)["recovery_from_inject_s"] is None


def test_no_dip_is_zero_with_depth_near_one():
    t = steady(100, 0, 30)
    d = metrics.dip(t, 10 * S, 16 * S, 7 * S)
    assert d["recovery_from_inject_s"] == 0.0
    assert d["length_s"] == 0.0
    assert 0.95 <= d["depth"] <= 1.05


def test_a_partial_dip_has_its_depth_and_length():
    # Half the throughput for 2 s from the injection: below the 80% threshold for 2 s.
    t = steady(100, 0, 10) + steady(50, 10, 12) + steady(100, 12, 25)
    d = metrics.dip(t, 10 * S, 10 * S, 7 * S)
    assert 1.9 <= d["recovery_from_inject_s"] <= 2.1
    assert 0.45 <= d["depth"] <= 0.55
    assert 1.9 <= d["length_s"] <= 2.1


def test_baseline_is_the_time_before_the_fault_not_the_fault_itself():
    # A 6 s link fault that halves throughput; recovery_s from the heal must compare with the
    # rate before the injection (a baseline taken over the fault would call 50% "normal").
    t = steady(100, 0, 10) + steady(50, 10, 16) + steady(100, 16, 30)
    assert metrics.recovery_s(t, 16 * S, 7 * S, baseline_to_ns=10 * S) == 0.0
    d = metrics.dip(t, 10 * S, 16 * S, 7 * S)
    assert 5.9 <= d["recovery_from_inject_s"] <= 6.1
    assert 5.9 <= d["length_s"] <= 6.1


# ---- overlap_share ----

def test_overlap_counts_only_foreign_acknowledged_writes_on_the_same_key():
    a = lambda *x, **k: {**op(*x, **k), "client": "a"}  # noqa: E731
    b = lambda *x, **k: {**op(*x, **k), "client": "b"}  # noqa: E731
    ops = [
        a("put", b"k", b"1", 0, 2),           # overlaps b's put on k
        b("put", b"k", b"2", 1, 3),           # overlaps a's put on k
        a("get", b"k", None, 2.5, 4),         # overlaps b's put (ends at 3)
        a("get", b"k", None, 5, 6),           # nothing concurrent
        a("put", b"k", b"3", 5.5, 7),         # only its own get
        b("get", b"j", None, 0, 10),          # another key
        b("put", b"k", b"9", 8, None, outcome="unknown"),   # open: never counted as a write
        a("get", b"k", None, 9, 10),          # overlaps only the unknown write
        b("put", b"k", b"8", 11, 12, outcome="fail"),       # failed: no effect
        a("get", b"k", None, 11.5, 12),
    ]
    # 8 completed ok ops (not the unknown or the failed put); overlapping: the first three
    assert metrics.overlap_share(ops) == round(3 / 8, 4)


def test_overlap_sees_an_early_long_foreign_write():
    a = lambda *x, **k: {**op(*x, **k), "client": "a"}  # noqa: E731
    b = lambda *x, **k: {**op(*x, **k), "client": "b"}  # noqa: E731
    ops = [b("put", b"k", b"1", 0, 100), a("put", b"k", b"2", 1, 2), a("put", b"k", b"3", 3, 4),
           a("get", b"k", None, 50, 51)]
    assert metrics.overlap_share(ops) == 1.0
    assert metrics.overlap_share([]) is None


def test_overlap_agrees_with_brute_force():
    import random
    rng = random.Random(7)
    for _ in range(200):
        ops = []
        for _ in range(rng.randrange(1, 30)):
            inv = rng.uniform(0, 10)
            done = None if rng.random() < 0.1 else inv + rng.uniform(0, 2)
            ops.append({**op(rng.choice(["get", "put", "delete"]), rng.choice([b"k", b"j"]), b"v",
                             inv, done, outcome=rng.choice(["ok", "ok", "ok", "fail"])
                             if done is not None else "unknown"),
                        "client": rng.choice("abc")})
        done_ok = [o for o in ops if o["outcome"] == "ok"]
        writes = [w for w in done_ok if w["op"] != "get"]
        hits = sum(any(w["key"] == o["key"] and w["client"] != o["client"]
                       and w["invoke_ns"] <= o["complete_ns"] and w["complete_ns"] >= o["invoke_ns"]
                       for w in writes) for o in done_ok)
        want = round(hits / len(done_ok), 4) if done_ok else None
        assert metrics.overlap_share(ops) == want


def test_concurrency_counts_open_ops_per_key():
    ops = [op("put", b"k", b"1", 0, 3), op("get", b"k", None, 1, 2), op("get", b"k", None, 1.5, 4),
           op("get", b"j", None, 1, 2), op("put", b"k", b"2", 5, None, outcome="unknown")]
    # k: 1 open at 0, 2 at 1, 3 at 1.5 -> mean 2, max 3; j: 1
    assert metrics.concurrency(ops) == {"mean_open_max": 2.0, "open_max": 3}
