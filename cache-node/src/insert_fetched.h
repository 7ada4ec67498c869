// Insert-after-FETCH, shared by the Cache RPC and the filler: the one place that turns fetched
// values plus the writes recorded meanwhile (FetchState) into map entries (docs/cache-fill.md 4).
#pragma once

#include <cstddef>

#include "cache_state.h"
#include "peers.h"

namespace exo::cache {

struct InsertOutcome {
  Keys inserted;    // in the map now (and still there after the whole batch)
  Keys not_cached;  // not found, deleted while fetching, or too big for one reply frame:
                    // the caller should EVICT them so their db node stops tracking them
  Keys failed;      // their db node could not be asked; nothing to undo
  Keys cancelled;   // an Evict or Reset RPC came during the FETCH: not inserted; the caller
                    // should EVICT them too (the FETCH may have reached the db node after it)
  Keys evicted;     // LRU victims of these inserts (entries gone; rules and db tracking remain),
                    // including keys of this batch pushed out by later ones
};

// Caller holds state.mu and had put every key of `want` into state.fetching (this removes them).
// A write committed while fetching wins over the fetched value; a write still prepared is
// re-applied as pending on the new entry; a cancelled FETCH inserts nothing. LRU victims also
// leave the retiring/removing sets: the caller removes their rules itself.
InsertOutcome insert_fetched(CacheState& state, const Keys& want, const FetchResult& fetched,
                             size_t max_kv_bytes);

}  // namespace exo::cache
