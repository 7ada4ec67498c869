// Space-Saving (Metwally, Agrawal and El Abbadi, 2005) over a stream summary: the top-k
// estimator of one time segment of the db node's hot-key detector (docs/cache-fill.md, 1).
//
// At most k keys are tracked, each with a count and an error such that
//   count - error <= true count <= count,
// and every key whose true count exceeds total()/k is tracked.
//
// Layout (all preallocated for k, indices instead of pointers, so steady state does not
// allocate; a new key's bytes are copied into the evicted counter's std::string, whose capacity
// is reused):
//  - counters: a pool of k slots {key, error, bucket, prev, next};
//  - buckets: a doubly linked list in increasing count order; each bucket holds the counters
//    that share its count in a doubly linked list, most recently visited at the head. A key
//    enters a bucket exactly when it is visited, so the tail is the least recently visited;
//  - index: an open-addressing (linear probing, backward-shift delete) table key -> counter,
//    at most half full, so a lookup is one hash and usually one string compare.
//
// Not thread-safe: HotKeyDetector serializes access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace exo::db {

class SpaceSaving {
 public:
  struct Entry {
    std::string key;
    uint64_t count = 0;
    uint64_t error = 0;  // count - error is a lower bound on the key's true count
  };

  explicit SpaceSaving(size_t k);  // k >= 1

  // One occurrence of `key`. O(1).
  void offer(std::string_view key);

  size_t capacity() const { return counters_.size(); }
  size_t size() const { return used_; }
  uint64_t total() const { return total_; }  // offers since construction or clear()
  // The lowest tracked count when k keys are tracked, else 0: in both cases an upper bound on
  // the true count of any untracked key (no key has been evicted before the summary is full).
  uint64_t min_count() const;

  // The estimate for `key`; an untracked key gives {count 0, error 0}.
  Entry get(std::string_view key) const;

  // Calls f(std::string_view key, uint64_t count, uint64_t error) for every tracked key, highest
  // count first (within one count: most recently visited first). The views are valid until the
  // next offer() or clear().
  template <typename F>
  void for_each(F&& f) const {
    for (uint32_t b = bucket_tail_; b != kNil; b = buckets_[b].prev)
      for (uint32_t c = buckets_[b].head; c != kNil; c = counters_[c].next)
        f(std::string_view(counters_[c].key), buckets_[b].count, counters_[c].error);
  }

  // The n keys with the highest counts, highest first (for_each order).
  std::vector<Entry> top(size_t n) const;

  // Forgets everything but keeps the memory (key strings included) for the next segment.
  void clear();

 private:
  static constexpr uint32_t kNil = UINT32_MAX;

  struct Counter {
    std::string key;
    uint64_t error = 0;
    uint32_t tag = 0;  // as in its slot, so evicting it needs no rehash
    uint32_t bucket = kNil;
    uint32_t prev = kNil;  // towards the bucket's head (more recently visited)
    uint32_t next = kNil;  // towards the bucket's tail
  };
  struct Bucket {
    uint64_t count = 0;
    uint32_t head = kNil, tail = kNil;  // counters
    uint32_t prev = kNil, next = kNil;  // lower / higher count; `next` also links the free list
  };
  struct Slot {
    uint32_t counter = kNil;  // kNil: empty
    uint32_t tag = 0;         // low 32 bits of the key's hash: home slot and a cheap pre-compare
  };

  static uint64_t hash(std::string_view key);
  // The slot holding `key`, or the empty slot where it would go.
  size_t find_slot(std::string_view key, uint32_t tag) const;
  void erase_slot(size_t i);

  uint32_t new_bucket(uint64_t count);
  void free_bucket(uint32_t b);
  void link_bucket_after(uint32_t b, uint32_t after);  // after == kNil: at the front
  void unlink_bucket(uint32_t b);
  void push_head(uint32_t b, uint32_t c);
  void remove_from_bucket(uint32_t c);  // frees the bucket if it becomes empty
  // Moves counter c from its bucket (count n) to the head of the bucket for n+1.
  void increment(uint32_t c);

  std::vector<Counter> counters_;
  std::vector<Bucket> buckets_;  // k + 1: increment() creates the new bucket before freeing
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t used_ = 0;  // counters_[0..used_) are in use
  uint32_t free_buckets_ = kNil;
  uint32_t bucket_head_ = kNil;  // lowest count
  uint32_t bucket_tail_ = kNil;  // highest count
  uint64_t total_ = 0;
};

}  // namespace exo::db
