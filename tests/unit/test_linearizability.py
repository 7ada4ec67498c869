"""exo_chaos.linearizability: known-good and known-bad register histories, unknown and failed
outcomes, per-key reporting, budgets, randomized simulations, a brute-force cross-check, the CLI."""
import itertools
import json
import random

import pytest

from exo_chaos import linearizability as lin
from exo_chaos.linearizability import LINEARIZABLE, UNDECIDED, VIOLATION, check_history
from exo_harness.history import History

S = 1_000_000_000
K = b"k"


def o(kind, value=None, t0=0, t1=1, outcome="ok", key=K, client="c0"):
    """get: value = what it read; put: value written. Times in seconds; t1 None = open."""
    value = value.encode() if isinstance(value, str) else value
    return {"client": client, "op": kind, "key": key,
            "value": value if kind == "put" else None, "invoke_ns": int(t0 * S),
            "complete_ns": None if t1 is None or outcome == "unknown" else int(t1 * S),
            "outcome": outcome, "result": value if kind == "get" and outcome == "ok" else None}


def verdict(ops, initial=None, **kw):
    r = check_history(ops, initial, **kw)
    assert r.keys_checked == len({d["key"] for d in ops})
    vs = {x.verdict for x in r.results}
    return VIOLATION if VIOLATION in vs else UNDECIDED if UNDECIDED in vs else LINEARIZABLE


# ---- known-good and known-bad histories ----

def test_sequential_history_is_linearizable():
    ops = [o("get", None, 0, 1), o("put", "a", 2, 3), o("get", "a", 4, 5), o("put", "b", 6, 7),
           o("get", "b", 8, 9), o("delete", None, 10, 11), o("get", None, 12, 13)]
    r = check_history(ops)
    assert r.ok and r.violations == [] and r.budget_exceeded == []
    assert r.results[0].ok is True and r.results[0].ops == 7 and r.ops == 7


@pytest.mark.parametrize("seen", ["a", "b"])
def test_read_concurrent_with_a_write_may_see_either_value(seen):
    ops = [o("put", "a", 0, 1), o("put", "b", 2, 6, client="c1"), o("get", seen, 3, 4)]
    assert verdict(ops) == LINEARIZABLE


def test_stale_read_after_a_completed_write_is_a_violation():
    ops = [o("put", "a", 0, 1), o("put", "b", 2, 3), o("get", "a", 4, 5)]
    r = check_history(ops)
    assert not r.ok and len(r.violations) == 1
    e = r.violations[0]
    assert e["key"] == "k"
    assert (e["blocked_op"]["op"], e["blocked_op"]["result"]) == ("get", "a")
    assert e["state"] == "b" and e["last_write"]["value"] == "b"
    assert [w["value"] for w in e["writes_of_read_value"]] == ["a"]
    assert "read 'a'" in e["message"] and "holds 'b'" in e["message"]
    json.dumps(r.as_dict())  # JSON-ready as is


def test_read_of_a_value_never_written_is_a_violation():
    ops = [o("put", "a", 0, 1), o("get", "zzz", 0.5, 5, client="c1")]
    r = check_history(ops)
    assert verdict(ops) == VIOLATION
    assert "No operation writes 'zzz'" in r.violations[0]["message"]


def test_new_old_inversion_is_a_violation():
    # the write spans both reads; the reads are sequential: new then old is impossible
    ops = [o("put", "a", 0, 1), o("put", "b", 2, 10, client="c1"),
           o("get", "b", 3, 4), o("get", "a", 5, 6)]
    assert verdict(ops) == VIOLATION
    ops[2]["result"], ops[3]["result"] = b"a", b"b"  # old then new is fine
    assert verdict(ops) == LINEARIZABLE


def test_concurrent_reads_may_see_new_then_old():
    ops = [o("put", "a", 0, 1), o("put", "b", 2, 10, client="c1"),
           o("get", "b", 3, 6), o("get", "a", 5, 8, client="c2")]
    assert verdict(ops) == LINEARIZABLE


def test_unknown_write_later_read_is_linearizable():
    ops = [o("put", "a", 0, 1), o("put", "b", 2, None, "unknown", client="c1"),
           o("put", "c", 5, 6), o("get", "b", 20, 21)]
    assert verdict(ops) == LINEARIZABLE


def test_unknown_write_never_observed_is_linearizable():
    ops = [o("put", "a", 0, 1), o("put", "b", 2, None, "unknown", client="c1"),
           o("get", "a", 20, 21)]
    r = check_history(ops)
    assert r.ok and r.results[0].unknown_writes == 1 and r.results[0].searched == 2


def test_unknown_write_takes_effect_at_most_once():
    ops = [o("put", "b", 0, None, "unknown", client="c1"), o("put", "a", 1, 2),
           o("get", "b", 3, 4), o("put", "c", 5, 6), o("get", "b", 7, 8)]
    assert verdict(ops) == VIOLATION


def test_unknown_write_cannot_be_read_before_its_invoke():
    assert verdict([o("get", "b", 0, 1), o("put", "b", 2, None, "unknown")]) == VIOLATION


