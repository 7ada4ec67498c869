// The cache node's in-memory map: fixed capacity, LRU eviction, a per-key hit counter and a
// per-entry 'pending' marker for prepared (two-phase) writes (thesis 3.4.2, 3.8). The map only
// stores; when a write is prepared, committed or aborted is decided by the key table
// (key_table/key_table.h), which owns every key's lifecycle.
//
// Why a hand-rolled table instead of std::unordered_map: the data plane prefetches the bucket of
// every key in an RX burst before looking any of them up (MICA-style batching), which needs a
// bucket array we can address by hash. Entries live in one preallocated pool (capacity is fixed),
// so the hot path never allocates except when a value grows.
//
// Not thread-safe: the owner (CacheState) serialises access with one lock. Keys and values are
// opaque bytes; the caller supplies the key's hash (the data plane already has it; see hash_of).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "key_table/prepared_write.h"
#include "keyhash.h"

namespace exo::cache {

class LruMap {
 public:
  static constexpr uint32_t kNil = UINT32_MAX;

  struct Entry {
    std::string key;
    std::string value;
    uint64_t hash = 0;
    uint64_t hits = 0;  // frequency counter: GET hits since insert
    bool pending = false;    // a write is prepared: the data plane forwards GETs for the key
    PreparedWrite prepared;  // valid while pending
    uint32_t bucket_next = kNil;
    uint32_t prev = kNil, next = kNil;  // LRU list: prev towards MRU, next towards LRU
  };

  static uint64_t hash_of(std::string_view key) {
    return exo::key_hash({reinterpret_cast<const uint8_t*>(key.data()), key.size()});
  }

  explicit LruMap(size_t capacity) : pool_(capacity) {
    size_t nb = 16;
    while (nb < 2 * capacity) nb <<= 1;  // load factor <= 0.5: short chains
    buckets_.assign(nb, kNil);
    mask_ = nb - 1;
    for (uint32_t i = 0; i < capacity; ++i) pool_[i].next = i + 1 < capacity ? i + 1 : kNil;
    free_ = capacity ? 0 : kNil;
  }

  size_t capacity() const { return pool_.size(); }
  size_t size() const { return size_; }
  size_t pending_count() const { return pending_; }

  // Pulls the bucket head into cache; issued for a whole burst before its lookups.
  void prefetch(uint64_t hash) const { __builtin_prefetch(&buckets_[hash & mask_]); }

  // Lookup without side effects.
  Entry* find(std::string_view key, uint64_t hash) {
    for (uint32_t i = buckets_[hash & mask_]; i != kNil; i = pool_[i].bucket_next) {
      Entry& e = pool_[i];
      if (e.hash == hash && e.key == key) return &e;
    }
    return nullptr;
  }
  Entry* find(std::string_view key) { return find(key, hash_of(key)); }

  // A GET: move to MRU and bump the frequency counter.
  Entry* touch(std::string_view key, uint64_t hash) {
    Entry* e = find(key, hash);
    if (e) {
      ++e->hits;
      move_to_front(index_of(e));
    }
    return e;
  }
  Entry* touch(std::string_view key) { return touch(key, hash_of(key)); }

  // Inserts (or overwrites, keeping the hit count) at MRU. At capacity the LRU entries are
  // evicted and their keys appended to `evicted` so the caller can remove their switch rules.
  Entry* insert(std::string_view key, std::string_view value, std::vector<std::string>* evicted,
                uint64_t hash) {
    if (Entry* e = find(key, hash)) {
      e->value.assign(value);
      move_to_front(index_of(e));
      return e;
    }
    if (pool_.empty()) return nullptr;
    if (free_ == kNil) {
      Entry& victim = pool_[tail_];
      if (evicted) evicted->push_back(victim.key);
      erase_index(tail_);
    }
    const uint32_t i = free_;
    free_ = pool_[i].next;
    Entry& e = pool_[i];
    e.key.assign(key);
    e.value.assign(value);
    e.hash = hash;
    e.hits = 0;
    e.pending = false;
    e.prepared = {};
    e.bucket_next = buckets_[hash & mask_];
    buckets_[hash & mask_] = i;
    link_front(i);
    ++size_;
    return &e;
  }
  Entry* insert(std::string_view key, std::string_view value, std::vector<std::string>* evicted) {
    return insert(key, value, evicted, hash_of(key));
  }

  bool erase(std::string_view key, uint64_t hash) {
    Entry* e = find(key, hash);
    if (!e) return false;
    erase_index(index_of(e));
    return true;
  }
  bool erase(std::string_view key) { return erase(key, hash_of(key)); }

  // Drops every entry, pending ones too. Returns how many there were.
  size_t clear() {
    const size_t n = size_;
    for (uint32_t i = head_; i != kNil;) {
      const uint32_t next = pool_[i].next;
      erase_index(i);
      i = next;
    }
    return n;
  }

  // Keys from MRU to LRU.
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(size_);
    for (uint32_t i = head_; i != kNil; i = pool_[i].next) out.push_back(pool_[i].key);
    return out;
  }

  // Calls f(const Entry&) for every entry, MRU first (the filler samples hit counters this way).
  template <typename F>
  void for_each(F&& f) const {
    for (uint32_t i = head_; i != kNil; i = pool_[i].next) f(pool_[i]);
  }

  // ---- the prepared write of an entry (decided by KeyTable, kept here for the data plane) ----
  void set_pending(Entry& e, PreparedWrite w) {
    if (!e.pending) ++pending_;
    e.pending = true;
    e.prepared = std::move(w);
  }

  void clear_pending(Entry& e) {
    if (e.pending) --pending_;
    e.pending = false;
    e.prepared.is_delete = false;
    e.prepared.value.clear();
    e.prepared.value.shrink_to_fit();
  }

 private:
  uint32_t index_of(const Entry* e) const { return static_cast<uint32_t>(e - pool_.data()); }

  void link_front(uint32_t i) {
    pool_[i].prev = kNil;
    pool_[i].next = head_;
    if (head_ != kNil) pool_[head_].prev = i;
    head_ = i;
    if (tail_ == kNil) tail_ = i;
  }

  void unlink(uint32_t i) {
    Entry& e = pool_[i];
    if (e.prev != kNil) pool_[e.prev].next = e.next; else head_ = e.next;
    if (e.next != kNil) pool_[e.next].prev = e.prev; else tail_ = e.prev;
    e.prev = e.next = kNil;
  }

  void move_to_front(uint32_t i) {
    if (head_ == i) return;
    unlink(i);
    link_front(i);
  }

  void erase_index(uint32_t i) {
    Entry& e = pool_[i];
    uint32_t* link = &buckets_[e.hash & mask_];
    while (*link != i) link = &pool_[*link].bucket_next;
    *link = e.bucket_next;
    unlink(i);
    clear_pending(e);
    e.key.clear();
    e.value.clear();
    e.value.shrink_to_fit();  // a freed slot should not pin a large value's memory
    e.bucket_next = kNil;
    e.next = free_;
    free_ = i;
    --size_;
  }

  std::vector<Entry> pool_;
  std::vector<uint32_t> buckets_;
  size_t mask_ = 0;
  uint32_t free_ = kNil;  // free list threaded through Entry::next
  uint32_t head_ = kNil, tail_ = kNil;
  size_t size_ = 0;
  size_t pending_ = 0;
};

}  // namespace exo::cache
