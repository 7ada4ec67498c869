"""Linearizability checker for per-key registers (docs/linearizability.md).

    python -m exo_chaos.linearizability HISTORY.jsonl [HISTORY.jsonl ...]  # exit 0/1/3
    python -m exo_chaos.linearizability --self-test
    python -m exo_chaos.linearizability --cost         # steps vs concurrency (budget sizing)

    from exo_chaos.linearizability import check_history
    r = check_history(ops, initial={b"k": b"v0"})   # ops: dicts / History ops, any keys
    r.ok, r.violations, r.budget_exceeded, r.results

Model. Each key is a register whose state is a value (bytes) or None (absent); it starts as
`initial[key]` (None when not given). put(v) sets it to v, delete sets it to None, get returns
it. A history is linearizable if every operation can be given a point inside its interval
[invoke, complete] so that, applied one after the other in that order, every successful GET
returns what it read (Herlihy & Wing 1990).

Outcomes. "fail" operations had no effect and are removed, as are failed/unknown GETs (a read
has no effect). An "unknown" write (no reply after every resend) may have taken effect at any
point after its invoke, or never: it gets completion time +infinity and is *optional*, i.e. the
search may finish without linearizing it. Two exact reductions keep these cheap: an unknown
write whose new value no successful GET returning after its invoke ever read is dropped (taking
it out of any linearization leaves one: nothing read the state it set), and among unknown writes
of the same value only the earliest-invoked one not yet linearized is a candidate (swapping
identical writes never breaks a linearization).

Locality (P-compositionality). Linearizability is local (Herlihy & Wing 1990): a history over
independent objects is linearizable iff each object's sub-history is. Every operation touches
one key, so the history is partitioned by key and each key checked alone, as in Horn & Kroening,
"Faster linearizability checking via P-compositionality" (FORTE 2015). This turns one search
over all ops into many small ones.

Search. Wing & Gong's algorithm (Wing & Gong, "Testing and verifying concurrent objects", J.
Parallel Distrib. Comput. 17, 1993) with the memoization of Lowe ("Testing for
linearizability", Concurrency Computat.: Pract. Exper. 29(4), 2017), as in Lowe's WGL checker
and Porcupine. The mandatory operations' call and return entries are kept in one doubly linked
list sorted by time (at equal times calls come first: touching intervals count as concurrent,
the permissive reading). A depth-first search walks the list from its head: every call entry
before the first return entry is a *minimal* operation, one that may be linearized next; so is
every pending optional (unknown) write invoked by then, tried after the mandatory ones. An
operation is linearized by applying it to the model (a GET must match the state) and "lifting"
its entries out of the list (O(1)); when the walk reaches a return entry, that operation should
already have been linearized, so the search backtracks: it pops the last choice, "unlifts" it
and tries the next candidate. Lowe's cache records every (set of linearized ops, model state)
reached; a choice leading to a cached configuration is skipped, since everything after it has
been explored already. The search succeeds when every mandatory operation is linearized (the
remaining unknown writes are "never applied", or equally applied at the very end), and fails
when it must backtrack with nothing left to pop. The linearized set is a bitmask over the ops
sorted by invoke time, cached as (lowest unlinearized index, mask above it), which stays small
when intervals are short. One more exact reduction: a minimal GET that matches the current state
is linearized at once with no alternative tried (everything it must follow is done and it
changes nothing, so if any linearization continues from here, one continues with it), which
removes most of the branching of read-heavy histories. The reductions are cross-checked against
a brute-force enumeration in tests/unit/test_linearizability.py.

Budget. The search is exponential in the worst case (many long, mutually concurrent ops).
Each key gets a step budget (`max_steps`, candidate operations tried) and a time budget
(`time_budget_s`); when either runs out the key's verdict is "unknown (budget exceeded)",
reported apart from violations: it proves nothing either way. The CLI exits 0 when every key
is linearizable, 1 on a violation, 3 when there is none but some key is undecided.

What a verdict means. "violation" is a proof, for the recorded intervals and outcomes, that no
order explains what was read; the explanation names the operation that could not be
linearized at the deepest point the search reached (usually the bad read), the register's
state there, the last write applied, the other candidates of that frontier, and every write of
the value that was read. "linearizable" says only that this history has a linearization: not
that the system is linearizable, and unknown writes nobody read are indistinguishable from
writes that never happened.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

INF = float("inf")
GET, PUT, DELETE = 0, 1, 2
_KIND = {"get": GET, "put": PUT, "delete": DELETE}

LINEARIZABLE = "linearizable"
VIOLATION = "violation"
UNDECIDED = "unknown (budget exceeded)"

DEFAULT_MAX_STEPS = 2_000_000
DEFAULT_TIME_BUDGET_S = 10.0
EXIT_OK, EXIT_VIOLATION, EXIT_UNDECIDED = 0, 1, 3


# ---------------------------------------------------------------------------------------------
# Results

@dataclass
class KeyResult:
    """The verdict for one key's sub-history."""
    key: bytes
    verdict: str                  # LINEARIZABLE | VIOLATION | UNDECIDED
    ops: int                      # operations on the key in the history (all outcomes)
    searched: int                 # operations in the search (no fails, no unread unknown writes)
    unknown_writes: int           # writes with an unknown outcome (kept or dropped)
    steps: int = 0                # candidate operations tried
    elapsed_s: float = 0.0
    explanation: Optional[dict] = None   # violations: what could not be explained
    budget: Optional[str] = None         # undecided: which budget ran out

    @property
    def ok(self) -> Optional[bool]:
        """True: linearizable; False: a violation; None: undecided (budget exceeded)."""
        return {LINEARIZABLE: True, VIOLATION: False}.get(self.verdict)

    def as_dict(self) -> dict:
        return {"key": _show(self.key), "key_hex": self.key.hex(), "verdict": self.verdict,
                "ops": self.ops, "searched": self.searched, "unknown_writes": self.unknown_writes,
                "steps": self.steps, "elapsed_s": round(self.elapsed_s, 4),
                "explanation": self.explanation, "budget": self.budget}


