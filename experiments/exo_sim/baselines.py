"""The four ways to put (or not put) a cache in front of the db nodes, as throughput.Loads.

All caches hold the same keys (the set the cache node's selection picks) and have the same
capacity; they differ in which requests reach the cache and what a miss costs it:

  no_cache      every request goes to its key's db node.
  exoskeleton   the switch sends GETs for cached keys to the cache node and everything else
                straight to the db nodes (Ruleset 2 over Ruleset 3): the cache sees hits only.
  look_aside    the client asks the cache first and, on a miss, asks the db node (memcached
                style). Every request costs the cache one lookup (`lookaside_miss_cost`, default
                1: a miss is a lookup and a short "not found"), so lambda <= cache capacity.
  read_through  a front-end cache (Fan et al., "Small Cache, Big Effect", SoCC'11) that every
                request passes: it answers hits and forwards misses to the db node, relaying the
                reply (`readthrough_miss_cost`, default 2: forward the request and relay the
                response besides the lookup). Its capacity bounds the whole cluster.
For look_aside and read_through a request the overloaded cache drops never reaches a db node
(throughput.Loads.gate).

  ideal         Exoskeleton with the uncached traffic spread perfectly evenly: every db node
                reaches its limit at the same offered rate, plus what the cache takes. Under the
                0% rule it is min(db_total / (1 - h), cache_cap / h) (throughput.ideal).
"""
from __future__ import annotations

import numpy as np

from .throughput import Loads

SYSTEMS = ("no_cache", "exoskeleton", "look_aside", "read_through")
WITH_IDEAL = (*SYSTEMS, "ideal")
LABELS = {"ideal": "ideal (balanced db nodes + cache)", "no_cache": "no cache", "exoskeleton": "Exoskeleton (switch-routed)",
          "look_aside": "look-aside cache", "read_through": "read-through front-end (Fan et al.)"}


def systems(base: np.ndarray, cached: np.ndarray, hit: float, lookaside_miss_cost: float = 1.0,
            readthrough_miss_cost: float = 2.0) -> dict[str, Loads]:
    """Loads of each system. base: each db node's share of all requests; cached: the part of it
    that belongs to cached keys (per node); hit: the cached keys' total share."""
    uncached = np.maximum(base - cached, 0.0)
    miss = 1.0 - hit
    return {
        "no_cache": Loads(db=base),
        "exoskeleton": Loads(db=uncached, hit=hit, cache_work=hit),
        "look_aside": Loads(db=uncached, hit=hit, cache_work=hit + miss * lookaside_miss_cost, gate=True),
        "read_through": Loads(db=uncached, hit=hit, cache_work=hit + miss * readthrough_miss_cost, gate=True),
        "ideal": Loads(db=np.full(len(base), miss / len(base)), hit=hit, cache_work=hit),
    }


NOTES = {
    "no_cache": "every request to its key's db node",
    "exoskeleton": "switch routes GETs of cached keys to the cache node; the cache sees hits only",
    "look_aside": "client asks the cache first, on a miss the db node; every request costs the cache 1",
    "read_through": "front-end cache every request passes; a miss costs it 2 (lookup+forward, relay reply)",
    "ideal": "Exoskeleton with the uncached traffic spread evenly over equal db nodes",
}
