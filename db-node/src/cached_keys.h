// Which of this node's keys a cache node holds (thesis 3.6.1), and the per-key write lock.
// This is the in-memory copy; Cf::kCached holds the durable one (marks.h writes both, and
// start-up loads it back, recovery.h).
//
// A cache node FETCHes a key before caching it and EVICTs it after dropping it; in between,
// every PUT/DELETE of the key must be propagated to that cache node before the client is
// acknowledged (thesis 3.4.2). The map and the lock live together in 1024 stripes chosen by
// key hash: a write holds its stripe for the whole propagate+write sequence and Fetch holds
// it while it marks the key and reads the value, so a Fetch can never read a value that a
// concurrent, already-propagated-elsewhere write is about to replace, and two writes of one
// key (from different packet threads) are applied in one order on both nodes. Stripes are
// cache-line aligned so threads working on different stripes do not false-share.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace exo::db {

class CachedKeys {
 public:
  static constexpr size_t kStripes = 1024;

 private:
  struct alignas(64) Stripe {
    std::mutex mu;
    std::unordered_map<std::string, std::string> holder;  // key -> cache node name
  };

 public:
  // Proof that a stripe is locked; all map access goes through it. Move-only.
  class Guard {
   public:
    // The cache node holding `key`, or nullptr. The pointer is valid while the guard lives
    // and the key is not unmarked.
    const std::string* holder(std::string_view key) const;
    // Records that `cache_node` holds `key` (replacing any previous holder).
    void mark(std::string_view key, std::string_view cache_node);
    // Forgets `key` if `cache_node` holds it. Returns whether it did.
    bool unmark(std::string_view key, std::string_view cache_node);
    // The keys of this stripe that `cache_node` holds (ForgetCacheNode walks every stripe).
    std::vector<std::string> keys_held_by(std::string_view cache_node) const;

   private:
    friend class CachedKeys;
    Guard(CachedKeys& owner, Stripe& s) : owner_(&owner), stripe_(&s), lock_(s.mu) {}
    CachedKeys* owner_;
    Stripe* stripe_;
    std::unique_lock<std::mutex> lock_;
  };

  // Locks the stripe of a key whose 40-bit key hash is `hash` (wire key_hash).
  Guard lock(uint64_t hash) { return Guard(*this, stripes_[hash % kStripes]); }
  // Convenience: hashes the key first.
  Guard lock_key(std::span<const uint8_t> key);
  // Stripe number i (0 <= i < kStripes), for walks over every key.
  Guard lock_stripe(size_t i) { return Guard(*this, stripes_[i % kStripes]); }

  // Gauge: keys currently tracked.
  uint64_t size() const { return count_.load(std::memory_order_relaxed); }

 private:
  Stripe stripes_[kStripes];
  std::atomic<uint64_t> count_{0};
};

inline std::string_view as_sv(std::span<const uint8_t> b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace exo::db