@dataclass
class CheckResult:
    """Verdicts for every key of a history."""
    results: list[KeyResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every key proven linearizable (no violation and no budget exceeded)."""
        return all(r.verdict == LINEARIZABLE for r in self.results)

    @property
    def keys_checked(self) -> int:
        return len(self.results)

    @property
    def ops(self) -> int:
        return sum(r.ops for r in self.results)

    @property
    def violations(self) -> list[dict]:
        """One explanation (JSON-ready dict) per key with a violation."""
        return [r.explanation for r in self.results if r.verdict == VIOLATION]

    @property
    def budget_exceeded(self) -> list[dict]:
        """Keys left undecided: the budget ran out before a linearization or a proof of none."""
        return [{"key": _show(r.key), "key_hex": r.key.hex(), "ops": r.ops, "steps": r.steps,
                 "elapsed_s": round(r.elapsed_s, 3), "budget": r.budget}
                for r in self.results if r.verdict == UNDECIDED]

    def by_key(self) -> dict[bytes, KeyResult]:
        return {r.key: r for r in self.results}

    def exit_code(self) -> int:
        if self.violations:
            return EXIT_VIOLATION
        return EXIT_UNDECIDED if self.budget_exceeded else EXIT_OK

    def as_dict(self) -> dict:
        return {"ok": self.ok, "keys_checked": self.keys_checked, "ops": self.ops,
                "violations": self.violations, "budget_exceeded": self.budget_exceeded,
                "keys": [r.as_dict() for r in self.results]}

    def summary(self) -> str:
        n_v, n_u = len(self.violations), len(self.budget_exceeded)
        return (f"{self.keys_checked} keys, {self.ops} ops: "
                f"{self.keys_checked - n_v - n_u} linearizable, {n_v} with a violation, "
                f"{n_u} undecided (budget exceeded)")

    def table(self) -> str:
        rows = [("key", "ops", "searched", "unknown", "verdict", "steps", "time_s")]
        for r in self.results:
            rows.append((_show(r.key), str(r.ops), str(r.searched), str(r.unknown_writes),
                         r.verdict.upper() if r.verdict == VIOLATION else r.verdict,
                         str(r.steps), f"{r.elapsed_s:.3f}"))
        return _format_table(rows, right=(1, 2, 3, 5, 6))

    def report(self) -> str:
        """The table, a summary line and every violation's explanation."""
        out = [self.table(), "", self.summary()]
        for r in self.results:
            if r.verdict == VIOLATION:
                out += ["", explain_text(r.explanation)]
            elif r.verdict == UNDECIDED:
                out += ["", f"key {_show(r.key)!r}: undecided, {r.budget}"]
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Input

@dataclass(eq=False)
class _Op:
    """One operation of a key's sub-history, as the search sees it."""
    kind: int
    value: Optional[bytes]      # the value written (put), None (delete) or read (get)
    invoke: int
    complete: float             # INF: unknown outcome
    optional: bool              # an unknown write: may be left out
    src: dict                   # the op as given (for explanations)
    bit: int = -1               # index in the mandatory or the optional bit space
    twin: int = -1              # optional ops: bit of the previous identical optional op


class _Node:
    __slots__ = ("op", "call", "time", "prev", "next", "match")

    def __init__(self, op, call, t):
        self.op, self.call, self.time = op, call, t
        self.prev = self.next = self.match = None


def _as_dict(o: Any) -> dict:
    if isinstance(o, dict):
        return o
    if hasattr(o, "as_dict"):
        return o.as_dict()
    raise TypeError(f"not an operation: {o!r}")


def _b(v) -> Optional[bytes]:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode()
    raise TypeError(f"expected bytes, got {type(v).__name__}")


def _normalize(ops: Iterable[Any]) -> list[dict]:
    out = []
    for n, o in enumerate(ops):
        d = dict(_as_dict(o))
        if d.get("op") not in _KIND:
            raise ValueError(f"op {n}: op {d.get('op')!r} is not get/put/delete")
        if d.get("outcome") not in ("ok", "fail", "unknown"):
            raise ValueError(f"op {n}: outcome {d.get('outcome')!r} is not ok/fail/unknown")
        d["key"], d["value"], d["result"] = _b(d["key"]), _b(d.get("value")), _b(d.get("result"))
        if d.get("client") is None:
            d["client"] = ""
        if d.get("id") is None:
            d["id"] = n
        d["_n"] = n
        out.append(d)
    return out


# ---------------------------------------------------------------------------------------------
# Checking

def check_history(ops: Iterable[Any], initial: Optional[dict] = None, *,
                  max_steps: int = DEFAULT_MAX_STEPS,
                  time_budget_s: float = DEFAULT_TIME_BUDGET_S) -> CheckResult:
    """Check every key's sub-history of `ops` (dicts as History.as_dicts() gives them, or
    History ops) against a register starting at initial.get(key) (None = absent). Budgets are
    per key."""
    ds = _normalize(ops)
    initial = {_b(k): _b(v) for k, v in (initial or {}).items()}
    by_key: dict[bytes, list[dict]] = {}
    for d in ds:
        by_key.setdefault(d["key"], []).append(d)
    t0 = min((d["invoke_ns"] for d in ds), default=0)
    return CheckResult([check_key(k, by_key[k], initial.get(k), max_steps=max_steps,
                                  time_budget_s=time_budget_s, t0_ns=t0)
                        for k in sorted(by_key)])


def check_key(key: bytes, ops: list[dict], initial: Optional[bytes] = None, *,
              max_steps: int = DEFAULT_MAX_STEPS, time_budget_s: float = DEFAULT_TIME_BUDGET_S,
              t0_ns: Optional[int] = None) -> KeyResult:
    """Check one key's sub-history (every op must be on `key`)."""
    started = time.monotonic()
    ops = _normalize(ops)
    if t0_ns is None:
        t0_ns = min((d["invoke_ns"] for d in ops), default=0)
    kops = _prepare(ops)
    n_unknown = sum(d["op"] != "get" and d["outcome"] == "unknown" for d in ops)
    res = KeyResult(key, LINEARIZABLE, len(ops), len(kops), n_unknown)
    verdict, steps, fail, budget = _search(kops, initial, max_steps, started + time_budget_s)
    res.verdict, res.steps, res.budget = verdict, steps, budget
    if budget is not None:
        res.budget = f"{budget} ({steps} steps, {time.monotonic() - started:.1f} s)"
    if verdict == VIOLATION:
        res.explanation = _explain(key, ops, kops, initial, fail, t0_ns)
    res.elapsed_s = time.monotonic() - started
    return res


def _prepare(ops: list[dict]) -> list[_Op]:
    """The ops the search needs, sorted by invoke time, with their bit indices."""
    last_read: dict = {}    # value -> latest completion of a successful read of it
    for d in ops:
        if d["op"] == "get" and d["outcome"] == "ok":
            last_read[d["result"]] = max(last_read.get(d["result"], -1), _complete(d))
    kops = []
    for d in ops:
        kind, out = _KIND[d["op"]], d["outcome"]
        inv = d["invoke_ns"]
        done = d.get("complete_ns")
        comp = INF if (done is None or out == "unknown") else max(done, inv)
        if out == "fail" or (kind == GET and out != "ok"):
            continue  # no effect
        if kind == GET:
            kops.append(_Op(GET, d["result"], inv, comp, False, d))
            continue
        new = d["value"] if kind == PUT else None
        if out == "unknown":
            # Useful only if some successful read that returns after its invoke saw its value.
            if last_read.get(new, -1) < inv:
                continue
            kops.append(_Op(kind, new, inv, INF, True, d))
        else:
            kops.append(_Op(kind, new, inv, comp, False, d))
    kops.sort(key=lambda o: (o.invoke, o.src["_n"]))
    nm = no = 0
    last_twin: dict = {}
    for o in kops:
        if o.optional:
            o.bit, no = no, no + 1
            o.twin = last_twin.get((o.kind, o.value), -1)
            last_twin[(o.kind, o.value)] = o.bit
        else:
            o.bit, nm = nm, nm + 1
    return kops


def _complete(d: dict) -> float:
    return INF if d.get("complete_ns") is None else d["complete_ns"]


def _link(nodes: list[_Node]) -> _Node:
    head = _Node(None, False, -1)
    prev = head
    for n in nodes:
        prev.next, n.prev = n, prev
        prev = n
    return head


def _search(kops: list[_Op], initial, max_steps: int, deadline: float):
    """WGL depth-first search with Lowe's cache. Returns (verdict, steps, failure, budget)."""
    entries = []
    optional = []
    for o in kops:
        call = _Node(o, True, o.invoke)
        if o.optional:
            optional.append(call)
            continue
        ret = _Node(o, False, o.complete)
        call.match, ret.match = ret, call
        entries += [call, ret]
    entries.sort(key=lambda n: (n.time, not n.call, n.op.bit))
    mhead, ohead = _link(entries), _link(optional)
    if mhead.next is None:
        return LINEARIZABLE, 0, None, None

    state, mmask, omask, depth = initial, 0, 0, 0    # depth: mandatory ops linearized
    stack: list[tuple] = []          # (node, state before it, phase, barrier)
    cache: set = set()
    steps = 0
    best = (-1, 0)
    failure = None
    fresh = True                     # at a configuration not scanned yet
    node, phase, barrier = None, 0, None   # phase 0: mandatory list; 1: optional; 2: forced
    while True:
        if fresh:
            # A candidate read that matches the state is linearized next with no alternative:
            # all ops it must follow are done and it leaves the state as it is, so if any
            # linearization goes on from here, one goes on with this read first.
            fresh = False
            node = mhead.next
            while node.call and (node.op.kind != GET or node.op.value != state):
                node = node.next
            phase = 2 if node.call else 0
            if phase == 0:
                node, barrier = mhead.next, None
        if phase == 0:
            if not node.call:          # first return entry: the barrier; now the optional ops
                barrier, phase, node = node, 1, ohead.next
                continue
        elif phase == 1:
            if node is None or node.time > barrier.time:
                # Dead end: the barrier's op had to be linearized by now and nothing works.
                # Keep the deepest dead end (fewest unknown writes used among equals).
                if depth >= best[0] and (depth, -bin(omask).count("1")) > best:
                    best = (depth, -bin(omask).count("1"))
                    failure = _frontier(mhead, barrier, state, stack, omask, depth)
                node = None
            elif node.op.twin >= 0 and not (omask >> node.op.twin) & 1:
                node = node.next       # an identical earlier unknown write is still unused
                continue

        if node is not None:
            # Try to linearize node's op now.
            steps += 1
            if steps > max_steps:
                return UNDECIDED, steps - 1, None, f"step budget of {max_steps} exceeded"
            if not steps & 0xFFF and time.monotonic() > deadline:
                return UNDECIDED, steps, None, "time budget exceeded"
            op = node.op
            if op.kind != GET:
                new_state = op.value
            elif op.value == state:
                new_state = state
            else:
                node = node.next
                continue
            if op.optional:
                new_m, new_o = mmask, omask | (1 << op.bit)
            else:
                new_m, new_o = mmask | (1 << op.bit), omask
            low = (~new_m & (new_m + 1)).bit_length() - 1    # all mandatory ops below are done
            k = (low, new_m >> low, new_o, new_state)
            if k not in cache:
                cache.add(k)
                stack.append((node, state, phase, barrier))
                state, mmask, omask = new_state, new_m, new_o
                if op.optional:
                    node.prev.next = node.next
                    if node.next is not None:
                        node.next.prev = node.prev
                else:
                    depth += 1
                    node.prev.next = node.next
                    node.next.prev = node.prev
                    ret = node.match
                    ret.prev.next = ret.next
                    if ret.next is not None:
                        ret.next.prev = ret.prev
                    if mhead.next is None:
                        return LINEARIZABLE, steps, None, None
                fresh = True
                continue
            if phase != 2:             # explored before: next candidate
                node = node.next
                continue
            # a forced read leading somewhere explored: this configuration is dead too

        # Backtrack: undo the last choice and try the next candidate after it (a forced read
        # has none: its configuration is dead, undo the choice before it too).
        while True:
            if not stack:
                if failure is None:
                    failure = _frontier(mhead, None, state, stack, omask, depth)
                return VIOLATION, steps, failure, None
            node, state, phase, barrier = stack.pop()
            op = node.op
            if op.optional:
                omask ^= 1 << op.bit
                node.prev.next = node
                if node.next is not None:
                    node.next.prev = node
            else:
                mmask ^= 1 << op.bit
                depth -= 1
                ret = node.match
                ret.prev.next = ret
                if ret.next is not None:
                    ret.next.prev = ret
                node.prev.next = node
                node.next.prev = node
            if phase != 2:
                break
        node = node.next


def _frontier(mhead: _Node, barrier: _Node, state, stack: list, omask: int, depth: int) -> dict:
    """What the search saw at a dead end: the op that had to be linearized by now (barrier),
    the other candidates, the state, the last writes applied."""
    if barrier is None:
        barrier = mhead.next
        while barrier.call:
            barrier = barrier.next
    cands = []
    n = mhead.next
    while n is not barrier:
        if n.call:
            cands.append(n.op)
        n = n.next
    last_write = None
    for fr in reversed(stack):
        if fr[0].op.kind != GET:
            last_write = fr[0].op
            break
    return {"blocked": barrier.op, "state": state, "candidates": cands, "depth": depth,
            "last_write": last_write, "recent": [fr[0].op for fr in stack[-5:]],
            "omask": omask}


# ---------------------------------------------------------------------------------------------
# Explanations

def _show(v: Optional[bytes]) -> Optional[str]:
    return None if v is None else v.decode("utf-8", errors="backslashreplace")


def _val(v: Optional[bytes]) -> str:
    return "absent" if v is None else repr(_show(v))


def _op_json(d: dict) -> dict:
    return {"client": d["client"], "id": d["id"], "op": d["op"], "value": _show(d["value"]),
            "invoke_ns": d["invoke_ns"], "complete_ns": d.get("complete_ns"),
            "outcome": d["outcome"], "result": _show(d["result"])}


def _label(d: dict, t0: int) -> str:
    who = f"{d['client']}#{d['id']}" if d["client"] else f"#{d['id']}"
    inv = (d["invoke_ns"] - t0) / 1e9
    done = d.get("complete_ns")
    end = "open" if done is None or d["outcome"] == "unknown" else f"{(done - t0) / 1e9:.6f}"
    what = {"get": f"get -> {_val(d['result'])}" if d["outcome"] == "ok" else "get",
            "put": f"put {_val(d['value'])}", "delete": "delete"}[d["op"]]
    return f"{what} ({who}, {d['outcome']}, [{inv:.6f}, {end}] s)"


def _explain(key: bytes, ops: list[dict], kops: list[_Op], initial, fail: dict, t0: int) -> dict:
    blocked: _Op = fail["blocked"]
    b = blocked.src
    read_value = blocked.value
    writers = [d for d in ops if (d["op"] == "put" and d["value"] == read_value)
               or (d["op"] == "delete" and read_value is None)]
    lw = fail["last_write"]
    if lw is None:
        held = f"the register holds {_val(fail['state'])} (its initial value)"
    else:
        held = f"the register holds {_val(fail['state'])}, last set by {_label(lw.src, t0)}"
    if blocked.kind == GET:
        what = f"{_label(b, t0)} could not be linearized: it read {_val(read_value)}, but {held}"
    else:  # not reached in practice: writes always apply; kept for completeness
        what = f"{_label(b, t0)} could not be linearized; {held}"
    if read_value is None:
        if writers:
            src = " Deletes of the key: " + "; ".join(_label(d, t0) for d in writers[:5])
            src += f"; and {len(writers) - 5} more." if len(writers) > 5 else "."
        else:
            src = " The key starts absent." if initial is None else " No operation deletes it."
    elif writers:
        src = f" Writes of {_val(read_value)}: " + "; ".join(_label(d, t0) for d in writers[:5])
        if len(writers) > 5:
            src += f"; and {len(writers) - 5} more"
        src += "."
    elif initial == read_value:
        src = f" {_val(read_value)} is the key's initial value."
    else:
        src = f" No operation writes {_val(read_value)}."
    others = [o for o in fail["candidates"] if o is not blocked]
    pending_unknown = [o for o in kops if o.optional and not (fail["omask"] >> o.bit) & 1
                       and o.invoke <= blocked.complete]
    n_mand = sum(not o.optional for o in kops)
    used = bin(fail["omask"]).count("1")
    unk = f" (and {used} unknown write{'s' if used != 1 else ''})" if used else ""
    message = (f"key {_show(key)!r}: no linearization. After {fail['depth']} of {n_mand} "
               f"operations{unk} were linearized, {what}.{src}")
    return {
        "key": _show(key), "key_hex": key.hex(), "ops": len(ops), "message": message,
        "blocked_op": _op_json(b),
        "state": _show(fail["state"]),
        "last_write": None if lw is None else _op_json(lw.src),
        "other_candidates": [_op_json(o.src) for o in others],
        "unused_unknown_writes": [_op_json(o.src) for o in pending_unknown][:10],
        "writes_of_read_value": [_op_json(d) for d in writers[:10]],
        "recently_linearized": [_op_json(o.src) for o in fail["recent"]],
        "linearized_before": fail["depth"],
        "t0_ns": t0,
        "lines": {
            "blocked": _label(b, t0),
            "last_write": None if lw is None else _label(lw.src, t0),
            "other_candidates": [_label(o.src, t0) for o in others],
            "writes_of_read_value": [_label(d, t0) for d in writers[:10]],
        },
    }


def explain_text(e: dict) -> str:
    """A violation's explanation as a few readable lines (times relative to the history start)."""
    out = [e["message"]]
    ln = e["lines"]
    out.append(f"    could not linearize: {ln['blocked']}")
    out.append(f"    register state:      {'absent' if e['state'] is None else repr(e['state'])}"
               f" (after {e['linearized_before']} linearized)")
    out.append(f"    last write applied:  {ln['last_write'] or '(none: initial value)'}")
    for s in ln["other_candidates"]:
        out.append(f"    also concurrent:     {s}")
    if e["unused_unknown_writes"]:
        out.append(f"    unknown writes available: {len(e['unused_unknown_writes'])}")
    for s in ln["writes_of_read_value"]:
        out.append(f"    writer of the value: {s}")
    return "\n".join(out)


def _format_table(rows: list[tuple], right: tuple = ()) -> str:
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]

    def fmt(r):
        return "  ".join(c.rjust(w[i]) if i in right else c.ljust(w[i]) for i, c in enumerate(r))

    lines = [fmt(rows[0]), "  ".join("-" * x for x in w)] + [fmt(r) for r in rows[1:]]
    return "\n".join(s.rstrip() for s in lines)


