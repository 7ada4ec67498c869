#include "marks.h"

namespace exo::db {

StoreResult mark_held(KvStore& store, CachedKeys::Guard& guard, std::string_view key,
                      std::string_view cache_node) {
  const StoreOp op = StoreOp::put(Cf::kCached, bytes_of(key), bytes_of(cache_node));
  StoreResult r = store.write(std::span<const StoreOp>(&op, 1), Durability::kAsConfigured);
  if (r.ok()) guard.mark(key, cache_node);
  return r;
}

bool unmark_held(KvStore& store, CachedKeys::Guard& guard, std::string_view key,
                 std::string_view cache_node, std::string* error) {
  const std::string* holder = guard.holder(key);
  if (!holder || *holder != cache_node) return false;
  const StoreOp op = StoreOp::del(Cf::kCached, bytes_of(key));
  const StoreResult r = store.write(std::span<const StoreOp>(&op, 1), Durability::kRelaxed);
  if (!r.ok()) *error = r.error;
  guard.unmark(key, cache_node);
  return true;
}

}  // namespace exo::db
