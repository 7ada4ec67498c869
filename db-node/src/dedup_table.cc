#include "dedup_table.h"

#include <algorithm>

namespace exo::db {

static_assert(DedupTable::kStripes == 64, "stripe_index takes the top 6 bits");

std::optional<uint8_t> DedupTable::find(RequestId id, uint64_t now_ms) const {
  const Stripe& s = stripe(id);
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.records.find(id.packed());
  // Expired records are ignored even before the sweep removes them, so behaviour does not
  // depend on when the sweep last ran.
  if (it == s.records.end() || it->second.in_flight || is_expired(it->second.record, now_ms))
    return std::nullopt;
  return it->second.record.status;
}

DedupTable::Lookup DedupTable::claim(RequestId id, uint64_t now_ms) {
  Stripe& s = stripe(id);
  std::lock_guard<std::mutex> lk(s.mu);
  auto [it, fresh] = s.records.try_emplace(id.packed());
  Slot& slot = it->second;
  if (!fresh && !is_expired(slot.record, now_ms)) {
    if (slot.in_flight) return {Lookup::kInFlight, {}};
    return {Lookup::kAnswered, slot.record};
  }
  slot = Slot{};  // new, or an expired record or claim: claimed afresh
  slot.record.recorded_ms = now_ms;
  slot.in_flight = true;
  return {Lookup::kNew, {}};
}

void DedupTable::release(RequestId id) {
  Stripe& s = stripe(id);
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.records.find(id.packed());
  if (it != s.records.end() && it->second.in_flight) s.records.erase(it);
}

void DedupTable::insert(RequestId id, const DedupRecord& r) {
  Stripe& s = stripe(id);
  std::lock_guard<std::mutex> lk(s.mu);
  s.records[id.packed()] = Slot{r, false};
}

std::vector<RequestId> DedupTable::expired(uint64_t now_ms) const {
  std::vector<RequestId> out;
  for (const Stripe& s : stripes_) {
    std::lock_guard<std::mutex> lk(s.mu);
    for (const auto& [packed, slot] : s.records)
      if (is_expired(slot.record, now_ms))
        out.push_back(
            RequestId{static_cast<uint32_t>(packed >> 32), static_cast<uint32_t>(packed)});
  }
  return out;
}

void DedupTable::erase_expired(std::span<const RequestId> ids, uint64_t now_ms) {
  for (const RequestId& id : ids) {
    Stripe& s = stripe(id);
    std::lock_guard<std::mutex> lk(s.mu);
    auto it = s.records.find(id.packed());
    if (it != s.records.end() && is_expired(it->second.record, now_ms)) s.records.erase(it);
  }
}

size_t DedupTable::size() const {
  size_t n = 0;
  for (const Stripe& s : stripes_) {
    std::lock_guard<std::mutex> lk(s.mu);
    n += s.records.size();
  }
  return n;
}

size_t sweep_dedup(DedupTable& table, KvStore& store, uint64_t now_ms, std::string* error) {
  // In chunks, so one sweep after a long idle period does not build one huge batch.
  constexpr size_t kChunk = 1024;
  const std::vector<RequestId> ids = table.expired(now_ms);
  size_t removed = 0;
  std::vector<std::string> keys;
  std::vector<StoreOp> ops;
  for (size_t at = 0; at < ids.size(); at += kChunk) {
    const auto chunk =
        std::span<const RequestId>(ids).subspan(at, std::min(kChunk, ids.size() - at));
    keys.clear();
    ops.clear();
    keys.reserve(chunk.size());  // no reallocation: ops point into keys
    for (const RequestId& id : chunk) {
      keys.push_back(request_key(id));
      ops.push_back(StoreOp::del(Cf::kRequests, bytes_of(keys.back())));
    }
    const StoreResult r = store.write(ops, Durability::kRelaxed);
    if (!r.ok()) {
      *error = r.error;
      return removed;
    }
    table.erase_expired(chunk, now_ms);
    removed += chunk.size();
  }
  return removed;
}

}  // namespace exo::db