# ---------------------------------------------------------------------------------------------
# Self-test: known-good and known-bad histories

S = 1_000_000_000  # ns per second; self-test times are in seconds


def op(kind: str, key, value=None, invoke=0.0, complete=1.0, outcome="ok", client="c0", id=None):
    """A history op for tests: for a get `value` is the result read, for a put the value
    written. Times in seconds; complete=None or outcome "unknown" = open."""
    key = _b(key)
    value = _b(value)
    done = None if complete is None or outcome == "unknown" else int(complete * S)
    return {"id": id, "client": client, "op": kind, "key": key,
            "value": value if kind == "put" else None, "invoke_ns": int(invoke * S),
            "complete_ns": done, "outcome": outcome,
            "result": value if kind == "get" and outcome == "ok" else None}


def simulate(seed: int, n_ops: int = 1000, n_clients: int = 4, keys=(b"k",), p_unknown=0.03,
             p_fail=0.03, p_get=0.5, p_delete=0.1) -> list[dict]:
    """A linearizable history: clients issue ops one after another with random durations; each
    op takes effect at a random point inside its interval (an unknown write: at a random later
    point or never; a failed one: never), on one register per key."""
    rng = random.Random(seed)
    now = [rng.random() for _ in range(n_clients)]
    events = []   # (effect time, op dict)
    ops = []
    for i in range(n_ops):
        c = rng.randrange(n_clients)
        start = now[c] + rng.expovariate(1 / 0.3)
        dur = rng.uniform(0.05, 1.5)
        now[c] = start + dur
        key = rng.choice(keys)
        r = rng.random()
        kind = "get" if r < p_get else ("delete" if r < p_get + p_delete else "put")
        d = op(kind, key, b"c%d:%d" % (c, i) if kind == "put" else None, start, start + dur,
               client=f"c{c}", id=i)
        r = rng.random()
        if r < p_fail:
            d["outcome"], d["result"] = "fail", None
        elif r < p_fail + p_unknown and kind != "get":
            d["outcome"], d["complete_ns"] = "unknown", None
            if rng.random() < 0.5:
                events.append((start + rng.uniform(0, 4 * dur), d))
        else:
            events.append((rng.uniform(start, start + dur), d))
        ops.append(d)
    state: dict = {}
    for _, d in sorted(events, key=lambda e: e[0]):
        if d["op"] == "get":
            d["result"] = state.get(d["key"])
        elif d["op"] == "put":
            state[d["key"]] = d["value"]
        else:
            state.pop(d["key"], None)
    return ops


