"""Which db node owns which key: the cluster's own key hash and consistent hashing.

Keys are ids 0..n-1 named like the emulator's fixed-width keys (emulator/loadgen/hot_set_swap.h
key_name: "key:" + 12 zero-padded digits = 16 bytes, the thesis's key size). A key's hash is
the cluster's one key hash (client-lib exoskeleton.keyhash.key_hash: low 40 bits of XXH64), and
its owner follows from the hash in one of two ways:

  even  the 40-bit hash space cut into N equal arcs: owner = hash * N >> 40. Consistent hashing
        with perfectly even arcs, as with very many virtual nodes. The default: the thesis's
        emulator gives every wimpy node the same share, and a cache cannot fix an uneven split
        of the *tail* (no cache size makes a node with 1.3/N of the hash space reach the others).
  ring  the controller's own partition table (exo_common.partitions.partition_table: 2^bits
        slots, `vnodes` points per node on the ring), exactly what Ruleset 3 installs.

Only explicitly modelled keys (the hottest ranks, and in the dynamic run the swapped ones) are
hashed; the tail goes to each node in proportion to its share of the hash space.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from exo_common.partitions import partition_table
from exoskeleton.keyhash import HASH_BITS, key_hash

KEY_WIDTH = 16
_hash_memo: dict[int, int] = {}
_prefix_hashes = np.zeros(0, dtype=np.uint64)  # hashes of ids 0..len-1


def key_name(key_id: int) -> bytes:
    return b"key:%012d" % key_id


def key_names(ids: np.ndarray) -> np.ndarray:
    """Fixed-width names of many ids as a numpy 'S16' array (what the ctypes selector takes)."""
    return np.array([key_name(int(i)) for i in ids], dtype=f"S{KEY_WIDTH}")


def key_hashes(ids: np.ndarray) -> np.ndarray:
    """40-bit key hashes of ids (uint64). Ids below a million or so are memoised as a prefix."""
    global _prefix_hashes
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return np.zeros(0, dtype=np.uint64)
    small = ids < 2_000_000
    if small.any():
        need = int(ids[small].max()) + 1
        if need > len(_prefix_hashes):
            more = np.fromiter((key_hash(key_name(i)) for i in range(len(_prefix_hashes), need)),
                               dtype=np.uint64, count=need - len(_prefix_hashes))
            _prefix_hashes = np.concatenate((_prefix_hashes, more))
    out = np.empty(ids.size, dtype=np.uint64)
    out[small] = _prefix_hashes[ids[small]]
    for j in np.flatnonzero(~small):
        i = int(ids[j])
        if i not in _hash_memo:
            _hash_memo[i] = key_hash(key_name(i))
        out[j] = _hash_memo[i]
    return out


@dataclass
class Placement:
    """Owner of a hash, and each node's share of the hash space, for N db nodes."""
    nodes: int
    mode: str = "even"
    partition_bits: int = 12
    vnodes: int = 64

    def __post_init__(self) -> None:
        if self.mode == "even":
            self.fraction = np.full(self.nodes, 1.0 / self.nodes)
            self._table = None
        elif self.mode == "ring":
            names = [f"db{i}" for i in range(self.nodes)]
            index = {name: i for i, name in enumerate(names)}
            self._table = np.array([index[o] for o in partition_table(names, self.partition_bits, self.vnodes)],
                                   dtype=np.int64)
            self.fraction = np.bincount(self._table, minlength=self.nodes) / len(self._table)
        else:
            raise ValueError(f"placement mode must be 'even' or 'ring', not {self.mode!r}")

    def owner(self, hashes: np.ndarray) -> np.ndarray:
        h = np.asarray(hashes, dtype=np.uint64)
        if self._table is None:
            return ((h * np.uint64(self.nodes)) >> np.uint64(HASH_BITS)).astype(np.int64)
        return self._table[(h >> np.uint64(HASH_BITS - self.partition_bits)).astype(np.int64)]

    def owners_of_ids(self, ids: np.ndarray) -> np.ndarray:
        return self.owner(key_hashes(ids))

    def describe(self) -> dict:
        d = {"mode": self.mode, "share_min": float(self.fraction.min()) * self.nodes,
             "share_max": float(self.fraction.max()) * self.nodes}
        if self.mode == "ring":
            d.update(partition_bits=self.partition_bits, virtual_nodes=self.vnodes)
        return d


def node_shares(owner: np.ndarray, p: np.ndarray, tail_mass: float, placement: Placement,
                cached: np.ndarray | None = None) -> np.ndarray:
    """Each db node's share of all requests: its explicit keys' probabilities (minus those in
    the boolean mask `cached`, which the switch sends to the cache) plus its expected tail."""
    w = p if cached is None else np.where(cached, 0.0, p)
    return np.bincount(owner, weights=w, minlength=placement.nodes) + tail_mass * placement.fraction
