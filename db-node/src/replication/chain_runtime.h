// A db node's part in chain replication (docs/design/replication.md, sections 3 and 4), around
// the pure ChainTable: passing a write down the chain and completing it once acknowledged (as
// head), applying what a predecessor passes (as member or learner), retrying writes whose
// forward failed (the replication resolver, 3.8), taking the tables the controller pushes
// (SetChains) and copying slots as a learner (4.4). The request handler (write_chained.cc,
// write_cached.cc) and the DbNode RPCs (control_chain.cc) call in; resolve_once() runs from the
// node's periodic resolver thread; a copier thread of its own fetches slots.
//
// At replication factor 1 every chain has one node: nothing is forwarded, retried or copied.
//
// Thread safety: any thread. Lock order as everywhere in the node: a key's stripe lock first,
// then the uncommitted list's, the learner state's and the resolver's own locks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
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
  bool duplicate = false;  // the request id was applied here before (every write, in a batch)
  uint32_t duplicates = 0;  // how many of a batch's writes were
  std::string error;
};

class ChainRuntime {
 public:
  // The deadline of one forward, for the whole rest of the chain: a write's client resends
  // after 100 ms, so a slow chain costs resends, never a second apply (dedup).
  static constexpr std::chrono::milliseconds kForwardDeadline{500};
  // A learner's copy is throttled to this many bytes per second (design 4.4), so catching up
  // does not starve the live traffic of the node it copies from.
  static constexpr uint64_t kCopyBytesPerSecond = 20ull << 20;

  // `counters` is the runtime's own block (replication_pending is set there), written by every
  // thread that calls in, hence with add_shared/set_gauge.
  ChainRuntime(const Cluster& cluster, uint32_t self, KvStore& store, CachedKeys& cached,
               DedupTable& dedup, Resolver& resolver, ChainForwarder& forwarder,
               Counters& counters, Clock wall_ms = wall_clock_ms);
  ~ChainRuntime();  // stops the copier thread
  ChainRuntime(const ChainRuntime&) = delete;
  ChainRuntime& operator=(const ChainRuntime&) = delete;

  std::shared_ptr<const ChainTable> table() const { return view_.get(); }
  uint32_t self() const { return self_; }
  // Whether chains have more than one node (replication.factor > 1): only then do requests
  // take the chain paths.
  bool replicates() const { return replicates_; }
  // Whether this node may act on its table: always at factor 1; at factor > 1 only once the
  // controller pushed a table naming this process's incarnation (design 4.1: a restarted node
  // never acts on a state its peers have moved past).
  bool active() const { return active_.load(std::memory_order_acquire); }
  uint64_t incarnation() const { return incarnation_; }

  // ---- control (SetChains, ChainStatus, CopySlot's check) ----
  struct PushOutcome {
    enum Code : uint8_t { kOk, kStale, kWrongIncarnation, kBadTable };
    Code code = kOk;
    std::string error;
  };
  // Takes `req`'s table as this node's from now on (if its version is not older and it names
  // this incarnation), and starts copying the slots where it made this node a learner.
  PushOutcome set_table(const exo::SetChainsRequest& req);
  void status(exo::ChainStatusReply* rep) const;
  // Whether `caller` may copy `slot` from this node now: it is a learner of the slot in this
  // node's table, which is at least as new as the learner's `version`.
  bool may_copy_to(uint32_t slot, uint32_t caller, uint64_t version, std::string* why) const;

