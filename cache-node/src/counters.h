// Counters of the cache node, declared ONCE (X-macros, Pelikan style): the struct fields, the
// summing and the Stats RPC output are all generated from these lists, so a new counter is one
// line here and cannot be forgotten in the report.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

// Data-plane counters: one copy per lcore, which is its only writer; summed on read.
#define EXO_DP_COUNTERS(X)                                                              \
  X(rx_frames, "frames received")                                                       \
  X(tx_frames, "frames handed to the NIC (replies + forwarded misses)")                 \
  X(tx_dropped, "frames the NIC TX queue refused (freed)")                              \
  X(ignored, "frames not for us: foreign dst prefix, own src MAC, other UDP port")      \
  X(malformed_dropped, "frames with our prefix that failed parsing or are not GETs")    \
  X(gets, "well-formed GET requests")                                                   \
  X(hits, "GETs answered from the map")                                                 \
  X(forwarded_misses, "GETs forwarded to the db node (not cached or pending a write)")  \
  X(requests_served, "replies sent by this node")                                      \
  X(rate_limited, "frames dropped on arrival by cache_nodes[].rate_limit_rps (scaled experiments)")

// Control-plane counters: bumped by gRPC handler threads, hence atomic.
#define EXO_CP_COUNTERS(X)                                                                \
  X(cached_inserts, "keys inserted by Cache()")                                          \
  X(evictions, "entries removed by Evict() or LRU capacity")                             \
  X(prepares, "Prepare() that marked a held key pending")                                \
  X(commits, "Commit() applied")                                                          \
  X(aborts, "Abort() applied")                                                            \
  X(reports_received, "REPORTs from db nodes accepted into the hot list")                \
  X(reports_rejected, "REPORTs refused: unknown db node, bad key or rate")               \
  X(fill_rounds, "selection rounds run by the filler")                                   \
  X(fill_admitted, "keys the filler admitted (inserted, or a retirement cancelled)")     \
  X(fill_evicted, "keys the filler marked retiring")                                     \
  X(fill_fetch_failed, "keys the filler could not fetch (db node unreachable)")          \
  X(fill_rule_errors, "failed AddCacheRules/RemoveCacheRules calls of the filler/retirer") \
  X(retired, "retiring entries erased after their rule was removed")                    \
  X(resets, "Reset() calls: every entry dropped after the controller had declared us dead")

// Gauges: read at Stats() time, not accumulated.
#define EXO_GAUGES(X)                                                              \
  X(entries, "gauge: keys in the map")                                             \
  X(pending, "gauge: keys with a prepared, uncommitted write")                     \
  X(hot_list_keys, "gauge: keys in the db nodes' latest REPORTs")                  \
  X(retiring, "gauge: entries whose rule removal is queued or in flight")          \
  X(threshold_milli, "gauge: the filler's last admission threshold x 1000 (req/s)")

namespace exo::cache {

// One writer per counter (its lcore) and concurrent readers (Stats): relaxed atomics, bumped
// with a plain load + store, which compiles to the same add as a bare uint64_t (no locked
// instruction) but is not a data race. Copyable, so a sum can be returned by value.
inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// 64 = RTE_CACHE_LINE_SIZE on x86; kept DPDK-free so tests build without DPDK.
struct alignas(64) DpCounters {
#define EXO_FIELD(name, help) std::atomic<uint64_t> name{0};
  EXO_DP_COUNTERS(EXO_FIELD)
#undef EXO_FIELD

  DpCounters() = default;
  DpCounters(const DpCounters& o) { *this += o; }
  DpCounters& operator=(const DpCounters& o) {
#define EXO_SET(name, help) name.store(o.name.load(std::memory_order_relaxed), std::memory_order_relaxed);
    EXO_DP_COUNTERS(EXO_SET)
#undef EXO_SET
    return *this;
  }
  // Not thread-safe for *this (the sum being built); `o` may be written concurrently.
  DpCounters& operator+=(const DpCounters& o) {
#define EXO_ADD(name, help) bump(name, o.name.load(std::memory_order_relaxed));
    EXO_DP_COUNTERS(EXO_ADD)
#undef EXO_ADD
    return *this;
  }
};

struct CpCounters {
#define EXO_FIELD(name, help) std::atomic<uint64_t> name{0};
  EXO_CP_COUNTERS(EXO_FIELD)
#undef EXO_FIELD
  // Written by the filler thread only, read by Stats(): the source of the threshold_milli gauge.
  std::atomic<uint64_t> threshold_milli{0};
};

// A snapshot of the gauges, taken by whoever answers Stats().
struct Gauges {
#define EXO_FIELD(name, help) uint64_t name = 0;
  EXO_GAUGES(EXO_FIELD)
#undef EXO_FIELD
};

struct CounterInfo {
  const char* name;
  const char* help;
};

// Every counter name in report order, then the gauges.
inline constexpr CounterInfo kCounterInfo[] = {
#define EXO_INFO(name, help) {#name, help},
    EXO_DP_COUNTERS(EXO_INFO) EXO_CP_COUNTERS(EXO_INFO) EXO_GAUGES(EXO_INFO)
#undef EXO_INFO
};

// Flattens a summed snapshot into (name, value) pairs in kCounterInfo order.
inline std::vector<std::pair<std::string, uint64_t>> flatten(const DpCounters& dp,
                                                             const CpCounters& cp,
                                                             const Gauges& gauges) {
  std::vector<std::pair<std::string, uint64_t>> out;
#define EXO_OUT(name, help) out.emplace_back(#name, dp.name.load(std::memory_order_relaxed));
  EXO_DP_COUNTERS(EXO_OUT)
#undef EXO_OUT
#define EXO_OUT(name, help) out.emplace_back(#name, cp.name.load(std::memory_order_relaxed));
  EXO_CP_COUNTERS(EXO_OUT)
#undef EXO_OUT
#define EXO_OUT(name, help) out.emplace_back(#name, gauges.name);
  EXO_GAUGES(EXO_OUT)
#undef EXO_OUT
  return out;
}

}  // namespace exo::cache
