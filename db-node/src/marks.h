// Marking and unmarking a key as held by a cache node, in memory (CachedKeys) and on disk
// (Cf::kCached) together, always under the key's stripe lock (the caller's Guard).
//
// The two directions are not symmetric. A MISSING mark is dangerous: a write would not be
// propagated and the cache node would go on serving the old value, so a mark is durable before
// it is used (before Fetch hands the value out). A STALE mark is harmless: the next write pays
// a Prepare that the cache node answers cached=false, and the write unmarks the key. So an
// unmark may lose its disk half (it is not synced, and a failed delete is only reported).
#pragma once

#include <string>
#include <string_view>

#include "cached_keys.h"
#include "store.h"

namespace exo::db {

// Writes the mark (Durability::kAsConfigured), then records it in memory. On failure the key
// is not marked in memory either and the caller must not give the value to the cache node.
StoreResult mark_held(KvStore& store, CachedKeys::Guard& guard, std::string_view key,
                      std::string_view cache_node);

// If `cache_node` holds `key`: deletes the disk mark (Durability::kRelaxed) and unmarks it in
// memory, even when the delete failed (then *error says why). Returns whether it was held.
bool unmark_held(KvStore& store, CachedKeys::Guard& guard, std::string_view key,
                 std::string_view cache_node, std::string* error);

}  // namespace exo::db
