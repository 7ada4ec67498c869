"""A client-side history of operations for linearizability checking (docs/linearizability.md).

    h = History()
    i = h.invoke("put", b"k", b"v", "client0")      # just before the request is sent
    h.complete(i, "ok", None)                         # when its outcome is known
    h.save("history-client0.jsonl")
    ops = History.merge([History.load(p) for p in paths])   # every client's ops, by invoke time

Usually it is filled by exo_harness.recorder.RecordingIO, which wraps a Client's I/O and
records what the client sends and receives; invoke/complete are the recording API.

One History is written by one thread (the client that owns it); the histories of several clients
are merged afterwards. Times are `time.monotonic_ns()`: CLOCK_MONOTONIC, one clock for every
process on a machine (Mininet hosts share the kernel), so histories recorded by different
processes on the same machine can be merged. Histories from different machines cannot.

Outcomes:

- "ok": the operation took effect (a write was acknowledged; a GET returned `value`, None =
  not found).
- "fail": the operation definitely had no effect (a refused write; any failed GET: a read has no
  effect either way, so a GET is never "unknown" and is recorded as "fail" if given "unknown").
- "unknown": a write with no reply after every resend: it may or may not have taken effect, now
  or later. It never completes: `complete_ns` stays None (+infinity to the checker).

Operations still pending when the history is saved are written as "unknown" (a GET as "fail").

File format: JSON Lines, one operation per line, in invoke order:

    {"id": 0, "client": "client0", "op": "put", "key": "6b", "value": "76",
     "invoke_ns": 123, "complete_ns": 456, "outcome": "ok", "result": null}

`key`, `value` (the value a PUT writes; null for GET/DELETE) and `result` (the value a
successful GET read; null = not found, and null for writes) are hex. `complete_ns` is null for
unknown outcomes. `id` is unique per history (per recording client), not across a merge:
(client, id) names an operation.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Union

OPS = ("get", "put", "delete")
OUTCOMES = ("ok", "fail", "unknown")
FIELDS = ("id", "client", "op", "key", "value", "invoke_ns", "complete_ns", "outcome", "result")


@dataclass
class Op:
    """One recorded operation. `outcome` is None while it is pending."""
    id: int
    client: str
    op: str
    key: bytes
    value: Optional[bytes]
    invoke_ns: int
    complete_ns: Optional[int] = None
    outcome: Optional[str] = None
    result: Optional[bytes] = None

    @property
    def pending(self) -> bool:
        return self.outcome is None

    def final_outcome(self) -> str:
        """The outcome as saved: a pending write is "unknown", a pending GET "fail"."""
        if self.outcome is not None:
            return self.outcome
        return "fail" if self.op == "get" else "unknown"

    def as_dict(self) -> dict:
        """The op as the checker and exo_chaos.metrics take it (bytes, not hex)."""
        outcome = self.final_outcome()
        return {"id": self.id, "client": self.client, "op": self.op, "key": self.key,
                "value": self.value, "invoke_ns": self.invoke_ns,
                "complete_ns": None if outcome == "unknown" else self.complete_ns,
                "outcome": outcome, "result": self.result if outcome == "ok" else None}

    def to_json(self) -> str:
        d = self.as_dict()
        for f in ("key", "value", "result"):
            d[f] = None if d[f] is None else d[f].hex()
        return json.dumps({f: d[f] for f in FIELDS}, separators=(", ", ": "))

    @classmethod
    def from_json_dict(cls, d: dict) -> "Op":
        missing = [f for f in FIELDS if f not in d]
        if missing:
            raise ValueError(f"missing field(s) {', '.join(missing)}")
        if d["op"] not in OPS:
            raise ValueError(f"op {d['op']!r} is not one of {OPS}")
        if d["outcome"] not in OUTCOMES:
            raise ValueError(f"outcome {d['outcome']!r} is not one of {OUTCOMES}")

        def unhex(v):
            return None if v is None else bytes.fromhex(v)

        return cls(id=int(d["id"]), client=str(d["client"]), op=d["op"], key=unhex(d["key"]),
                   value=unhex(d["value"]), invoke_ns=int(d["invoke_ns"]),
                   complete_ns=None if d["complete_ns"] is None else int(d["complete_ns"]),
                   outcome=d["outcome"], result=unhex(d["result"]))


class History:
    """Operations of one client (or, after merge/load, of several), in invoke order."""

    def __init__(self, ops: Iterable[Op] = (), clock: Callable[[], int] = time.monotonic_ns):
        self._ops: list[Op] = list(ops)
        self._by_id: dict[int, Op] = {}
        self._next_id = max((o.id for o in self._ops), default=-1) + 1
        self._clock = clock

    # ---- recording ----
    def invoke(self, op: str, key: bytes, value: Optional[bytes] = None, client: str = "") -> int:
        """Record that `op` is about to be sent; returns its id for complete()."""
        if op not in OPS:
            raise ValueError(f"op {op!r} is not one of {OPS}")
        if op == "put" and value is None:
            raise ValueError("a put needs a value")
        if op != "put":
            value = None
        o = Op(self._next_id, client, op, bytes(key), None if value is None else bytes(value),
               self._clock())
        self._next_id += 1
        self._ops.append(o)
        self._by_id[o.id] = o
        return o.id

    def complete(self, op_id: int, outcome: str, value: Optional[bytes] = None) -> None:
        """Record the outcome of op `op_id`: "ok" (for a GET, `value` is what it read, None =
        not found), "fail" (definitely no effect) or "unknown" (a write that may or may not have
        taken effect: it stays open, complete_ns None)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome {outcome!r} is not one of {OUTCOMES}")
        o = self._by_id.pop(op_id, None)
        if o is None:
            raise KeyError(f"op {op_id} is not pending in this history")
        if o.op == "get" and outcome == "unknown":
            outcome = "fail"  # a read has no effect: not knowing its result is a failed read
        o.outcome = outcome
        o.complete_ns = None if outcome == "unknown" else self._clock()
        o.result = None if value is None or outcome != "ok" or o.op != "get" else bytes(value)

    def reopen(self, op_id: int) -> None:
        """Make a failed op `op_id` pending again. The recorder calls this when a BUSY reply,
        which it recorded as "fail", turns out not to be the end of the request: the client
        retries it under a new id, and the retry's outcome is the request's outcome."""
        o = next((o for o in reversed(self._ops) if o.id == op_id), None)
        if o is None or o.outcome != "fail" or op_id in self._by_id:
            raise KeyError(f"op {op_id} is not a failed op of this history")
        o.outcome, o.complete_ns, o.result = None, None, None
        self._by_id[op_id] = o

    # ---- reading ----
    @property
    def ops(self) -> list[Op]:
        return list(self._ops)

    def pending(self) -> list[Op]:
        return [o for o in self._ops if o.pending]

    def __iter__(self) -> Iterator[Op]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def as_dicts(self) -> list[dict]:
        return [o.as_dict() for o in self._ops]

    # ---- files ----
    def to_json(self) -> str:
        """JSON Lines, one op per line (pending ops written as unknown; GETs as fail)."""
        return "".join(o.to_json() + "\n" for o in self._ops)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write to_json() to `path` (through a temporary file, so a reader never sees half)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> "History":
        ops = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                ops.append(Op.from_json_dict(json.loads(line)))
            except (ValueError, TypeError, AttributeError) as e:
                raise ValueError(f"{source}:{n}: not a history line: {e}") from None
        return cls(ops)

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "History":
        return cls.from_json(Path(path).read_text(), str(path))

    @classmethod
    def merge(cls, histories: Iterable["History"]) -> "History":
        """Every op of every history, sorted by invoke time (ties: in the order given)."""
        ops = [o for h in histories for o in h]
        ops.sort(key=lambda o: o.invoke_ns)
        return cls(ops)
