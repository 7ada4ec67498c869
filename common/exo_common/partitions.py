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


def chain_table(names: list[str], bits: int, vnodes: int, max_load: float = 0.0, rf: int = 1) -> list[list[str]]:
    """slot -> [head, ..., tail], min(rf, len(names)) distinct db node names
    (docs/design/replication.md, 2.1).

    The head is partition_table's owner, so rf = 1 is exactly today's table. The middles are
    the next distinct nodes clockwise on the ring from the head's point (FAWN-KV's placement);
    the tail is the next distinct node after them. GETs that miss the cache go to the tail, so
    with max_load > 0 the tail is capped too: a node that already tails
    ceil(max_load * slots / nodes) slots is passed over, and if every candidate is full the
    first one is taken. This is the initial layout only: a running cluster edits its table and
    never recomputes it from the ring.
    """
    if rf < 1:
        raise ValueError("rf must be >= 1")
    heads = partition_table(names, bits, vnodes, max_load)
    length = min(rf, len(set(names)))
    if length == 1:
        return [[head] for head in heads]
    points = ring_points(names, vnodes)
    keys = [p for p, _ in points]
    slots = 1 << bits
    tail_cap = math.ceil(max_load * slots / len(names)) if max_load else slots
    tails = dict.fromkeys(names, 0)
    table = []
    for slot, head in enumerate(heads):
        # The head's point: partition_table walked from the slot's start to the first point of
        # a node with room, so the first point of the head from there is the one it took.
        i = bisect.bisect_left(keys, slot << (HASH_BITS - bits))
        while points[i % len(points)][1] != head:
            i += 1
        chain = [head]
        while len(chain) < length - 1:
            i += 1
            name = points[i % len(points)][1]
            if name not in chain:
                chain.append(name)
        first = pick = None
        for _ in range(len(points)):
            i += 1
            name = points[i % len(points)][1]
            if name in chain:
                continue
            first = first or name
            if tails[name] < tail_cap:
                pick = name
                break
        tail = pick or first
        tails[tail] += 1
        table.append(chain + [tail])
    return table


def check_chains(chains: list[list[str]], partitions: list[str], factor: int,
                 members: list[str] | None = None) -> None:
    """Raise ValueError naming `chains[i]` unless `chains` is a usable slot -> chain table: one
    chain per slot of `partitions`, each non-empty, of at most `factor` distinct nodes, headed
    by the slot's owner in `partitions`, and (given `members`) naming member db nodes only.
    resolve() holds its own output to this; the C++ reader (common/cpp/cluster.cc) makes the
    same checks on the file."""
    if len(chains) != len(partitions):
        raise ValueError(f"chains: {len(chains)} entries, partitions has {len(partitions)}")
    known = None if members is None else set(members)
    for i, chain in enumerate(chains):
        where = f"chains[{i}]"
        if not chain:
            raise ValueError(f"{where}: empty")
        if len(chain) > factor:
            raise ValueError(f"{where}: {len(chain)} nodes, more than replication.factor {factor}")
        seen: set[str] = set()
        for k, name in enumerate(chain):
            if name in seen:
                raise ValueError(f"{where}: repeats db node {name!r}")
            seen.add(name)
            if known is not None and name not in known:
                raise ValueError(f"{where}[{k}]: {name!r} is not a member db node")
        if chain[0] != partitions[i]:
            raise ValueError(f"{where}[0]: head {chain[0]!r}, but partitions[{i}] is {partitions[i]!r}")


def slot_of(khash: int, bits: int) -> int:
    return (khash & HASH_MASK) >> (HASH_BITS - bits)