def test_unknown_deletes_are_interchangeable_but_each_used_once():
    ops = [o("put", "a", 0, 1), o("delete", None, 1.5, None, "unknown", client="c1"),
           o("delete", None, 1.6, None, "unknown", client="c2"),
           o("get", None, 2, 3), o("put", "b", 4, 5), o("get", None, 6, 7),
           o("put", "c", 8, 9)]
    assert verdict(ops) == LINEARIZABLE
    ops.append(o("get", None, 10, 11))  # a third absent read after a third write: one delete short
    assert verdict(ops) == VIOLATION


def test_failed_write_whose_value_is_read_is_a_violation():
    ops = [o("put", "a", 0, 1), o("put", "b", 2, 3, "fail"), o("get", "b", 4, 5)]
    r = check_history(ops)
    assert not r.ok
    assert [w["outcome"] for w in r.violations[0]["writes_of_read_value"]] == ["fail"]


def test_failed_and_unknown_reads_are_ignored():
    ops = [o("put", "a", 0, 1), o("get", None, 2, 3, "fail"), o("get", None, 4, None, "unknown")]
    r = check_history(ops)
    assert r.ok and r.results[0].searched == 1


def test_delete_then_read_absent_is_linearizable():
    assert verdict([o("put", "a", 0, 1), o("delete", None, 2, 3), o("get", None, 4, 5)]) == LINEARIZABLE


def test_delete_then_read_old_value_is_a_violation():
    ops = [o("put", "a", 0, 1), o("delete", None, 2, 3), o("get", "a", 4, 5)]
    r = check_history(ops)
    assert not r.ok and r.violations[0]["last_write"]["op"] == "delete"


def test_initial_values():
    ops = [o("get", "v0", 0, 1), o("put", "a", 2, 3), o("get", "a", 4, 5)]
    assert verdict(ops) == VIOLATION
    assert verdict(ops, {K: b"v0"}) == LINEARIZABLE
    assert verdict([o("get", None, 0, 1)], {K: b"v0"}) == VIOLATION
    assert verdict([o("get", None, 0, 1)], {K: None, b"other": b"x"}) == LINEARIZABLE


def test_touching_intervals_count_as_concurrent():
    # put b is invoked exactly when put a returns, and returns exactly when the read is invoked
    ops = [o("put", "a", 0, 1), o("put", "b", 1, 2), o("get", "a", 2, 3)]
    assert verdict(ops) == LINEARIZABLE
    ops = [o("put", "a", 0, 1), o("put", "b", 1.5, 2), o("get", "a", 2.5, 3)]
    assert verdict(ops) == VIOLATION


def test_many_keys_only_the_bad_one_is_reported():
    ops = []
    for i in range(20):
        key = b"key%02d" % i
        ops += [o("put", "a", 0, 1, key=key), o("put", "b", 2, 3, key=key),
                o("get", "a" if i == 13 else "b", 4, 5, key=key)]
    random.Random(1).shuffle(ops)
    r = check_history(ops)
    assert r.keys_checked == 20 and r.ops == 60
    assert [v["key"] for v in r.violations] == ["key13"]
    assert {k for k, x in r.by_key().items() if x.verdict == VIOLATION} == {b"key13"}
    assert r.exit_code() == lin.EXIT_VIOLATION


def test_accepts_history_objects():
    h = History()
    h.complete(h.invoke("put", K, b"a", "c0"), "ok")
    h.complete(h.invoke("get", K, None, "c0"), "ok", b"a")
    h.complete(h.invoke("put", K, b"b", "c0"), "ok")
    assert check_history(h).ok
    assert check_history(h.ops).ok
    h.complete(h.invoke("get", K, None, "c0"), "ok", b"a")
    assert not check_history(h).ok


# ---- budgets ----

def wide(n):
    """n mutually concurrent writes, then a read of a value none wrote: no linearization, and
    the search has to try every subset to know."""
    return [o("put", "w%d" % i, 0, 10, client=f"c{i}") for i in range(n)] + [o("get", "x", 11, 12)]


def test_step_budget_gives_undecided_not_violation():
    r = check_history(wide(14), max_steps=5000)
    (x,) = r.results
    assert x.verdict == UNDECIDED and x.ok is None and x.steps == 5000
    assert r.violations == [] and len(r.budget_exceeded) == 1 and not r.ok
    assert "step budget" in r.budget_exceeded[0]["budget"]
    assert r.exit_code() == lin.EXIT_UNDECIDED


def test_time_budget_gives_undecided():
    r = check_history(wide(16), time_budget_s=0.0)
    assert r.results[0].verdict == UNDECIDED and "time budget" in r.results[0].budget


def test_small_wide_history_is_decided_within_budget():
    assert verdict(wide(6)) == VIOLATION


# ---- randomized: a real linearizable simulation, then one read made stale ----