def make_stale(ops: list[dict], seed: int) -> list[dict]:
    """Copy of `ops` with one successful read changed to a value that is certainly stale: that
    of an acknowledged put w followed (not concurrently) by another acknowledged write w2 that
    completed before the read began. Values are unique, so w must be the last write before the
    read, and it cannot be."""
    rng = random.Random(seed)
    acked = [d for d in ops if d["op"] != "get" and d["outcome"] == "ok"]
    reads = [d for d in ops if d["op"] == "get" and d["outcome"] == "ok"]
    rng.shuffle(reads)
    for r in reads:
        same = [w for w in acked if w["key"] == r["key"]]
        w2s = [w2 for w2 in same if w2["complete_ns"] < r["invoke_ns"]]
        for w2 in sorted(w2s, key=lambda w: -w["complete_ns"]):
            ws = [w for w in same if w["op"] == "put" and w["complete_ns"] < w2["invoke_ns"]]
            if ws:
                w = ws[-1]
                out = [dict(d) for d in ops]
                out[ops.index(r)]["result"] = w["value"]
                return out
    raise ValueError("no read can be made stale")


def self_test_cases() -> list[tuple]:
    """(name, expected verdict, ops, initial, check_history kwargs)."""
    k = b"k"
    cases = [
        ("sequential put/get/delete/get", LINEARIZABLE,
         [op("get", k, None, 0, 1), op("put", k, "a", 2, 3), op("get", k, "a", 4, 5),
          op("delete", k, None, 6, 7), op("get", k, None, 8, 9)], None, {}),
        ("read concurrent with a write sees old", LINEARIZABLE,
         [op("put", k, "a", 0, 1), op("put", k, "b", 2, 6, client="c1"),
          op("get", k, "a", 3, 4)], None, {}),
        ("read concurrent with a write sees new", LINEARIZABLE,
         [op("put", k, "a", 0, 1), op("put", k, "b", 2, 6, client="c1"),
          op("get", k, "b", 3, 4)], None, {}),
        ("stale read after a completed write", VIOLATION,
         [op("put", k, "a", 0, 1), op("put", k, "b", 2, 3), op("get", k, "a", 4, 5)], None, {}),
        ("read of a value never written", VIOLATION,
         [op("put", k, "a", 0, 1), op("get", k, "zzz", 0.5, 5, client="c1")], None, {}),
        ("new-old inversion (sequential reads)", VIOLATION,
         [op("put", k, "a", 0, 1), op("put", k, "b", 2, 10, client="c1"),
          op("get", k, "b", 3, 4), op("get", k, "a", 5, 6)], None, {}),
        ("old-new (sequential reads)", LINEARIZABLE,
         [op("put", k, "a", 0, 1), op("put", k, "b", 2, 10, client="c1"),
          op("get", k, "a", 3, 4), op("get", k, "b", 5, 6)], None, {}),
        ("unknown write later read", LINEARIZABLE,
         [op("put", k, "a", 0, 1), op("put", k, "b", 2, None, "unknown", client="c1"),
          op("put", k, "c", 5, 6), op("get", k, "b", 20, 21)], None, {}),
        ("unknown write never observed", LINEARIZABLE,
         [op("put", k, "a", 0, 1), op("put", k, "b", 2, None, "unknown", client="c1"),
          op("get", k, "a", 20, 21)], None, {}),
        ("unknown write applied twice", VIOLATION,
         [op("put", k, "b", 0, None, "unknown", client="c1"), op("put", k, "a", 1, 2),
          op("get", k, "b", 3, 4), op("put", k, "c", 5, 6), op("get", k, "b", 7, 8)], None, {}),
        ("unknown write read before its invoke", VIOLATION,
         [op("get", k, "b", 0, 1), op("put", k, "b", 2, None, "unknown")], None, {}),
        ("failed write whose value is read", VIOLATION,
         [op("put", k, "a", 0, 1), op("put", k, "b", 2, 3, "fail"), op("get", k, "b", 4, 5)],
         None, {}),
        ("failed read is ignored", LINEARIZABLE,
         [op("put", k, "a", 0, 1), op("get", k, None, 2, 3, "fail")], None, {}),
        ("delete then read absent", LINEARIZABLE,
         [op("put", k, "a", 0, 1), op("delete", k, None, 2, 3), op("get", k, None, 4, 5)],
         None, {}),
        ("delete then read old value", VIOLATION,
         [op("put", k, "a", 0, 1), op("delete", k, None, 2, 3), op("get", k, "a", 4, 5)],
         None, {}),
        ("preloaded initial value read", LINEARIZABLE,
         [op("get", k, "v0", 0, 1)], {k: b"v0"}, {}),
        ("initial value read without a preload", VIOLATION,
         [op("get", k, "v0", 0, 1)], None, {}),
        ("8 keys, only k3 bad", VIOLATION,
         [o for i in range(8) for o in (
             op("put", b"k%d" % i, "a", 0, 1), op("put", b"k%d" % i, "b", 2, 3),
             op("get", b"k%d" % i, "a" if i == 3 else "b", 4, 5))], None, {}),
    ]
    for seed in (1, 2, 3):
        sim = simulate(seed, n_ops=1500, keys=(b"x", b"y", b"z"))
        cases.append((f"simulation seed {seed} (1500 ops, 3 keys)", LINEARIZABLE, sim, None, {}))
        cases.append((f"simulation seed {seed}, one read made stale", VIOLATION,
                      make_stale(sim, seed), None, {}))
    # 14 mutually concurrent writes and an impossible read: exponential, stopped by the budget.
    wide = [op("put", k, "w%d" % i, 0, 10, client=f"c{i}") for i in range(14)]
    wide.append(op("get", k, "never", 11, 12))
    cases.append(("14 concurrent writes, max_steps=20000", UNDECIDED, wide, None,
                  {"max_steps": 20000}))
    return cases


