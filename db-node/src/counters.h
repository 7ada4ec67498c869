// The db node's counter storage, generated from its list in common/cpp/counter_list.h
// (EXO_DB_COUNTERS, EXO_DB_GAUGES: every counter declared once, with its kind and help).
//
// Each packet thread owns one `Counters` block and is its only writer, so an increment is a
// plain relaxed load + store (bump(): no locked instruction, no shared cache line: blocks are
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
#include <string>
#include <utility>
#include <vector>

#include "counter_list.h"

namespace exo::db {

using exo::add_shared;
using exo::bump;
using exo::set_gauge;

// The block counters, in Stats order.
inline constexpr CounterDesc kCounterDescs[] = {EXO_DB_COUNTERS(EXO_COUNTER_DESC)};
inline constexpr size_t kNumCounters = sizeof(kCounterDescs) / sizeof(kCounterDescs[0]);
// The gauges read at Stats time, reported after the blocks' sums.
inline constexpr CounterDesc kGaugeDescs[] = {EXO_DB_GAUGES(EXO_COUNTER_DESC)};

using CounterValues = std::array<uint64_t, kNumCounters>;

struct alignas(64) Counters {
#define EXO_X(n, k, h) std::atomic<uint64_t> n{0};
  EXO_DB_COUNTERS(EXO_X)
#undef EXO_X

  // Values in kCounterDescs order.
  CounterValues snapshot() const {
    CounterValues v{};
    size_t i = 0;
#define EXO_X(n, k, h) v[i++] = n.load(std::memory_order_relaxed);
    EXO_DB_COUNTERS(EXO_X)
#undef EXO_X
    return v;
  }
};

// The Stats-time gauges' values, filled by whoever answers Stats.
struct Gauges {
#define EXO_X(n, k, h) uint64_t n = 0;
  EXO_DB_GAUGES(EXO_X)
#undef EXO_X
};

// A Stats reply's (name, value) pairs: the summed blocks, then the gauges.
inline std::vector<std::pair<std::string, uint64_t>> flatten(const CounterValues& sums,
                                                             const Gauges& gauges) {
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(kNumCounters + std::size(kGaugeDescs));
  for (size_t i = 0; i < kNumCounters; ++i) out.emplace_back(kCounterDescs[i].name, sums[i]);
#define EXO_X(n, k, h) out.emplace_back(#n, gauges.n);
  EXO_DB_GAUGES(EXO_X)
#undef EXO_X
  return out;
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
