// The vocabulary of the db node's cached-write coordinator (docs/two-phase-commit.md): what its
// pure state machines (CachedWrite, Delivery) ask their shell to do, as Actions, and what the
// shell tells them back, as Events. Like the controller's flows.py and rule_updater.py, the
// machines decide and the shell (write_cached.cc, resolver.cc) only carries out: no I/O, no
// RocksDB, no gRPC, no threads and no clock on this side, so every transition can be tested
// and fuzzed on its own (tests/coordinator_*_test.cc, fuzz/coordinator_fuzz.cc).
//
// An Action is plain data. Its strings and spans point into the machine that made it and into
// the request it was made for, so it is valid until that machine's next transition and the
// machine must not move (the machines are neither copyable nor movable).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "coordinator/replies.h"
#include "records.h"
#include "store.h"

namespace exo::db {

enum class Act : uint8_t {
  // The write's own RocksDB transaction (one per CachedWrite, named after its txid).
  kTxnPrepare,     // begin txn `txid`, apply store_ops(), Prepare()       -> Event::local_prepared
  kTxnCommit,      // Commit(): the decision point                         -> Event::local_committed
  kTxnRollback,    // Rollback() (a failure is only logged)
  // Any other store write: one atomic batch of store_ops() with `durability`. Awaited: the
  // machine needs the result (Event::txlog_deleted); else a failure is only logged.
  kStoreWrite,
  // `cache_node` no longer holds `key`: unmark in memory, and on disk unsynced (marks.h).
  kUnmark,
  // RPCs to `cache_node` (with the propagator's deadline).
  kSendPrepare,    // CacheNode.Prepare(key, txid, is_delete, value)       -> Event::prepare_replied
  kSendCommit,     // CacheNode.Commit(key, txid)                          -> Event::finish_replied
  kSendAbort,      // CacheNode.Abort(key, txid)                           -> Event::finish_replied
  // The resolver (undelivered decisions).
  kSettle,         // one delivery attempt of each undelivered decision of `key` -> Event::settled
  kQueueDecision,  // hand `decision` of `txid` for (`cache_node`, `key`) to the resolver
  kResolved,       // the decision of `txid` is delivered: out of the book (resolver_resolved
                   // counts it if it was still there: ForgetCacheNode may have dropped it)
  // The client and the counters.
  kRecordApplied,  // the write's OK into the in-memory dedup table (its disk record is in the txn)
  kReply,          // answer `status`: OK; BUSY or ERROR are refusals, recorded for the request id
  kGoUncached,     // the key is no longer tracked: the caller writes it the uncached way
  kCount,          // bump `tally`
  // Chain replication (replication factor > 1, docs/design/replication.md 3.4).
  kReplicate,          // pass the write down the slot's chain                -> Event::chain_replied
  kDeferReplication,   // the chain did not acknowledge: hand the prepared txn to the chain
                       // runtime, which commits it and queues the Commit once it does; no reply
};

// Counters the machines move (mapped onto the counter blocks by the shell).
enum class Tally : uint8_t {
  kCommitsDeferred,   // a write answered OK whose Commit is left to the resolver
  kWritesPropagated,  // a Commit the cache node applied in the write's own path
};

struct Action {
  Act kind = Act::kReply;
  // The machine waits for this action's Event before it can go on. Only the last action of a
  // list can be awaited; the shell carries out the others in order first.
  bool awaited = false;
  uint64_t txid = 0;
  Decision decision = Decision::kAbort;  // kSendCommit/kSendAbort, kQueueDecision, kResolved
  std::string_view cache_node;           // kUnmark, kSend*, kQueueDecision
  std::string_view key;                  // kUnmark, kSend*, kSettle, kQueueDecision
  bool is_delete = false;                // kSendPrepare
  Bytes value;                           // kSendPrepare (empty for a delete)
  std::array<StoreOp, 3> ops{};          // kTxnPrepare, kStoreWrite
  uint8_t n_ops = 0;
  Durability durability = Durability::kAsConfigured;  // kStoreWrite
  uint8_t status = 0;                    // kReply: a wire status (wire::kOk, kBusy, kError)
  Tally tally = Tally::kCommitsDeferred; // kCount
  const char* what = "";                 // what it is for, for the shell's log lines

