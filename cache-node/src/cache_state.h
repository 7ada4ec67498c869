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
#include <unordered_set>

#include "lru_map.h"

namespace exo::cache {

// A key between "Cache() decided to fetch it" and "value inserted". Writes that are prepared or
// committed meanwhile are recorded here so the insert does not resurrect a stale value.
struct FetchState {
  bool cancelled = false;  // an Evict or Reset RPC came meanwhile: insert nothing, whatever follows
  bool prepared = false;  // a Prepare arrived and is not yet committed/aborted
  uint64_t txid = 0;
  bool prepared_delete = false;
  std::string prepared_value;
  bool committed = false;  // a Commit arrived: its outcome wins over the fetched value
  bool committed_delete = false;
  std::string committed_value;
};

// The map is allocated at twice the node's configured capacity: the filler selects at most
// `capacity` keys, and the entries it retires stay in the map (and keep being served) until the
// switch has confirmed their rule removal, so they need room of their own (docs/cache-fill.md 2).
inline size_t map_capacity_for(size_t capacity) { return 2 * capacity; }

struct CacheState {
  explicit CacheState(size_t map_capacity) : map(map_capacity) {}
  std::mutex mu;  // guards everything below
  LruMap map;
  std::unordered_map<std::string, FetchState> fetching;
  // Keys the filler evicted whose rule removal has not been sent yet. Their entries stay in the
  // map and are served normally (the data plane never looks at these sets). Selecting such a key
  // again just takes it out of this set.
  std::unordered_set<std::string> retiring;
  // Keys whose rule removal is in flight (moved here from `retiring` by the retire thread). They
  // are not admitted again until the removal completes, so Add and Remove for one key reach the
  // controller in the order they were decided.
  std::unordered_set<std::string> removing;
  // How many Reset RPCs have run. The filler compares it with the value it last saw to forget
  // what it remembers about held keys (hit rates, rule adds to resend, removals to resend).
  uint64_t resets = 0;

  // The Reset RPC's work (caller holds mu): drops every entry, pending ones too; turns every
  // FETCH in flight into a no-insert; forgets the retirements not sent yet (their rules are gone
  // and their db nodes forgot this node). Keys in `removing` stay there until their in-flight
  // removal is back, so no new FETCH of them can be overtaken by its late EVICT. Returns the
  // number of entries dropped.
  size_t reset() {
    const size_t dropped = map.clear();
    for (auto& [k, fs] : fetching) fs.cancelled = true;
    retiring.clear();
    ++resets;
    return dropped;
  }
};

}  // namespace exo::cache