def self_test(out=print) -> int:
    rows = [("history", "expected", "got", "ops", "steps", "agree")]
    bad = 0
    for name, expected, ops, initial, kw in self_test_cases():
        r = check_history(ops, initial, **kw)
        verdicts = [x.verdict for x in r.results]
        got = (VIOLATION if VIOLATION in verdicts else
               UNDECIDED if UNDECIDED in verdicts else LINEARIZABLE)
        if got == VIOLATION:
            bad_keys = [_show(x.key) for x in r.results if x.verdict == VIOLATION]
            got_s = f"{got} ({', '.join(bad_keys)})" if r.keys_checked > 1 else got
        else:
            got_s = got
        agree = got == expected
        if name.startswith("8 keys"):
            agree = agree and [x.key for x in r.results if x.verdict == VIOLATION] == [b"k3"]
        bad += not agree
        rows.append((name, expected, got_s, str(len(ops)), str(sum(x.steps for x in r.results)),
                     "ok" if agree else "MISMATCH"))
    out(_format_table(rows, right=(3, 4)))
    out(f"\n{len(rows) - 1 - bad}/{len(rows) - 1} agree" + ("" if not bad else f", {bad} MISMATCH"))
    return 1 if bad else 0


def cost_curve(clients=(4, 8, 12, 16, 20), n_ops: int = 3000, seeds=(1, 2), out=print,
               max_steps: int = DEFAULT_MAX_STEPS) -> list[dict]:
    """How the search's cost grows with concurrency: linearizable one-key histories of n_ops
    (simulate(), no unknown or failed ops) from more and more clients, each with one op at a
    time lasting 0.05-1.5 s with 0.3 s mean gaps, so about 0.7 x clients ops are open at once.
    Prints and returns steps and seconds per history."""
    rows = [("clients", "seed", "mean open", "verdict", "steps", "time_s")]
    res = []
    for c in clients:
        for seed in seeds:
            ops = simulate(seed, n_ops=n_ops, n_clients=c, keys=(b"k",), p_unknown=0.0, p_fail=0.0)
            r = check_history(ops, max_steps=max_steps).results[0]
            res.append({"clients": c, "seed": seed, "mean_open": round(_mean_open(ops), 2),
                        "verdict": r.verdict, "steps": r.steps, "elapsed_s": round(r.elapsed_s, 2)})
            rows.append((str(c), str(seed), f"{res[-1]['mean_open']:.1f}", r.verdict, str(r.steps),
                         f"{r.elapsed_s:.2f}"))
    out(_format_table(rows, right=(0, 1, 2, 4, 5)))
    out(f"(max_steps {max_steps}: the default per-key budget)")
    return res


