// Recently applied writes by request id (client_id, seq), so that a resent request (its reply
// was lost, or the frame was duplicated on the way) is answered with the recorded status
// instead of being applied a second time: a resend of an old PUT must not overwrite a newer
// value written meanwhile (docs/two-phase-commit.md, "duplicate request").
//
// Every outcome is recorded, OK, BUSY and ERROR alike: the client retries a BUSY under a new
// seq, so a delayed copy of the refused id must be refused again, never applied (or the write
// could take effect twice around another client's write). The records live in memory here and
// on disk in Cf::kRequests: an OK record is written in the same atomic batch or transaction as
// the write itself, so after a crash it exists if and only if the write does; a BUSY/ERROR
// record is written unsynced after the refusal. Start-up loads them (recovery.h), a periodic
// sweep expires them.
//
// Thread safety: any thread. A write's check-apply-record sequence runs under its key's stripe
// lock (cached_keys.h), and a resend carries the same key, so two copies of one request are
// serialized there; the table's own locks (striped by id) only protect the maps, because one
// client's requests go to many keys and therefore many packet threads.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "records.h"
#include "store.h"

namespace exo::db {

// Milliseconds since the Unix epoch: dedup records carry it to disk, so expiry survives a
// restart (a monotonic clock would restart from another origin).
inline uint64_t wall_clock_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

class DedupTable {
 public:
  // How long a record is kept: far longer than any client's retry span (a client resends a
  // request for at most its timeout times its retries, a few seconds), and a client numbers
  // every request afresh and never reuses a seq within this time.
  static constexpr uint64_t kTtlMs = 60'000;
  static constexpr size_t kStripes = 64;

  // `ttl_ms`: how long records live (kTtlMs for a db node; the wimpy emulator keeps less, since
  // 32 nodes' records at full write rate would otherwise cost hundreds of MB).
  explicit DedupTable(uint64_t ttl_ms = kTtlMs) : ttl_ms_(ttl_ms) {}
  uint64_t ttl_ms() const { return ttl_ms_; }

  // The status recorded for `id` if its record is still live at now_ms and is for the same
  // write (fingerprint); nullopt if the request was never applied (or long ago).
  std::optional<uint8_t> find(RequestId id, uint64_t fingerprint, uint64_t now_ms) const;
  // Adds or replaces the record of `id`.
  void insert(RequestId id, const DedupRecord& r);
  // Ids whose records have expired at now_ms.
  std::vector<RequestId> expired(uint64_t now_ms) const;
  // Removes those of `ids` whose record is still expired at now_ms (one may have been replaced).
  void erase_expired(std::span<const RequestId> ids, uint64_t now_ms);
  size_t size() const;

  bool is_expired(const DedupRecord& r, uint64_t now_ms) const {
    return now_ms >= r.recorded_ms + ttl_ms_;
  }

 private:
  struct alignas(64) Stripe {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, DedupRecord> records;  // by RequestId::packed()
  };
  Stripe& stripe(RequestId id) { return stripes_[stripe_index(id)]; }
  const Stripe& stripe(RequestId id) const { return stripes_[stripe_index(id)]; }
  static size_t stripe_index(RequestId id) {
    return (id.packed() * 0x9E3779B97F4A7C15ull) >> 58;  // top 6 bits: 64 stripes
  }
  uint64_t ttl_ms_;
  std::array<Stripe, kStripes> stripes_;
};

// The periodic sweep: deletes expired records from the store (Durability::kRelaxed: a record
// that reappears after an OS crash is simply swept again), then from memory. Returns how many
// were removed; on a store error nothing is removed from memory (the next sweep retries) and
// *error says why.
size_t sweep_dedup(DedupTable& table, KvStore& store, uint64_t now_ms, std::string* error);

}  // namespace exo::db