@pytest.mark.parametrize("seed", range(6))
def test_random_linearizable_simulation_passes_and_a_stale_read_fails(seed):
    # The module's own generators (the self-test uses them too): one linearizable history,
    # then the same with one read made certainly stale.
    ops = lin.simulate(seed, 1200, keys=(b"x", b"y"))
    r = check_history(ops)
    assert r.ok, [lin.explain_text(v) for v in r.violations]
    assert r.keys_checked == 2 and r.ops == 1200
    bad = lin.make_stale(ops, seed)
    (read,) = [b for a, b in zip(ops, bad) if a["result"] != b["result"]]
    r = check_history(bad)
    assert len(r.violations) == 1 and r.budget_exceeded == []
    assert r.violations[0]["key"] == read["key"].decode()


def test_module_simulation_helpers_agree():
    ops = lin.simulate(7, n_ops=800, keys=(b"a",))
    assert check_history(ops).ok
    assert not check_history(lin.make_stale(ops, 7)).ok


# ---- cross-check against brute force on small random histories ----

def brute_force(ops, initial=None):
    """Try every subset of unknown writes and every order: the definition, slowly."""
    live = [d for d in ops if d["outcome"] == "ok" or (d["outcome"] == "unknown" and d["op"] != "get")]
    mand = [d for d in live if d["outcome"] == "ok"]
    opt = [d for d in live if d["outcome"] == "unknown"]
    end = lambda d: float("inf") if d["complete_ns"] is None else d["complete_ns"]
    for k in range(len(opt) + 1):
        for sub in itertools.combinations(opt, k):
            for perm in itertools.permutations(mand + list(sub)):
                if any(end(perm[j]) < perm[i]["invoke_ns"]
                       for i in range(len(perm)) for j in range(i + 1, len(perm))):
                    continue
                state, good = initial, True
                for d in perm:
                    if d["op"] == "put":
                        state = d["value"]
                    elif d["op"] == "delete":
                        state = None
                    elif d["result"] != state:
                        good = False
                        break
                if good:
                    return True
    return False


def random_small(rng):
    ops = []
    for i in range(rng.randint(1, 6)):
        t0 = rng.randint(0, 8)
        kind = rng.choice(["get", "get", "put", "put", "delete"])
        val = rng.choice(["a", "b", None]) if kind == "get" else rng.choice(["a", "b"])
        outcome = rng.choices(["ok", "fail", "unknown"], [6, 1, 2])[0]
        ops.append(o(kind, val, t0, t0 + rng.randint(0, 4), outcome, client=f"c{i}"))
    return ops


def test_agrees_with_brute_force_on_small_histories():
    rng = random.Random(42)
    seen = set()
    for _ in range(1500):
        ops = random_small(rng)
        initial = rng.choice([None, b"a"])
        want = brute_force(ops, initial)
        got = check_history(ops, {K: initial}).ok
        assert got == want, (ops, initial)
        seen.add(want)
    assert seen == {True, False}


# ---- CLI and self-test ----

def write_history(path, ops):
    h = History()
    for d in ops:
        i = h.invoke(d["op"], d["key"], d["value"], d["client"])
        h._ops[-1].invoke_ns = d["invoke_ns"]
        if d["outcome"] != "unknown":
            h.complete(i, d["outcome"], d["result"])
            h._ops[-1].complete_ns = d["complete_ns"]
        else:
            h.complete(i, "unknown")
    h.save(path)


def test_cli_exit_codes_and_table(tmp_path, capsys):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    write_history(good, [o("put", "a", 0, 1, key=b"g"), o("get", "a", 2, 3, key=b"g")])
    write_history(bad, [o("put", "a", 0, 1, key=b"b"), o("put", "c", 2, 3, key=b"b"),
                        o("get", "a", 4, 5, key=b"b")])
    assert lin.main([str(good)]) == 0
    out = capsys.readouterr().out
    assert "linearizable" in out and "1 keys, 2 ops" in out
    out_json = tmp_path / "r.json"
    assert lin.main([str(good), str(bad), "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    assert "VIOLATION" in out and "key 'b': no linearization" in out
    assert json.loads(out_json.read_text())["violations"][0]["key"] == "b"
    wide_file = tmp_path / "wide.jsonl"
    write_history(wide_file, wide(14))
    assert lin.main([str(wide_file), "--max-steps", "1000"]) == lin.EXIT_UNDECIDED
    assert "undecided" in capsys.readouterr().out


def test_cli_initial_values(tmp_path, capsys):
    f = tmp_path / "h.jsonl"
    write_history(f, [o("get", "v0", 0, 1)])
    init = tmp_path / "init.json"
    init.write_text(json.dumps({K.hex(): b"v0".hex()}))
    assert lin.main([str(f)]) == 1
    assert lin.main([str(f), "--initial", str(init)]) == 0


def test_self_test_passes(capsys):
    assert lin.main(["--self-test"]) == 0
    out = capsys.readouterr().out
    assert "MISMATCH" not in out and "agree" in out


def test_self_test_reports_a_disagreement(monkeypatch, capsys):
    cases = [("stale read, wrongly expected good", LINEARIZABLE,
              [o("put", "a", 0, 1), o("put", "b", 2, 3), o("get", "a", 4, 5)], None, {})]
    monkeypatch.setattr(lin, "self_test_cases", lambda: cases)
    assert lin.main(["--self-test"]) == 1
    assert "MISMATCH" in capsys.readouterr().out
