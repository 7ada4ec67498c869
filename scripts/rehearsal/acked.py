"""Which values a key may hold, given the writes a client made and which of them were acknowledged:
the rehearsal's "no acknowledged write was lost" check. Pure.

One client writes sequentially. After an acknowledged write of v, a read must return v or the
value of a later write whose outcome is unknown (it failed or timed out: it may have been applied).
A read that returns anything else - an older value, nothing at all - lost an acknowledged write.
A key never acknowledged allows anything that was attempted, or nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class KeyHistory:
    acked: Optional[str] = None                       # the last acknowledged value
    unknown: list[str] = field(default_factory=list)  # attempts since then whose outcome is unknown


class AckedWrites:
    def __init__(self, state: Optional[dict] = None):
        self.keys: dict[str, KeyHistory] = {}
        for k, h in (state or {}).items():
            self.keys[k] = KeyHistory(h.get("acked"), list(h.get("unknown", [])))

    def wrote(self, key: str, value: str, acked: bool) -> None:
        h = self.keys.setdefault(key, KeyHistory())
        if acked:
            h.acked, h.unknown = value, []
        else:
            h.unknown.append(value)

    def allowed(self, key: str) -> set[Optional[str]]:
        h = self.keys.get(key)
        if h is None:
            return {None}
        return {h.acked, *h.unknown} if h.acked is not None else {None, *h.unknown}

    def read_ok(self, key: str, got: Optional[str]) -> bool:
        return got in self.allowed(key)

    def saw(self, key: str, got: Optional[str]) -> None:
        """A read that returned one of the unknown-outcome values: it was applied. Later reads may
        no longer return the older ones."""
        h = self.keys.get(key)
        if h is not None and got is not None and got in h.unknown:
            h.acked, h.unknown = got, h.unknown[h.unknown.index(got) + 1:]

    def acked_keys(self) -> list[str]:
        return [k for k, h in self.keys.items() if h.acked is not None]

    def to_json(self) -> dict:
        return {k: {"acked": h.acked, "unknown": h.unknown} for k, h in self.keys.items()}
