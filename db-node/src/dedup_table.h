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
// A request is known by its id alone (docs/wire-format.md, "Dedup"): a copy of an answered id
// gets the recorded status and is never applied, even if its content (opcode, key, value)
// differs. The record keeps a fingerprint of the first write only to count such copies
// (duplicate_id_conflicts): a client that reuses an id, or two that drew the same client_id.
//
// Thread safety: any thread. A write's check-apply-record sequence runs under its key's stripe
// lock (cached_keys.h), so two copies of one request (same key) are serialized there. A copy
// with another key takes another stripe lock, so claim() marks an id in flight while its first
// copy is handled: a second copy meanwhile sees kInFlight and is not applied. The table's own
// locks (striped by id) protect the maps and make claim() atomic.
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

  // The status recorded for `id` if its record is still live at now_ms (by id alone, whatever
  // write it was for); nullopt if the request was never answered (or long ago), or is in flight.
  std::optional<uint8_t> find(RequestId id, uint64_t now_ms) const;

  struct Lookup {
    enum Kind : uint8_t {
      kNew,       // not seen: now claimed for the caller, who must insert() or release()
      kAnswered,  // a live record: answer `record.status`, never apply
      kInFlight,  // another copy of the id is being handled right now: do not apply
    };
    Kind kind = kNew;
    DedupRecord record;  // kAnswered: the first outcome (its fingerprint: which write it was)
  };
  // Looks `id` up at now_ms and, when it has no live record and no claim, claims it (one step
  // under the stripe lock, so of two concurrent copies exactly one gets kNew).
  Lookup claim(RequestId id, uint64_t now_ms);
  // Drops the caller's claim of `id` if no record has replaced it (a path that answered
  // nothing, e.g. an exception): a later copy is then handled afresh.
  void release(RequestId id);
  // Adds or replaces the record of `id` (replacing a claim of it).
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
  struct Slot {
    DedupRecord record;     // in flight: only recorded_ms (the claim's time, for expiry) is set
    bool in_flight = false;  // claimed, not answered yet; never on disk
  };
  struct alignas(64) Stripe {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, Slot> records;  // by RequestId::packed()
  };
  Stripe& stripe(RequestId id) { return stripes_[stripe_index(id)]; }
  const Stripe& stripe(RequestId id) const { return stripes_[stripe_index(id)]; }
  static size_t stripe_index(RequestId id) {
    return (id.packed() * 0x9E3779B97F4A7C15ull) >> 58;  // top 6 bits: 64 stripes
  }
  uint64_t ttl_ms_;
  std::array<Stripe, kStripes> stripes_;
};

// Releases a claim when it goes out of scope (DedupTable::release: a no-op once a record
// replaced the claim), so no path of a write can leave its id in flight for ever.
class DedupClaim {
 public:
  DedupClaim(DedupTable& t, RequestId id) : t_(t), id_(id) {}
  ~DedupClaim() {
    if (!kept_) t_.release(id_);
  }
  DedupClaim(const DedupClaim&) = delete;
  DedupClaim& operator=(const DedupClaim&) = delete;
  // Leaves the id in flight past this scope: a chained write whose acknowledgement is still
  // owed (replication/chain_runtime.h) answers none of its resends until it completes.
  void keep() { kept_ = true; }

 private:
  DedupTable& t_;
  RequestId id_;
  bool kept_ = false;
};

// The periodic sweep: deletes expired records from the store (Durability::kRelaxed: a record
// that reappears after an OS crash is simply swept again), then from memory. Returns how many
// were removed; on a store error nothing is removed from memory (the next sweep retries) and
// *error says why.
size_t sweep_dedup(DedupTable& table, KvStore& store, uint64_t now_ms, std::string* error);

}  // namespace exo::db
