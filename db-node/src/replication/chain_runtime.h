// A db node's part in chain replication (docs/design/replication.md, section 3), around the
// pure ChainTable: passing a write down the chain and completing it once acknowledged (as head),
// applying what a predecessor passes (as middle or tail), and retrying writes whose forward
// failed (the replication resolver, 3.8). The request handler (write_chained.cc) and the
// Replicate RPC (control_service.cc) call in; resolve_once() runs from the node's periodic
// resolver thread.
//
// At replication factor 1 every chain has one node: nothing is forwarded, nothing retried.
//
// Thread safety: any thread. Lock order as everywhere in the node: a key's stripe lock first,
// then the uncommitted list's and the resolver's own locks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cached_keys.h"
#include "cluster.h"
#include "counters.h"
#include "dedup_table.h"
#include "ms_clock.h"
#include "replication/chain_table.h"
#include "replication/forwarder.h"
#include "replication/uncommitted.h"
#include "resolver.h"
#include "store.h"

namespace exo::db {

// How a Replicate call ended at this node (the RPC maps it to a gRPC status).
struct ReplicaOutcome {
  enum Code : uint8_t {
    kApplied,         // applied here (or already had it) and acknowledged by every later member
    kNotPredecessor,  // the caller is not this node's predecessor for the slot: nothing applied
    kBadRequest,      // a malformed request (slot, key or record): nothing applied
    kUncertain,       // a store error, a copy in flight, or the rest of the chain did not answer
  };
  Code code = kUncertain;
  bool duplicate = false;  // the request id was applied here before
  std::string error;
};

class ChainRuntime {
 public:
  // The deadline of one forward, for the whole rest of the chain: a write's client resends
  // after 100 ms, so a slow chain costs resends, never a second apply (dedup).
  static constexpr std::chrono::milliseconds kForwardDeadline{500};

  // `counters` is the runtime's own block (replication_pending is set there), written by every
  // thread that calls in, hence with add_shared/set_gauge.
  ChainRuntime(const Cluster& cluster, uint32_t self, KvStore& store, CachedKeys& cached,
               DedupTable& dedup, Resolver& resolver, ChainForwarder& forwarder,
               Counters& counters, Clock wall_ms = wall_clock_ms);

  std::shared_ptr<const ChainTable> table() const { return view_.get(); }
  // Whether any chain has more than one node (replication.factor > 1): only then do requests
  // take the chain paths.
  bool replicates() const { return replicates_; }
  uint32_t self() const { return self_; }

  // ---- head ----
  // The message that carries one write down the chain (the slot's next seq).
  exo::ReplicateRequest make_request(const ChainTable& t, uint32_t slot, RequestId id,
                                     bool apply_data, bool is_delete, Bytes key, Bytes value,
                                     const DedupRecord& record);
  // Passes `req` to this node's successor in its slot's chain; kAcked at once when this node
  // is the last member.
  ForwardOutcome forward(const exo::ReplicateRequest& req);
  // The chain acknowledged `w`: its outcome enters the dedup table (resends now get it), and a
  // cached key's prepared transaction commits and its Commit goes to the resolver.
  void complete(UncommittedWrite& w);
  // The forward of `w` failed or is still owed: kept for the resolver (no reply meanwhile).
  void defer(UncommittedWrite w);
  bool has_uncommitted(std::string_view key) const { return uncommitted_.has(key); }
  // Caller holds the key's stripe lock. One more forward of the key's uncommitted write, if
  // any; true when none is left.
  bool settle(CachedKeys::Guard& guard, std::string_view key);
  // One retry of every uncommitted write, each under its key's stripe lock. Returns how many
  // completed.
  size_t resolve_once();
  // The mutant test build's "ack-at-head" fault (common/cpp/fault_switch.h): answer a write
  // before the chain has it. Always false in production builds.
  static bool acks_before_forwarding();

  // ---- middle and tail ----
  // Applies a write passed by `caller` (db node index; nullopt when callers are not
  // authenticated: security.insecure_dev_mode), then passes it on, answering by `deadline`.
  ReplicaOutcome apply_from_predecessor(const exo::ReplicateRequest& req,
                                        std::optional<uint32_t> caller,
                                        std::chrono::system_clock::time_point deadline);

 private:
  ForwardOutcome forward_by(const exo::ReplicateRequest& req,
                            std::chrono::system_clock::time_point deadline);

  const Cluster& cluster_;
  const uint32_t self_;
  KvStore& store_;
  CachedKeys& cached_;
  DedupTable& dedup_;
  Resolver& resolver_;
  ChainForwarder& forwarder_;
  Counters& c_;
  Clock wall_ms_;
  ChainView view_;
  const bool replicates_;
  UncommittedWrites uncommitted_;
  std::unique_ptr<std::atomic<uint64_t>[]> slot_seq_;  // per slot: the last seq handed out
};

}  // namespace exo::db
