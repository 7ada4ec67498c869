// Delivering one undelivered 2PC decision (Commit or Abort of a txid) to its cache node, as a
// pure state machine; the resolver (resolver.cc) is its shell, and the DecisionBook holds the
// decisions between attempts. Each attempt runs under the key's stripe lock.
//
//   state     event                                        next
//   queued    attempt                                      sent (Commit or Abort RPC)
//             forget (ForgetCacheNode)                     dropped (record deleted, best effort)
//   sent      finish_replied: done, not cached, refused    tidying (record deleted)
//             finish_replied: unreachable                  queued (node down this round)
//   tidying   txlog_deleted: ok                            delivered (out of the book)
//             txlog_deleted: failed                        queued
// Every transition with its actions: tests/coordinator_delivery_test.cc.
//
// A definitive answer (ok, cached=false, or a refusal: nothing of that txid is pending there)
// ends the decision once its txlog record is deleted. The record goes before the book entry:
// if deleting it fails, the decision stays queued and the next attempt (answered definitively
// again, harmlessly) retries the delete. cached=false also untracks the key, so later writes
// need no Prepare. An unexpected event changes nothing and is counted in rejected().
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/actions.h"
#include "coordinator/pending_decision.h"

namespace exo::db {

class Delivery {
 public:
  enum class State : uint8_t {
    kQueued,     // waiting for an attempt
    kSent,       // Commit/Abort RPC in flight
    kTidying,    // answered definitively; deleting its txlog record
    kDelivered,  // finished: out of the book
    kDropped,    // finished: ForgetCacheNode dropped it (its record deleted, best effort)
  };
  static constexpr size_t kNumStates = 5;

  // `d` must outlive the machine.
  explicit Delivery(const PendingDecision& d);
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  ActionList on(const Event& e);

  State state() const { return state_; }
  bool finished() const { return state_ >= State::kDelivered; }
  // The last attempt could not reach the cache node: a round skips its other decisions, since
  // each failure may cost a full RPC deadline under a stripe lock.
  bool unreachable() const { return unreachable_; }
  uint32_t rejected() const { return rejected_; }

 private:
  void delete_record(ActionList& out, bool awaited, const char* what);

  const PendingDecision& d_;
  State state_ = State::kQueued;
  bool unreachable_ = false;
  uint32_t rejected_ = 0;
  std::string record_key_;  // txlog_key(txid, decision)
};

const char* name(Delivery::State s);

}  // namespace exo::db
