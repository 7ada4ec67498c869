// Write propagation to cache nodes (thesis 3.4.2): the db node coordinates, the cache node
// holding the key participates. `Propagator` is the interface the request handler uses (tests
// substitute a recording fake); `GrpcPropagator` calls the CacheNode service.
//
// Outcome of Prepare, as the handler interprets CacheNode.Prepare's TxReply:
//   RPC failed or reply.ok == false        -> kFailed:    do not write, answer ERROR
//   reply.ok == true, reply.cached == false -> kNotCached: the cache node no longer holds the
//                                              key; write locally, no Commit needed
//   reply.ok == true, reply.cached == true  -> kPrepared:  write, then Commit (or Abort)
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

namespace exo::db {

struct PrepareOutcome {
  enum Code : uint8_t { kPrepared, kNotCached, kFailed };
  Code code = kFailed;
  std::string error;  // set when kFailed
};

class Propagator {
 public:
  virtual ~Propagator() = default;
  virtual PrepareOutcome prepare(const std::string& cache_node, std::span<const uint8_t> key,
                                 uint64_t txid, bool is_delete, std::span<const uint8_t> value) = 0;
  // true when the cache node answered ok; otherwise *error says why.
  virtual bool commit(const std::string& cache_node, std::span<const uint8_t> key, uint64_t txid,
                      std::string* error) = 0;
  virtual bool abort(const std::string& cache_node, std::span<const uint8_t> key, uint64_t txid,
                     std::string* error) = 0;
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
  // Channels are created lazily, one per cache node, from cache_nodes[].grpc.
  explicit GrpcPropagator(const Cluster& cluster,
                          std::chrono::milliseconds deadline = std::chrono::milliseconds(500));
  ~GrpcPropagator() override;

  PrepareOutcome prepare(const std::string& cache_node, std::span<const uint8_t> key, uint64_t txid,
                         bool is_delete, std::span<const uint8_t> value) override;
  bool commit(const std::string& cache_node, std::span<const uint8_t> key, uint64_t txid,
              std::string* error) override;
  bool abort(const std::string& cache_node, std::span<const uint8_t> key, uint64_t txid,
             std::string* error) override;

 private:
  struct Peer;
  // The peer for a cache node name, creating its channel on first use; nullptr if unknown.
  Peer* peer(const std::string& cache_node, std::string* error);

  std::chrono::milliseconds deadline_;
  // One slot per configured cache node, built in the constructor and never resized, so
  // lookups need no lock; each slot guards its own lazy channel creation.
  std::unordered_map<std::string, std::unique_ptr<Peer>> peers_;
};

}  // namespace exo::db
