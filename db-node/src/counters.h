// Db node counters, declared once (Pelikan style): the X-macro below generates the struct
// fields, the name/help table and the Stats output, so a new counter is a one-line change.
//
// Each packet thread owns one `Counters` block and is its only writer, so an increment is a
// plain relaxed load + store (no locked instruction, no shared cache line: blocks are
// alignas(64)). Readers (the Stats RPC) sum the blocks with relaxed loads; the atomics only
// exist so that concurrent reads are not data races. The control-plane block is written by
// several gRPC threads and therefore uses add_shared() (fetch_add). A gauge (resolver_pending)
// is set with set_gauge() in exactly one block (the resolver's), so the sum is its value.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace exo::db {

// X(name, help)
#define EXO_DB_COUNTERS(X)                                                                  \
  X(rx_frames, "frames read from the packet sockets")                                       \
  X(ignored, "frames that are not Exoskeleton requests (dst MAC prefix or UDP port)")       \
  X(malformed_dropped, "request frames that failed validation (or were replies); dropped") \
  X(gets, "GET requests")                                                                   \
  X(puts, "PUT requests")                                                                   \
  X(deletes, "DELETE requests")                                                             \
  X(not_found, "GETs answered NOT_FOUND")                                                   \
  X(misrouted, "requests for keys this node does not own (served anyway)")                  \
  X(forwarded_gets, "GETs a cache node forwarded (FORWARDED flag)")                         \
  X(errors, "requests answered ERROR, and failed reads or marks during Fetch")              \
  X(writes_propagated, "writes to cached keys committed on the cache node")                 \
  X(requests_served, "replies sent")                                                        \
  X(tx_errors, "replies the socket did not accept")                                         \
  X(fetched_keys, "keys handed to a cache node by Fetch (and now tracked)")                 \
  X(evicted_keys, "keys untracked by Evict")                                                \
  X(hot_sampled, "GETs sampled into the hot-key detector")                                 \
  X(reports_sent, "REPORTs the cache node accepted")                                       \
  X(report_errors, "REPORTs that failed or were refused")                                   \
  X(duplicate_writes, "resent writes already answered: the recorded status, not re-applied") \
  X(busy_writes, "writes answered BUSY: not applied, the client retries")                  \
  X(commits_deferred, "writes committed here whose Commit RPC failed: answered OK, "        \
                      "Commit left to the resolver")                                        \
  X(txns_recovered, "undelivered Commit/Abort decisions found at start-up")                \
  X(resolver_pending, "gauge: Commit/Abort decisions the resolver still has to deliver")   \
  X(resolver_resolved, "Commit/Abort decisions the resolver delivered (definitive answer)") \
  X(rate_limited, "requests the wimpy emulator dropped on arrival: over the node's "        \
                  "emulation.db_rate_limit_rps (always 0 on a real db node)")

struct CounterDesc {
  const char* name;
  const char* help;
};

inline constexpr CounterDesc kCounterDescs[] = {
#define EXO_X(n, h) {#n, h},
    EXO_DB_COUNTERS(EXO_X)
#undef EXO_X
};
inline constexpr size_t kNumCounters = sizeof(kCounterDescs) / sizeof(kCounterDescs[0]);

using CounterValues = std::array<uint64_t, kNumCounters>;

struct alignas(64) Counters {
#define EXO_X(n, h) std::atomic<uint64_t> n{0};
  EXO_DB_COUNTERS(EXO_X)
#undef EXO_X

  // Values in kCounterDescs order.
  CounterValues snapshot() const {
    CounterValues v{};
    size_t i = 0;
#define EXO_X(n, h) v[i++] = n.load(std::memory_order_relaxed);
    EXO_DB_COUNTERS(EXO_X)
#undef EXO_X
    return v;
  }
};

// Single-writer increment: only the owning thread may call this on its block.
inline void bump(std::atomic<uint64_t>& c, uint64_t by = 1) {
  c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// Multi-writer increment, for the block shared by gRPC handler threads.
inline void add_shared(std::atomic<uint64_t>& c, uint64_t by = 1) {
  c.fetch_add(by, std::memory_order_relaxed);
}

// Gauge update; the caller serializes writers of this block's gauge (the resolver's lock).
inline void set_gauge(std::atomic<uint64_t>& c, uint64_t v) {
  c.store(v, std::memory_order_relaxed);
}

// All blocks of the process. Blocks are created at start-up (before threads run) and live as
// long as the set, so references handed to threads stay valid.
class CounterSet {
 public:
  Counters& add_block() {
    std::lock_guard<std::mutex> lk(mu_);
    blocks_.push_back(std::make_unique<Counters>());
    return *blocks_.back();
  }
  CounterValues sum() const {
    std::lock_guard<std::mutex> lk(mu_);
    CounterValues total{};
    for (const auto& b : blocks_) {
      const CounterValues v = b->snapshot();
      for (size_t i = 0; i < kNumCounters; ++i) total[i] += v[i];
    }
    return total;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Counters>> blocks_;
};

}  // namespace exo::db
