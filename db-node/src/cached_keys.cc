#include "cached_keys.h"

#include "keyhash.h"

namespace exo::db {

CachedKeys::Guard CachedKeys::lock_key(std::span<const uint8_t> key) { return lock(key_hash(key)); }

const std::string* CachedKeys::Guard::holder(std::string_view key) const {
  // std::string temporary: heterogeneous lookup is not worth a custom hasher for <= 250 bytes,
  // and this runs only on writes and control RPCs.
  auto it = stripe_->holder.find(std::string(key));
  return it == stripe_->holder.end() ? nullptr : &it->second;
}

void CachedKeys::Guard::mark(std::string_view key, std::string_view cache_node) {
  auto [it, inserted] = stripe_->holder.try_emplace(std::string(key), cache_node);
  if (inserted) {
    owner_->count_.fetch_add(1, std::memory_order_relaxed);
  } else {
    it->second.assign(cache_node);
  }
}

bool CachedKeys::Guard::unmark(std::string_view key, std::string_view cache_node) {
  auto it = stripe_->holder.find(std::string(key));
  if (it == stripe_->holder.end() || it->second != cache_node) return false;
  stripe_->holder.erase(it);
  owner_->count_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

std::vector<std::string> CachedKeys::Guard::keys_held_by(std::string_view cache_node) const {
  std::vector<std::string> out;
  for (const auto& [key, node] : stripe_->holder)
    if (node == cache_node) out.push_back(key);
  return out;
}

}  // namespace exo::db
