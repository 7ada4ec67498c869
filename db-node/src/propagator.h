// Write propagation to cache nodes (thesis 3.4.2): the db node coordinates, the cache node
// holding the key participates. `Propagator` is the interface the coordinator's shells use to
// send Prepare, Commit and Abort (tests substitute a recording fake); `GrpcPropagator` calls the
// CacheNode service. What the answers mean (PrepareOutcome, FinishOutcome) is written down in
// coordinator/replies.h, where the coordinator's state machines take them in.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster.h"
#include "coordinator/replies.h"
#include "grpc_security.h"

namespace exo::db {

class Propagator {
 public:
  virtual ~Propagator() = default;
  virtual PrepareOutcome prepare(const std::string& cache_node, std::span<const uint8_t> key,
                                 uint64_t txid, bool is_delete, std::span<const uint8_t> value) = 0;
  virtual FinishOutcome commit(const std::string& cache_node, std::span<const uint8_t> key,
                               uint64_t txid) = 0;
  virtual FinishOutcome abort(const std::string& cache_node, std::span<const uint8_t> key,
                              uint64_t txid) = 0;
};

// Node-unique transaction ids. Starting from the wall clock in nanoseconds keeps ids of a
// restarted node above those of its previous run (barring a clock step back), so a cache node
// never confuses an old pending transaction with a new one.
class TxIdSource {
 public:
  explicit TxIdSource(uint64_t first) : next_(first) {}
  static uint64_t from_clock();
  uint64_t next() { return next_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> next_;
};

class GrpcPropagator final : public Propagator {
 public:
  // Channels are created lazily, one per cache node, from cache_nodes[].grpc. They reconnect
  // quickly after the cache node restarts (100 ms first backoff, at most 1 s), so a Commit or
  // Abort left to the resolver is delivered soon after the node is back. Channels use
  // `security` (this node's certificate; the cache node's name as the target-name override).
  GrpcPropagator(const Cluster& cluster, std::shared_ptr<const GrpcSecurity> security,
                 std::chrono::milliseconds deadline = std::chrono::milliseconds(500));
  ~GrpcPropagator() override;

  PrepareOutcome prepare(const std::string& cache_node, std::span<const uint8_t> key, uint64_t txid,
                         bool is_delete, std::span<const uint8_t> value) override;
  FinishOutcome commit(const std::string& cache_node, std::span<const uint8_t> key,
                       uint64_t txid) override;
  FinishOutcome abort(const std::string& cache_node, std::span<const uint8_t> key,
                      uint64_t txid) override;

 private:
  struct Peer;
  // The peer for a cache node name, creating its channel on first use; nullptr if unknown.
  Peer* peer(const std::string& cache_node, std::string* error);

  std::shared_ptr<const GrpcSecurity> security_;
  std::chrono::milliseconds deadline_;
  // One slot per configured cache node, built in the constructor and never resized, so
  // lookups need no lock; each slot guards its own lazy channel creation.
  std::unordered_map<std::string, std::unique_ptr<Peer>> peers_;
};

}  // namespace exo::db
