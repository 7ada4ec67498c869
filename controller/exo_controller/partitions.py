"""Consistent hashing of the 40-bit key-hash space onto db nodes.

The space is cut into 2^bits equal slots (slot = top `bits` of the hash) so that each slot is
one wildcard rule in the switch (Ruleset 3). Each db node places `vnodes` points on a ring
of the same 40-bit space; a slot belongs to the first point at or after the slot's start.
Adding or removing a db node therefore moves only the slots next to its points.
"""
from __future__ import annotations

import bisect

import xxhash

HASH_BITS = 40
HASH_MASK = (1 << HASH_BITS) - 1


def ring_points(names: list[str], vnodes: int) -> list[tuple[int, str]]:
    points = []
    for name in names:
        for v in range(vnodes):
            points.append((xxhash.xxh64_intdigest(f"{name}#{v}".encode()) & HASH_MASK, name))
    points.sort()
    return points


def partition_table(names: list[str], bits: int, vnodes: int) -> list[str]:
    """slot -> db node name, for every slot."""
    if not names:
        raise ValueError("need at least one db node")
    points = ring_points(names, vnodes)
    keys = [p for p, _ in points]
    table = []
    for slot in range(1 << bits):
        start = slot << (HASH_BITS - bits)
        i = bisect.bisect_left(keys, start)
        table.append(points[i % len(points)][1])
    return table


def slot_of(khash: int, bits: int) -> int:
    return (khash & HASH_MASK) >> (HASH_BITS - bits)
