"""What the client sends and what becomes of it: Request, Result, how keys and values become
bytes, and which named exception (errors.py) a Result ends in. Shared by Client (client.py)
and AsyncClient (aio.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import wire
from .errors import DefinitelyFailed, ExoError, ServerError, Timeout, UnknownOutcome

OP_NAMES = {wire.OP_GET: "get", wire.OP_PUT: "put", wire.OP_DELETE: "delete"}
STATUS_NAMES = {wire.ST_OK: "OK", wire.ST_NOT_FOUND: "NOT_FOUND", wire.ST_ERROR: "ERROR",
                wire.ST_BAD_REQUEST: "BAD_REQUEST", wire.ST_BUSY: "BUSY"}
_BINARY = (bytes, bytearray, memoryview)


def key_bytes(key) -> bytes:
    """A key as the wire carries it: bytes as they are, str as UTF-8; anything else is a
    TypeError (nothing is sent)."""
    if type(key) is bytes:
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, _BINARY):
        return bytes(key)
    raise TypeError(f"keys are bytes or str, not {type(key).__name__}")


def value_bytes(value) -> bytes:
    """A value as the wire carries it: bytes, bytearray or memoryview. A str (or any other
    object) goes through the client's serializer hook, never implicitly."""
    if type(value) is bytes:
        return value
    if isinstance(value, _BINARY):
        return bytes(value)
    hint = " (encode it, or give the client a serializer=)" if isinstance(value, str) else \
        " (give the client a serializer= to store other objects)"
    raise TypeError(f"values are bytes, bytearray or memoryview, not {type(value).__name__}{hint}")


@dataclass(frozen=True)
class Request:
    op: int
    key: bytes    # a str is stored UTF-8 encoded
    value: bytes = b""

    def __post_init__(self):
        if type(self.key) is not bytes:
            object.__setattr__(self, "key", key_bytes(self.key))
        if type(self.value) is not bytes:
            object.__setattr__(self, "value", value_bytes(self.value))


@dataclass(frozen=True)
class Result:
    request: Request
    status: Optional[int]  # None: no reply after every resend
    value: bytes
    flags: int
    latency_s: float
    attempts: int
    detail: str = ""       # transport="proxy": exo-proxy's answer (or why none came), for messages

    @property
    def from_cache(self) -> bool:
        return bool(self.flags & wire.FLAG_FROM_CACHE)

    @property
    def outcome(self) -> str:
        """"ok" (OK or NOT_FOUND), "unknown" (a write with no reply: maybe applied) or
        "failed" (definitely no effect: a refused write, or any failed read)."""
        if self.status in (wire.ST_OK, wire.ST_NOT_FOUND):
            return "ok"
        if self.status is None and self.request.op != wire.OP_GET:
            return "unknown"
        return "failed"


def error_for(res: Result, key=None) -> Optional[ExoError]:
    """The exception `res` ends in, or None (OK, NOT_FOUND). `key` names the key in the error
    (the caller's own key, e.g. a str); default: the request's bytes."""
    status, op = res.status, res.request.op
    if status in (wire.ST_OK, wire.ST_NOT_FOUND):
        return None
    key = res.request.key if key is None else key
    if status is None:
        why = res.detail or f"no reply after {res.attempts} attempts"
        if op == wire.OP_GET:
            return Timeout(f"GET of {key!r}: {why}", [key])
        return UnknownOutcome(f"{OP_NAMES[op].upper()} of {key!r}: {why}; "
                              f"outcome unknown (it may have been applied)", [key])
    name = STATUS_NAMES.get(status, str(status))
    detail = f" ({res.detail})" if res.detail else ""
    if op == wire.OP_GET:
        return ServerError(f"{name} for GET of {key!r}{detail}", status, key)
    return DefinitelyFailed(f"{name} for {OP_NAMES[op].upper()} of {key!r}: not applied (definitely failed)"
                            f"{detail}", status, key)