  std::span<const StoreOp> store_ops() const { return {ops.data(), n_ops}; }
};

// The actions of one transition, in the order they must be carried out. A transition makes
// at most four; the room for six keeps that from being a tight fit.
class ActionList {
 public:
  static constexpr size_t kCapacity = 6;
  Action& add(Act kind) {
    // Overflow would be a bug in a machine: the last slot is reused rather than writing past
    // the end, and overflowed() says so (the table tests and the fuzz target check it).
    if (n_ == kCapacity) overflowed_ = true;
    Action& a = items_[n_ < kCapacity ? n_++ : kCapacity - 1];
    a = Action{};
    a.kind = kind;
    return a;
  }
  bool overflowed() const { return overflowed_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const Action& operator[](size_t i) const { return items_[i]; }
  const Action* begin() const { return items_.data(); }
  const Action* end() const { return items_.data() + n_; }
  // The action the machine waits for, or nullptr when it waits for none.
  const Action* awaited() const { return n_ && items_[n_ - 1].awaited ? &items_[n_ - 1] : nullptr; }

 private:
  std::array<Action, kCapacity> items_{};
  size_t n_ = 0;
  bool overflowed_ = false;
};

// What happened, as the machines take it in. `code` carries the result of the awaited action.
enum class On : uint8_t {
  kArrived,         // a write of a key a cache node holds; code 1: the resolver has decisions for it
  kSettled,         // kSettle's result: code is a Settle
  kLocalPrepared,   // kTxnPrepare's result: code is a LocalPrepare
  kPrepareReplied,  // kSendPrepare's result: code is a PrepareOutcome::Code
  kLocalCommitted,  // kTxnCommit's result: code 1 committed, 0 failed (not visible)
  kFinishReplied,   // kSendCommit/kSendAbort's result: code is a FinishOutcome::Code
  kTxlogDeleted,    // an awaited kStoreWrite deleting a txlog record: code 1 written
  kAttempt,         // the resolver tries a decision (its retry round, or a write settling its key)
  kForget,          // ForgetCacheNode: the controller has withdrawn the decision's cache node
  kChainReplied,    // kReplicate's result: code is a ChainReply
};
inline constexpr size_t kNumOn = 10;

enum class ChainReply : uint8_t {
  kAcked,      // every later member of the chain applied the write
  kUncertain,  // no acknowledgement: some member may have applied it
};

enum class Settle : uint8_t {
  kUndelivered,  // at least one decision is still undelivered
  kDelivered,    // all delivered; the key is still tracked
  kUntracked,    // all delivered, and an answer cached=false untracked the key
};

enum class LocalPrepare : uint8_t {
  kOk,           // prepared: the redo record is in the WAL, nothing visible yet
  kBeginFailed,  // no transaction was begun: nothing to roll back
  kFailed,       // a transaction write or Prepare() failed: roll it back
};

struct Event {
  On kind = On::kArrived;
  uint8_t code = 0;

  static Event arrived(bool has_pending) { return {On::kArrived, has_pending}; }
  static Event settled(Settle s) { return {On::kSettled, static_cast<uint8_t>(s)}; }
  static Event local_prepared(LocalPrepare r) { return {On::kLocalPrepared, static_cast<uint8_t>(r)}; }
  static Event prepare_replied(PrepareOutcome::Code c) { return {On::kPrepareReplied, c}; }
  static Event local_committed(bool ok) { return {On::kLocalCommitted, ok}; }
  static Event finish_replied(FinishOutcome::Code c) { return {On::kFinishReplied, c}; }
  static Event txlog_deleted(bool ok) { return {On::kTxlogDeleted, ok}; }
  static Event attempt() { return {On::kAttempt, 0}; }
  static Event forget() { return {On::kForget, 0}; }
  static Event chain_replied(ChainReply r) { return {On::kChainReplied, static_cast<uint8_t>(r)}; }
};

const char* name(Act a);
const char* name(On e);

// The loop every shell runs: gives `machine` the event `first`, then carries out the actions it
// returns, in order, with `carry_out(const Action&) -> std::optional<Event>`, and feeds the
// awaited action's Event back, until the machine waits for nothing. The loop itself does no
// I/O: `carry_out` is the shell.
template <typename Machine, typename CarryOut>
void drive(Machine& machine, const Event& first, CarryOut&& carry_out) {
  ActionList actions = machine.on(first);
  for (;;) {
    std::optional<Event> next;
    for (const Action& a : actions) {
      std::optional<Event> e = carry_out(a);
      if (a.awaited) next = e;
    }
    if (!next) return;
    actions = machine.on(*next);
  }
}

}  // namespace exo::db
