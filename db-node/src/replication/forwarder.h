// Passing a write to the next node of its chain (docs/design/replication.md, 3.1). The head and
// every middle call replicate() for their successor; the tests substitute an in-process fake.
// What an answer means for the write is in ForwardOutcome: only kAcked lets the caller count
// the write as held by the rest of the chain.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster.h"
#include "exoproto/control.pb.h"
#include "grpc_security.h"

namespace exo::db {

struct ForwardOutcome {
  enum Code : uint8_t {
    kAcked,      // the successor and everything after it applied the write
    kUncertain,  // deadline, unreachable, or any other error: maybe applied downstream
    kRefused,    // FAILED_PRECONDITION: the successor says we are not its predecessor
  };
  Code code = kUncertain;
  std::string error;
};

class ChainForwarder {
 public:
  virtual ~ChainForwarder() = default;
  // Sends `req` to db node `to` (index into the cluster's db_nodes), waiting until `deadline`.
  virtual ForwardOutcome replicate(uint32_t to, const exo::ReplicateRequest& req,
                                   std::chrono::system_clock::time_point deadline) = 0;
  // Sends a burst's writes for the same next node `to` in one call (ReplicateBatch). kAcked:
  // every write reached the end of its chain; anything else holds for every write.
  virtual ForwardOutcome replicate_batch(uint32_t to, const exo::ReplicateBatchRequest& batch,
                                         std::chrono::system_clock::time_point deadline) = 0;
  // Streams `slot` from db node `from` (CopySlot, as a learner with table `version`), calling
  // `on_chunk` for each chunk. true when the whole slot arrived; else *error says why.
  virtual bool copy_slot(uint32_t from, uint32_t slot, uint64_t version,
                         const std::function<void(const exo::CopySlotChunk&)>& on_chunk,
                         std::string* error) = 0;
};

class GrpcChainForwarder final : public ChainForwarder {
 public:
  // One channel per db node, created on first use, with this node's credentials and the peer's
  // certificate name as the target-name override (grpc_security.h).
  GrpcChainForwarder(const Cluster& cluster, std::shared_ptr<const GrpcSecurity> security);
  ~GrpcChainForwarder() override;
  ForwardOutcome replicate(uint32_t to, const exo::ReplicateRequest& req,
                           std::chrono::system_clock::time_point deadline) override;
  ForwardOutcome replicate_batch(uint32_t to, const exo::ReplicateBatchRequest& batch,
                                 std::chrono::system_clock::time_point deadline) override;
  bool copy_slot(uint32_t from, uint32_t slot, uint64_t version,
                 const std::function<void(const exo::CopySlotChunk&)>& on_chunk,
                 std::string* error) override;

 private:
  struct Peer;
  Peer* peer(uint32_t node);
  const Cluster& cluster_;
  std::shared_ptr<const GrpcSecurity> security_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by db node index; never resized
};

}  // namespace exo::db
