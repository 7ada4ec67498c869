// Insert-after-FETCH, shared by the Cache RPC and the filler: a FETCH's reply handed to the key
// table, which decides per key whether its value may be inserted and which value (a write
// committed meanwhile wins; docs/cache-fill.md 4).
#pragma once

#include <cstddef>

#include "cache_state.h"
#include "peers.h"

namespace exo::cache {

// InsertOutcome (key_table.h): what the caller must ask rules for, remove, EVICT.

// Caller holds state.mu and had every key of `want` admitted for FETCH by state.keys. LRU
// victims are left removing: the caller removes their rules, EVICTs them, then calls
// state.keys.removal_done(outcome.evicted).
InsertOutcome insert_fetched(CacheState& state, const Keys& want, const FetchResult& fetched,
                             size_t max_kv_bytes);

}  // namespace exo::cache
