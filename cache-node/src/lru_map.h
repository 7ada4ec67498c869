// The cache node's in-memory map: fixed capacity, LRU eviction, a per-key hit counter and a
// per-entry 'pending' marker for prepared (two-phase) writes (thesis 3.4.2, 3.8).
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
#include <vector>

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
    bool pending = false;
    uint64_t txid = 0;  // valid while pending
    bool pending_delete = false;
    std::string pending_value;
    uint32_t bucket_next = kNil;
    uint32_t prev = kNil, next = kNil;  // LRU list: prev towards MRU, next towards LRU
  };

  enum class TxResult { kOk, kNotHeld, kNoPending, kTxidMismatch, kBusy, kErased };

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
    e.pending_delete = false;
    e.pending_value.clear();
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

  // ---- two-phase writes (thesis 3.4.2) ----
  // Prepare marks a held key pending; the data plane forwards GETs for it until Commit/Abort.
  // A second Prepare with another txid is refused (kBusy): the db node serialises writes per key.
  TxResult prepare(std::string_view key, uint64_t txid, bool is_delete, std::string_view value) {
    Entry* e = find(key);
    if (!e) return TxResult::kNotHeld;
    // A newer txid supersedes an older pending one: the owning db node resolves (delivers
    // Commit/Abort for) a key's earlier transaction before it prepares a new one, so an older
    // txid still pending here is one whose Prepare arrived late, after its Abort was answered
    // "nothing pending". Refusing would make every later write of the key BUSY for good.
    if (e->pending && e->txid > txid) return TxResult::kBusy;
    if (!e->pending) ++pending_;
    e->pending = true;
    e->txid = txid;
    e->pending_delete = is_delete;
    e->pending_value.assign(value);
    return TxResult::kOk;
  }

  // Applies the prepared write: new value, or erase on delete (kErased).
  TxResult commit(std::string_view key, uint64_t txid) {
    Entry* e = find(key);
    if (!e) return TxResult::kNotHeld;
    if (!e->pending) return TxResult::kNoPending;
    if (e->txid != txid) return TxResult::kTxidMismatch;
    if (e->pending_delete) {
      erase_index(index_of(e));
      return TxResult::kErased;
    }
    e->value.swap(e->pending_value);
    clear_pending(*e);
    return TxResult::kOk;
  }

  TxResult abort(std::string_view key, uint64_t txid) {
    Entry* e = find(key);
    if (!e) return TxResult::kNotHeld;
    if (!e->pending) return TxResult::kNoPending;
    if (e->txid != txid) return TxResult::kTxidMismatch;
    clear_pending(*e);
    return TxResult::kOk;
  }

 private:
  uint32_t index_of(const Entry* e) const { return static_cast<uint32_t>(e - pool_.data()); }

  void clear_pending(Entry& e) {
    if (e.pending) --pending_;
    e.pending = false;
    e.pending_delete = false;
    e.pending_value.clear();
    e.pending_value.shrink_to_fit();
  }

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
