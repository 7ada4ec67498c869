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
#include <string>
#include <unordered_map>

#include "lru_map.h"

namespace exo::cache {

// A key between "Cache() decided to fetch it" and "value inserted". Writes that are prepared or
// committed meanwhile are recorded here so the insert does not resurrect a stale value.
struct FetchState {
  bool prepared = false;  // a Prepare arrived and is not yet committed/aborted
  uint64_t txid = 0;
  bool prepared_delete = false;
  std::string prepared_value;
  bool committed = false;  // a Commit arrived: its outcome wins over the fetched value
  bool committed_delete = false;
  std::string committed_value;
};

struct CacheState {
  explicit CacheState(size_t capacity) : map(capacity) {}
  std::mutex mu;  // guards everything below
  LruMap map;
  std::unordered_map<std::string, FetchState> fetching;
};

}  // namespace exo::cache