def _mean_open(ops: list[dict]) -> float:
    """Mean number of operations (including itself) open when an operation is invoked."""
    ev = sorted([(o["invoke_ns"], 1) for o in ops] + [(o["complete_ns"] + 1, -1) for o in ops])
    cur, seen = 0, []
    for _, d in ev:
        cur += d
        if d == 1:
            seen.append(cur)
    return sum(seen) / max(1, len(seen))


# ---------------------------------------------------------------------------------------------
# CLI

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m exo_chaos.linearizability",
        description="Check client histories (JSON Lines, exo_harness.history) for per-key "
                    "linearizability against a register model. Exit status: 0 every key "
                    "linearizable, 1 a violation, 3 no violation but some key undecided "
                    "(budget exceeded).")
    ap.add_argument("histories", nargs="*", type=Path, help="history files, merged")
    ap.add_argument("--self-test", action="store_true",
                    help="check built-in known-good and known-bad histories and print a table")
    ap.add_argument("--cost", action="store_true",
                    help="print how the search's cost grows with concurrency (cost_curve)")
    ap.add_argument("--initial", type=Path,
                    help='JSON object of preloaded values: {"<key hex>": "<value hex>" | null}')
    ap.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS, help="per key")
    ap.add_argument("--time-budget", type=float, default=DEFAULT_TIME_BUDGET_S,
                    help="seconds per key")
    ap.add_argument("--json", type=Path, help="also write the full result here")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if a.cost:
        cost_curve(max_steps=a.max_steps)
        return 0
    if not a.histories:
        ap.error("give history files, or --self-test")
    from exo_harness.history import History
    merged = History.merge(History.load(p) for p in a.histories)
    initial = None
    if a.initial:
        raw = json.loads(a.initial.read_text())
        initial = {bytes.fromhex(k): None if v is None else bytes.fromhex(v) for k, v in raw.items()}
    r = check_history(merged, initial, max_steps=a.max_steps, time_budget_s=a.time_budget)
    print(r.report())
    if a.json:
        a.json.write_text(json.dumps(r.as_dict(), indent=2))
    return r.exit_code()


if __name__ == "__main__":
    sys.exit(main())
