// The cache node's counter storage and Stats output, generated from its lists in
// common/cpp/counter_list.h (EXO_CACHE_*: every counter declared once, with its kind and help).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "counter_list.h"

namespace exo::cache {

using exo::bump;  // single writer: the lcore owning the DpCounters block

// 64 = RTE_CACHE_LINE_SIZE on x86; kept DPDK-free so tests build without DPDK.
struct alignas(64) DpCounters {
#define EXO_FIELD(name, kind, help) std::atomic<uint64_t> name{0};
  EXO_CACHE_DP_COUNTERS(EXO_FIELD)
#undef EXO_FIELD

  DpCounters() = default;
  DpCounters(const DpCounters& o) { *this += o; }
  DpCounters& operator=(const DpCounters& o) {
#define EXO_SET(name, kind, help) name.store(o.name.load(std::memory_order_relaxed), std::memory_order_relaxed);
    EXO_CACHE_DP_COUNTERS(EXO_SET)
#undef EXO_SET
    return *this;
  }
  // Not thread-safe for *this (the sum being built); `o` may be written concurrently.
  DpCounters& operator+=(const DpCounters& o) {
#define EXO_ADD(name, kind, help) bump(name, o.name.load(std::memory_order_relaxed));
    EXO_CACHE_DP_COUNTERS(EXO_ADD)
#undef EXO_ADD
    return *this;
  }
};

struct CpCounters {
#define EXO_FIELD(name, kind, help) std::atomic<uint64_t> name{0};
  EXO_CACHE_CP_COUNTERS(EXO_FIELD)
#undef EXO_FIELD
  // Written by the filler thread only, read by Stats(): the source of the threshold_milli gauge.
  std::atomic<uint64_t> threshold_milli{0};
};

// A snapshot of the gauges, taken by whoever answers Stats().
struct Gauges {
#define EXO_FIELD(name, kind, help) uint64_t name = 0;
  EXO_CACHE_GAUGES(EXO_FIELD)
#undef EXO_FIELD
};

// Every counter in Stats order: data plane, control plane, gauges.
inline constexpr CounterDesc kCounterInfo[] = {
    EXO_CACHE_DP_COUNTERS(EXO_COUNTER_DESC) EXO_CACHE_CP_COUNTERS(EXO_COUNTER_DESC)
        EXO_CACHE_GAUGES(EXO_COUNTER_DESC)};

// Flattens a summed snapshot into (name, value) pairs in kCounterInfo order.
inline std::vector<std::pair<std::string, uint64_t>> flatten(const DpCounters& dp,
                                                             const CpCounters& cp,
                                                             const Gauges& gauges) {
  std::vector<std::pair<std::string, uint64_t>> out;
#define EXO_OUT(name, kind, help) out.emplace_back(#name, dp.name.load(std::memory_order_relaxed));
  EXO_CACHE_DP_COUNTERS(EXO_OUT)
#undef EXO_OUT
#define EXO_OUT(name, kind, help) out.emplace_back(#name, cp.name.load(std::memory_order_relaxed));
  EXO_CACHE_CP_COUNTERS(EXO_OUT)
#undef EXO_OUT
#define EXO_OUT(name, kind, help) out.emplace_back(#name, gauges.name);
  EXO_CACHE_GAUGES(EXO_OUT)
#undef EXO_OUT
  return out;
}

}  // namespace exo::cache
