#include "coordinator/actions.h"

namespace exo::db {

const char* name(Act a) {
  switch (a) {
    case Act::kTxnPrepare: return "txn-prepare";
    case Act::kTxnCommit: return "txn-commit";
    case Act::kTxnRollback: return "txn-rollback";
    case Act::kStoreWrite: return "store-write";
    case Act::kUnmark: return "unmark";
    case Act::kSendPrepare: return "send-prepare";
    case Act::kSendCommit: return "send-commit";
    case Act::kSendAbort: return "send-abort";
    case Act::kSettle: return "settle";
    case Act::kQueueDecision: return "queue-decision";
    case Act::kResolved: return "resolved";
    case Act::kRecordApplied: return "record-applied";
    case Act::kReply: return "reply";
    case Act::kGoUncached: return "go-uncached";
    case Act::kCount: return "count";
    case Act::kReplicate: return "replicate";
    case Act::kDeferReplication: return "defer-replication";
  }
  return "?";
}

const char* name(On e) {
  switch (e) {
    case On::kArrived: return "arrived";
    case On::kSettled: return "settled";
    case On::kLocalPrepared: return "local-prepared";
    case On::kPrepareReplied: return "prepare-replied";
    case On::kLocalCommitted: return "local-committed";
    case On::kFinishReplied: return "finish-replied";
    case On::kTxlogDeleted: return "txlog-deleted";
    case On::kAttempt: return "attempt";
    case On::kForget: return "forget";
    case On::kChainReplied: return "chain-replied";
  }
  return "?";
}

}  // namespace exo::db
