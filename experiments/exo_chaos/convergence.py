"""Do a chain's members hold the same data once the load has stopped? (docs/design/replication.md,
section 6). Every member of a slot's chain must report the same key count and digest for the slot
(DbNode.SlotDigest); a slot where they differ is a write that reached some replicas and not
others, which chain replication must never leave behind once its writes are acknowledged or
resolved.

Pure comparison (diverged_slots) apart from the RPCs (chain_digests), so the check itself is
unit-tested against a known-bad set of digests.
"""
from __future__ import annotations

from typing import Callable


def diverged_slots(chains: list[list[str]], digests: dict[str, dict[int, tuple[int, int]]]) -> list[dict]:
    """chains: slot -> member names; digests: member -> slot -> (keys, digest). A slot a member
    holds no key of counts as (0, 0). Returns one entry per slot whose members disagree."""
    out = []
    for slot, members in enumerate(chains):
        seen = {m: digests.get(m, {}).get(slot, (0, 0)) for m in members}
        if len(set(seen.values())) > 1:
            out.append({"slot": slot, "members": {m: {"keys": k, "digest": f"{d:016x}"}
                                                  for m, (k, d) in seen.items()}})
    return out


def chain_digests(chains: list[list[str]], slot_digests: Callable[[str], dict[int, tuple[int, int]]]) -> dict:
    """Asks every member (slot_digests: Stubs.slot_digests) and compares: a dict for the
    campaign's JSON."""
    members = sorted({m for c in chains for m in c})
    digests = {m: slot_digests(m) for m in members}
    bad = diverged_slots(chains, digests)
    return {"slots_checked": sum(1 for c in chains if len(c) > 1), "diverged": bad,
            "converged": not bad}
