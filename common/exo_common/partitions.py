"""Consistent hashing of the 40-bit key-hash space onto db nodes.

The space is cut into 2^bits equal slots (slot = top `bits` of the hash) so that each slot is
one wildcard rule in the switch (Ruleset 3). Each db node places `vnodes` points on a ring
of the same 40-bit space; a slot belongs to the first point at or after the slot's start.
Adding or removing a db node therefore moves only the slots next to its points.

With few slots per node the ring is uneven (32 nodes on 1,024 slots: owners of 0.75x to 1.28x
the mean), and a uniform workload then saturates the largest owner first. `max_load` > 0 bounds
it the way consistent hashing with bounded loads does (Mirrokni, Thorup, Zadimoghaddam, SODA
2018): no node owns more than ceil(max_load * slots / nodes) slots; a slot whose ring owner is
full walks on along the ring to the next point whose node has room. max_load = 1 caps every
node at ceil(slots / nodes), equal counts when that divides; the walk keeps most slots where
the plain ring puts them.
"""
from __future__ import annotations

import bisect
import math

import xxhash
# The key hash's width is defined once, with the hash (client-lib/exoskeleton/keyhash.py).
from exoskeleton.keyhash import HASH_BITS, HASH_MASK  # noqa: F401


def ring_points(names: list[str], vnodes: int) -> list[tuple[int, str]]:
    points = []
    for name in names:
        for v in range(vnodes):
            points.append((xxhash.xxh64_intdigest(f"{name}#{v}".encode()) & HASH_MASK, name))
    points.sort()
    return points


def partition_table(names: list[str], bits: int, vnodes: int, max_load: float = 0.0) -> list[str]:
    """slot -> db node name, for every slot. max_load > 0: bounded loads (see the top)."""
    if not names:
        raise ValueError("need at least one db node")
    if max_load and max_load < 1:
        raise ValueError("max_load must be 0 (plain ring) or >= 1")
    points = ring_points(names, vnodes)
    keys = [p for p, _ in points]
    slots = 1 << bits
    cap = math.ceil(max_load * slots / len(names)) if max_load else slots
    owned = dict.fromkeys(names, 0)
    table = []
    for slot in range(slots):
        i = bisect.bisect_left(keys, slot << (HASH_BITS - bits))
        while owned[points[i % len(points)][1]] >= cap:
            i += 1
        owner = points[i % len(points)][1]
        owned[owner] += 1
        table.append(owner)
    return table


def slot_of(khash: int, bits: int) -> int:
    return (khash & HASH_MASK) >> (HASH_BITS - bits)