  // ---- head ----
  // The message that carries one write down the chain (the slot's next seq).
  exo::ReplicateRequest make_request(const ChainTable& t, uint32_t slot, RequestId id,
                                     bool apply_data, bool is_delete, Bytes key, Bytes value,
                                     const DedupRecord& record);
  // Passes `req` to this node's successor in its slot's chain; kAcked at once when this node
  // is the last member with no learner.
  ForwardOutcome forward(const exo::ReplicateRequest& req);
  // A burst's writes (RequestHandler::flush_chained): each of `reqs` passed to this node's
  // successor in its slot's chain, one ReplicateBatch per successor. Per write: whether the
  // rest of the chain acknowledged it.
  std::vector<bool> forward_batch(std::span<const exo::ReplicateRequest* const> reqs);
  // A write applied here whose forward is in a burst's batch: uncommitted (the key's next
  // write waits for it) but not the resolver's until unbatch() or take() for it.
  void defer_batched(UncommittedWrite w);
  // Caller holds the key's stripe lock. The key's uncommitted write if it is still request
  // `id`'s (nullopt: another thread got it through or dropped it meanwhile).
  std::optional<UncommittedWrite> take(std::string_view key, const RequestId& id);
  // The batch did not get `id`'s write through: it is the resolver's from now on.
  void unbatch(std::string_view key, const RequestId& id) { uncommitted_.unbatch(key, id); }
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

  // ---- members after the head, and learners ----
  // Applies a write passed by `caller` (db node index; nullopt when callers are not
  // authenticated: security.insecure_dev_mode), then passes it on, answering by `deadline`.
  // Its outcome record enters the dedup table only once the rest of the chain acknowledged;
  // until then it is uncommitted here too (a resend reaching this node as a later head waits).
  ReplicaOutcome apply_from_predecessor(const exo::ReplicateRequest& req,
                                        std::optional<uint32_t> caller,
                                        std::chrono::system_clock::time_point deadline);
  // The same for a predecessor's ReplicateBatch, in order. Every write is checked before any is
  // applied (a refused or malformed batch changes nothing); kApplied only when every write
  // reached the end of its chain, else kUncertain (the ones applied here are deferred).
  ReplicaOutcome apply_batch_from_predecessor(std::span<const exo::ReplicateRequest* const> reqs,
                                              std::optional<uint32_t> caller,
                                              std::chrono::system_clock::time_point deadline);
  // Applies one chunk of a slot copy: keys written live since this node became a learner of
  // the slot are newer than the copy's and are skipped.
  void apply_copy(uint32_t slot, const exo::CopySlotChunk& chunk);

 private:
  ForwardOutcome forward_by(const exo::ReplicateRequest& req,
                            std::chrono::system_clock::time_point deadline);
  // forward_batch's work, by `deadline`; `as_head` counts chain_batches. *error: the last
  // failure's reason.
  std::vector<bool> forward_batch_by(std::span<const exo::ReplicateRequest* const> reqs,
                                     std::chrono::system_clock::time_point deadline, bool as_head,
                                     std::string* error);
  // Drops an uncommitted write of a slot this node no longer belongs to: whatever the chain
  // has of it, the client's resend reaches the slot's head now.
  void abandon(UncommittedWrite& w);
  bool table_from(const exo::ChainTableMsg& m, ChainTable* out, std::string* error) const;
  void copier_loop();
  // A live write of `key` reached this learner of `slot`: a copy of the key must not win.
  void note_live_write(uint32_t slot, const std::string& key);

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
  const uint64_t incarnation_;
  std::atomic<bool> active_;
  std::mutex push_mu_;  // one SetChains at a time
  UncommittedWrites uncommitted_;
  std::unique_ptr<std::atomic<uint64_t>[]> slot_seq_;  // per slot: the last seq handed out

  // Learner state, per slot this node is a learner of: keys written live since (the copy must
  // not overwrite them) and whether the copy is done. Guarded by learn_mu_.
  struct Learning {
    std::unordered_set<std::string> live_keys;
    bool copied = false;
    uint64_t keys = 0;
  };
  mutable std::mutex learn_mu_;
  std::condition_variable learn_cv_;
  std::unordered_map<uint32_t, Learning> learning_;
  std::deque<uint32_t> to_copy_;
  bool stopping_ = false;
  std::thread copier_;
};

}  // namespace exo::db
