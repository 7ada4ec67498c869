// One write (PUT or DELETE) of a key a cache node holds, as a pure state machine: the db node's
// side of the two-phase commit (thesis 3.4.2, docs/two-phase-commit.md), made durable with a
// RocksDB two-phase transaction. The shell (write_cached.cc) feeds it Events and carries out
// the Actions it returns (actions.h); it holds the key's stripe lock the whole time, so
// nothing else of the key (another write, Fetch, Evict, ForgetCacheNode) runs in between.
//
//   state                  event                              next                       reply
//   received               arrived, no earlier decision       preparing-locally
//                          arrived, an earlier decision       settling
//   settling               settled: all delivered             preparing-locally
//                          settled: delivered, key untracked  uncached (handed back)
//                          settled: one undelivered           refused                    BUSY
//   preparing-locally      local_prepared: ok                 prepare-sent
//                          local_prepared: failed             refused                    ERROR
//   prepare-sent           prepare_replied: prepared          committing-prepared
//                          prepare_replied: not cached        committing-not-cached
//                          prepare_replied: failed            aborted (Abort queued)     BUSY
//   committing-prepared    local_committed: ok                commit-sent
//                          local_committed: failed            aborted (Abort queued)     ERROR
//   committing-not-cached  local_committed: ok                done (key untracked)       OK
//                          local_committed: failed            refused                    ERROR
//   commit-sent            finish_replied: definitive         done                       OK
//                          finish_replied: unreachable        deferred (Commit queued)   OK
//
// At replication factor > 1 (Request::replicate, docs/design/replication.md 3.4) the write goes
// down the slot's chain between the cache node's answer and the local commit, so the tail,
// which serves the key's GETs while the cache node forwards them, has it before the decision:
//   prepare-sent           prepare_replied: prepared / not    replicating
//                          cached
//   replicating            chain_replied: acked               committing-prepared /
//                                                             committing-not-cached (as above)
//                          chain_replied: uncertain           deferred-replication       none
// deferred-replication: no reply, and never an Abort (some member may have the write); the
// chain runtime keeps the prepared transaction, commits it once the chain acknowledges, then
// hands the Commit to the resolver. The cache node forwards the key's GETs to the tail meanwhile.
// Every transition with its actions: the written table in tests/coordinator_write_test.cc.
//
// Replies: OK only once the local commit succeeded, and then the cache node has the write
// committed, or holds the key pending with this txid (it forwards every GET here until the
// resolver delivers the Commit), or does not cache the key. BUSY and ERROR only when the write
// is definitely not applied; if the cache node may have prepared it, an Abort goes with them.
//
// An event a state does not expect changes nothing, returns no actions and is counted in
// rejected(): it would be a bug in the shell (the table test and the fuzz target check it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "coordinator/actions.h"

namespace exo::db {

class CachedWrite {
 public:
  enum class State : uint8_t {
    kReceived,             // the write arrived; the key is held by `cache_node`
    kSettling,             // delivering the key's earlier undelivered decisions first
    kPreparingLocally,     // the RocksDB transaction is being written and prepared
    kPrepareSent,          // prepared locally (redo in the WAL); Prepare RPC in flight
    kCommittingPrepared,   // the cache node prepared; the local commit is in progress
    kCommittingNotCached,  // the cache node does not cache the key; the local commit is in progress
    kCommitSent,           // committed locally (the decision); Commit RPC in flight
    kReplicating,          // the cache node answered; the write is going down the chain
    // Finished:
    kDone,      // OK; nothing of this write is left to deliver
    kDeferred,  // OK; its Commit is left to the resolver (the cache node forwards the key's GETs)
    kAborted,   // BUSY or ERROR, not applied; its Abort is left to the resolver
    kRefused,   // BUSY or ERROR, not applied; nothing to undo at the cache node
    kUncached,  // handed back: the key turned out untracked, the caller writes it uncached
    kDeferredReplication,  // no reply; the chain runtime completes it (replicate only)
  };
  static constexpr size_t kNumStates = 14;

  // The write. Spans and views must outlive the machine (the request frame, the caller's
  // strings). `txid` is node-unique and allocated under the key's stripe lock, so a key's
  // txids grow with its writes.
  struct Request {
    uint64_t txid = 0;
    bool is_delete = false;
    Bytes key;
    Bytes value;                  // empty for a delete
    std::string_view cache_node;  // who holds the key (a copy the caller keeps: an unmark frees the map's)
    Bytes dedup_key, dedup_value;  // the request's OK record (records.h), committed with the write
    bool replicate = false;        // the key's slot has a chain of more than one node
  };

  explicit CachedWrite(const Request& r);
  CachedWrite(const CachedWrite&) = delete;
  CachedWrite& operator=(const CachedWrite&) = delete;

  ActionList on(const Event& e);

  State state() const { return state_; }
  bool finished() const { return state_ >= State::kDone; }
  uint32_t rejected() const { return rejected_; }
  uint64_t txid() const { return r_.txid; }

 private:
  ActionList prepare_locally();
  // Abort record (durable before the rollback), rollback, Abort to the resolver, refusal.
  ActionList abandon(uint8_t status);
  // BUSY or ERROR; `rollback`: the transaction was begun and must be dropped first.
  ActionList refuse(uint8_t status, bool rollback = false);
  void delete_commit_record(ActionList& out);
  void reply(ActionList& out, uint8_t status);

  // The local commit once the cache node answered (and, replicating, once the chain acked).
  ActionList commit_locally(bool participant_prepared);

  const Request r_;
  State state_ = State::kReceived;
  bool participant_prepared_ = false;  // replicating: the cache node answered prepared
  uint32_t rejected_ = 0;
  std::string txlog_value_;             // the txlog record's value: cache node and key
  std::string commit_key_, abort_key_;  // its keys for this txid
};

const char* name(CachedWrite::State s);

}  // namespace exo::db
