// The DPDK-free core of exo-emulator (thesis 4.1.1): many db nodes in one process. Each hosted
// node is a real db node (db-node/src/node_parts.h: the same request handler, dedup, 2PC,
// resolver, hot-key detector, reporter and DbNode gRPC service as exo-db-node) over the shared
// FixedValueStore, plus a token bucket. The lcore loop (emu_loop.cc) hands every received frame
// to handle() and transmits what it returns; tests and the fuzzer call handle() directly.
//
//   frame -> Demux (dst MAC: key hash owner / node MAC) -> the node's token bucket
//         -> the node's RequestHandler for this lane -> reply (src = the node's MAC, shared IP)
//
// Lanes: one per lcore. Every node has one handler and one counter block per lane (like the db
// node's packet threads), so lanes share nothing but the node's bucket (a tiny spinlock) and
// what the db node's own code already shares between its threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cluster.h"
#include "counter_list.h"
#include "counters.h"
#include "demux.h"
#include "fixed_value_store.h"
#include "node_parts.h"
#include "token_bucket.h"

namespace exo::emu {

// Hosted nodes' dedup records live this long (the db node keeps 60 s): far beyond any client
// retry span (timeout 0.25 s x 5 attempts), and 32 nodes' records at full write rate stay small.
inline constexpr uint64_t kEmulatorDedupTtlMs = 10'000;

// Indices into cluster.db_nodes of the nodes whose `emulator` is `name`, in config order.
std::vector<uint32_t> hosted_nodes(const Cluster& cluster, const std::string& name);

// Token-bucket depth of a node limited to `rate_rps`: one DPDK burst, or 1 ms of the rate when
// that is more (a wimpy's RX ring absorbs about that much before it overflows).
double bucket_depth(double rate_rps, uint32_t burst);

// Process-wide counters of one lane (written by its lcore only), generated from
// EXO_EMULATOR_COUNTERS in common/cpp/counter_list.h.
struct alignas(64) LaneCounters {
#define EXO_X(n, k, h) std::atomic<uint64_t> n{0};
  EXO_EMULATOR_COUNTERS(EXO_X)
#undef EXO_X
};

// The process-wide counters, in the order every hosted node's Stats appends them.
inline constexpr CounterDesc kEmulatorCounterDescs[] = {EXO_EMULATOR_COUNTERS(EXO_COUNTER_DESC)};
// Their Stats names: emulator_<name>.
inline constexpr const char* kEmulatorStatsPrefix = "emulator_";

// Totals over every lane and hosted node.
struct EmulatorTotals {
  uint64_t rx_frames = 0, unrouted = 0, own_tx = 0;
  uint64_t served = 0, rate_limited = 0, gets = 0, puts = 0, deletes = 0, malformed = 0,
           tx_errors = 0;
};

class Emulator {
 public:
  struct Result {
    enum Kind : uint8_t { kUnrouted, kOwnTx, kRateLimited, kNoReply, kReply };
    Kind kind = kUnrouted;
    uint32_t node = 0;  // hosted slot, for kRateLimited, kNoReply and kReply
    size_t len = 0;     // reply length in `out`, for kReply
  };

  // Builds every node of `cluster` whose emulator is `name`, each with `lanes` handlers. Starts
  // nothing. nullptr + *error when none is hosted, lanes is 0, or a node's config is unusable.
  static std::unique_ptr<Emulator> build(const Cluster& cluster, const std::string& name,
                                         unsigned lanes, std::string* error,
                                         uint64_t dedup_ttl_ms = kEmulatorDedupTtlMs);
  ~Emulator();  // stop()

  // One frame read on `lane` at now_ns (any monotonic ns clock). `truncated`: only the first
  // part of a larger frame is in `frame` (a chained mbuf): routed and charged, then counted
  // malformed. `out` (>= 14 + mtu bytes, must not alias `frame`) receives the reply.
  Result handle(unsigned lane, std::span<const uint8_t> frame, bool truncated,
                std::span<uint8_t> out, uint64_t now_ns);
  // What became of a kReply: handed to the NIC (requests_served) or refused (tx_errors).
  void sent(unsigned lane, uint32_t node, bool ok);

  // Every node's gRPC server, then its REPORT thread. On failure stops those started and
  // returns false; *error names the node and field.
  bool start(std::string* error);
  void stop();
  // One resolver round / dedup sweep of every node (the caller's periodic threads).
  void resolve_all();
  void sweep_all();

  size_t size() const { return nodes_.size(); }
  unsigned lanes() const { return lanes_; }
  db::NodeParts& node(size_t slot) { return *nodes_[slot]->parts; }
  const DbNodeInfo& node_info(size_t slot) const { return nodes_[slot]->parts->self(); }
  double rate_limit_rps() const { return rate_rps_; }
  double bucket_depth() const { return depth_; }
  const FixedValueStore& store() const { return store_; }
  const Demux& demux() const { return demux_; }
  EmulatorTotals totals() const;
  // The process-wide counters summed over lanes, as (emulator_<name>, value) in
  // kEmulatorCounterDescs order: what every hosted node's Stats appends.
  std::vector<std::pair<std::string, uint64_t>> process_stats() const;

 private:
  struct alignas(64) Limiter {
    std::atomic_flag busy = ATOMIC_FLAG_INIT;
    std::optional<TokenBucket> bucket;  // empty: unlimited
    bool take(uint64_t now_ns);
  };
  struct Node {
    std::unique_ptr<db::NodeParts> parts;
    std::vector<db::NodeLane> lanes;  // one per lane
    Limiter limiter;
  };

  Emulator(const Cluster& cluster, const std::vector<uint32_t>& hosted, unsigned lanes);

  const Cluster& cluster_;
  const unsigned lanes_;
  FixedValueStore store_;
  Demux demux_;
  double rate_rps_ = 0, depth_ = 0;
  std::vector<std::unique_ptr<Node>> nodes_;  // by hosted slot
  std::vector<LaneCounters> lane_counters_;   // by lane
};

}  // namespace exo::emu
