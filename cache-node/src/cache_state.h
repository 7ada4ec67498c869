// State shared by the lcores (GET path) and the gRPC control threads (Cache/Evict/2PC).
//
// Concurrency choice: ONE std::mutex around the map. An lcore takes it once per RX burst (not per
// packet) for the lookup/execute phase, so the cost is amortised over up to `burst` frames; the
// control plane holds it only for in-memory map edits, never across an RPC. Correct first and
// simple. A MICA-style design would instead partition the key space (e.g. by key hash, steered to
// queues by RSS/flow director on the dst MAC) so each lcore owns one partition exclusively and
// needs no lock; control-plane edits would then be posted to the owning lcore through a per-lcore
// rte_ring and applied between bursts, and LRU/capacity would become per partition.
#pragma once

#include <mutex>

#include "key_table/key_table.h"
#include "lru_map.h"

namespace exo::cache {

// The map is allocated at twice the node's configured capacity: the filler selects at most
// `capacity` keys, and the entries it retires stay in the map (and keep being served) until the
// switch has confirmed their rule removal, so they need room of their own (docs/cache-fill.md 2).
inline size_t map_capacity_for(size_t capacity) { return 2 * capacity; }

struct CacheState {
  explicit CacheState(size_t map_capacity) : map(map_capacity), keys(map) {}
  std::mutex mu;  // guards both members
  // What the data plane reads per GET (request_handler.cc): the entry's value and pending flag.
  LruMap map;
  // Every key's lifecycle over `map` (fetching, held, pending write, retiring, removing) and its
  // two-phase writes. The control plane changes keys only through it.
  KeyTable keys;
};

}  // namespace exo::cache
