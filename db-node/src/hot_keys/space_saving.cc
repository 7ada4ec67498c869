#include "hot_keys/space_saving.h"

// Inlined: keys are short, and a call into libxxhash cost as much as the hashing itself.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <bit>

namespace exo::db {

SpaceSaving::SpaceSaving(size_t k) : counters_(std::max<size_t>(k, 1)), buckets_(counters_.size() + 1) {
  // At most half full: linear probing stays short even when every slot churns.
  slots_.resize(std::bit_ceil(2 * counters_.size()));
  mask_ = slots_.size() - 1;
  clear();
}

void SpaceSaving::clear() {
  for (Slot& s : slots_) s.counter = kNil;
  for (Counter& c : counters_) {
    c.key.clear();  // keeps the capacity for the next segment's keys
    c.bucket = c.prev = c.next = kNil;
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    buckets_[i] = Bucket{};
    buckets_[i].next = i + 1 < buckets_.size() ? static_cast<uint32_t>(i + 1) : kNil;
  }
  free_buckets_ = 0;
  bucket_head_ = bucket_tail_ = kNil;
  used_ = 0;
  total_ = 0;
}

uint64_t SpaceSaving::hash(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

size_t SpaceSaving::find_slot(std::string_view key, uint32_t tag) const {
  for (size_t i = tag & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.counter == kNil) return i;
    if (s.tag == tag && counters_[s.counter].key == key) return i;
  }
}

void SpaceSaving::erase_slot(size_t i) {
  // Backward-shift deletion: pull later members of the probe run into the hole when their home
  // slot allows it, so lookups never need tombstones.
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask_;
    if (slots_[j].counter == kNil) break;
    const size_t home = slots_[j].tag & mask_;
    if (((j - home) & mask_) >= ((j - i) & mask_)) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i].counter = kNil;
}

uint32_t SpaceSaving::new_bucket(uint64_t count) {
  // Cannot run dry: k counters occupy at most k buckets, and one more exists only transiently.
  const uint32_t b = free_buckets_;
  free_buckets_ = buckets_[b].next;
  buckets_[b] = Bucket{};
  buckets_[b].count = count;
  return b;
}

void SpaceSaving::free_bucket(uint32_t b) {
  buckets_[b].next = free_buckets_;
  free_buckets_ = b;
}

void SpaceSaving::link_bucket_after(uint32_t b, uint32_t after) {
  Bucket& nb = buckets_[b];
  nb.prev = after;
  nb.next = after == kNil ? bucket_head_ : buckets_[after].next;
  if (nb.next != kNil) buckets_[nb.next].prev = b;
  else bucket_tail_ = b;
  if (after != kNil) buckets_[after].next = b;
  else bucket_head_ = b;
}

void SpaceSaving::unlink_bucket(uint32_t b) {
  const Bucket& ob = buckets_[b];
  if (ob.prev != kNil) buckets_[ob.prev].next = ob.next;
  else bucket_head_ = ob.next;
  if (ob.next != kNil) buckets_[ob.next].prev = ob.prev;
  else bucket_tail_ = ob.prev;
}

void SpaceSaving::push_head(uint32_t b, uint32_t c) {
  Counter& ct = counters_[c];
  Bucket& bk = buckets_[b];
  ct.bucket = b;
  ct.prev = kNil;
  ct.next = bk.head;
  if (bk.head != kNil) counters_[bk.head].prev = c;
  else bk.tail = c;
  bk.head = c;
}

void SpaceSaving::remove_from_bucket(uint32_t c) {
  Counter& ct = counters_[c];
  Bucket& bk = buckets_[ct.bucket];
  if (ct.prev != kNil) counters_[ct.prev].next = ct.next;
  else bk.head = ct.next;
  if (ct.next != kNil) counters_[ct.next].prev = ct.prev;
  else bk.tail = ct.prev;
  if (bk.head == kNil) {
    unlink_bucket(ct.bucket);
    free_bucket(ct.bucket);
  }
  ct.bucket = ct.prev = ct.next = kNil;
}

void SpaceSaving::increment(uint32_t c) {
  const uint32_t b = counters_[c].bucket;
  const uint64_t want = buckets_[b].count + 1;
  uint32_t nb = buckets_[b].next;
  if (nb == kNil || buckets_[nb].count != want) {
    // Created right after the old bucket before the old one can be freed, so the order holds.
    nb = new_bucket(want);
    link_bucket_after(nb, b);
  }
  remove_from_bucket(c);
  push_head(nb, c);
}

void SpaceSaving::offer(std::string_view key) {
  ++total_;
  const uint32_t tag = static_cast<uint32_t>(hash(key));
  const size_t slot = find_slot(key, tag);
  if (slots_[slot].counter != kNil) {
    increment(slots_[slot].counter);
    return;
  }
  if (used_ < counters_.size()) {
    const uint32_t c = static_cast<uint32_t>(used_++);
    counters_[c].key.assign(key);
    counters_[c].error = 0;
    counters_[c].tag = tag;
    slots_[slot] = Slot{c, tag};
    uint32_t b = bucket_head_;
    if (b == kNil || buckets_[b].count != 1) {
      b = new_bucket(1);
      link_bucket_after(b, kNil);
    }
    push_head(b, c);
    return;
  }
  // Full: the least recently visited key of the lowest bucket hands its counter over.
  const uint32_t victim = buckets_[bucket_head_].tail;
  Counter& v = counters_[victim];
  erase_slot(find_slot(v.key, v.tag));
  v.error = buckets_[v.bucket].count;
  v.key.assign(key);
  v.tag = tag;
  // The erase may have shifted the probe run `slot` belonged to; look again.
  slots_[find_slot(key, tag)] = Slot{victim, tag};
  increment(victim);
}

uint64_t SpaceSaving::min_count() const {
  if (used_ < counters_.size() || bucket_head_ == kNil) return 0;
  return buckets_[bucket_head_].count;
}

SpaceSaving::Entry SpaceSaving::get(std::string_view key) const {
  const uint32_t tag = static_cast<uint32_t>(hash(key));
  const Slot& s = slots_[find_slot(key, tag)];
  if (s.counter == kNil) return Entry{std::string(key), 0, 0};
  const Counter& c = counters_[s.counter];
  return Entry{c.key, buckets_[c.bucket].count, c.error};
}

std::vector<SpaceSaving::Entry> SpaceSaving::top(size_t n) const {
  std::vector<Entry> out;
  out.reserve(std::min(n, used_));
  for (uint32_t b = bucket_tail_; b != kNil && out.size() < n; b = buckets_[b].prev)
    for (uint32_t c = buckets_[b].head; c != kNil && out.size() < n; c = counters_[c].next)
      out.push_back(Entry{counters_[c].key, buckets_[b].count, counters_[c].error});
  return out;
}

}  // namespace exo::db
