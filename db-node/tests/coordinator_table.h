// Shared by the coordinator's table tests: every event variant a machine can be given, and a
// one-line description of an action list to compare against a written table.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/actions.h"
#include "wire.h"

namespace exo::db::testing {

struct EventCase {
  const char* name;
  Event event;
};

// Every event, with every result code it can carry.
inline const std::vector<EventCase>& all_events() {
  static const std::vector<EventCase> events = {
      {"arrived(none)", Event::arrived(false)},
      {"arrived(pending)", Event::arrived(true)},
      {"settled(undelivered)", Event::settled(Settle::kUndelivered)},
      {"settled(delivered)", Event::settled(Settle::kDelivered)},
      {"settled(untracked)", Event::settled(Settle::kUntracked)},
      {"local_prepared(ok)", Event::local_prepared(LocalPrepare::kOk)},
      {"local_prepared(begin failed)", Event::local_prepared(LocalPrepare::kBeginFailed)},
      {"local_prepared(failed)", Event::local_prepared(LocalPrepare::kFailed)},
      {"prepare_replied(prepared)", Event::prepare_replied(PrepareOutcome::kPrepared)},
      {"prepare_replied(not cached)", Event::prepare_replied(PrepareOutcome::kNotCached)},
      {"prepare_replied(failed)", Event::prepare_replied(PrepareOutcome::kFailed)},
      {"local_committed(ok)", Event::local_committed(true)},
      {"local_committed(failed)", Event::local_committed(false)},
      {"finish_replied(done)", Event::finish_replied(FinishOutcome::kDone)},
      {"finish_replied(not cached)", Event::finish_replied(FinishOutcome::kNotCached)},
      {"finish_replied(refused)", Event::finish_replied(FinishOutcome::kRefused)},
      {"finish_replied(unreachable)", Event::finish_replied(FinishOutcome::kUnreachable)},
      {"txlog_deleted(ok)", Event::txlog_deleted(true)},
      {"txlog_deleted(failed)", Event::txlog_deleted(false)},
      {"attempt", Event::attempt()},
      {"forget", Event::forget()},
      {"chain_replied(acked)", Event::chain_replied(ChainReply::kAcked)},
      {"chain_replied(uncertain)", Event::chain_replied(ChainReply::kUncertain)},
  };
  return events;
}

inline Event event_named(const std::string& name) {
  for (const EventCase& c : all_events())
    if (name == c.name) return c.event;
  ADD_FAILURE() << "no event " << name;
  return Event{};
}

inline std::string describe_op(const StoreOp& op) {
  static const char* const kCf[] = {"data", "cached", "requests", "txlog"};
  std::string s = std::string(kCf[static_cast<int>(op.cf)]) + (op.is_delete ? " del" : " put");
  if (op.cf == Cf::kTxlog) {
    uint64_t txid = 0;
    Decision d;
    if (parse_txlog_key(sv_of(op.key), &txid, &d)) s += d == Decision::kCommit ? " C" : " A";
  }
  return s;
}

inline std::string status_name(uint8_t s) {
  switch (s) {
    case wire::kOk: return "OK";
    case wire::kBusy: return "BUSY";
    case wire::kError: return "ERROR";
  }
  return "status " + std::to_string(s);
}

// e.g. "store-write[txlog put A], txn-rollback, queue Abort, reply BUSY"; `*` marks the action
// the machine waits for.
inline std::string describe(const ActionList& list) {
  std::string out;
  for (const Action& a : list) {
    if (!out.empty()) out += ", ";
    switch (a.kind) {
      case Act::kTxnPrepare:
      case Act::kStoreWrite: {
        out += name(a.kind);
        out += "[";
        for (size_t i = 0; i < a.n_ops; ++i) out += (i ? ", " : "") + describe_op(a.ops[i]);
        if (a.kind == Act::kStoreWrite && a.durability == Durability::kRelaxed) out += ", relaxed";
        out += "]";
        break;
      }
      case Act::kQueueDecision:
        out += std::string("queue ") + to_string(a.decision);
        break;
      case Act::kReply:
        out += "reply " + status_name(a.status);
        break;
      case Act::kCount:
        out += a.tally == Tally::kCommitsDeferred ? "count commits_deferred" : "count writes_propagated";
        break;
      default:
        out += name(a.kind);
    }
    if (a.awaited) out += "*";
  }
  return out;
}

}  // namespace exo::db::testing
