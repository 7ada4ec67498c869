// What start-up recovery (recovery.cc, its shell) must do with the 2PC state a db node finds on
// disk, decided here without touching the store: docs/two-phase-commit.md, "Db node crash".
// Whatever state a cached write was in when the process died (cached_write.h), these rules
// bring it to a decided one: a transaction left prepared was never acknowledged and is rolled
// back with an Abort for its cache node; a committed one has its Commit record; every decision
// record is queued for the resolver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "coordinator/pending_decision.h"
#include "store.h"

namespace exo::db {

// Whether a cache node name is in the cluster config. Records for one that is not are dropped:
// no GET can reach it.
using KnownCacheNode = std::function<bool(std::string_view name)>;

// Step 1, per transaction RocksDB found prepared: write the abort record (durably) if the
// transaction carries a commit record, then roll it back. In that order: a crash in between
// finds the transaction prepared again and writes the same record again.
struct PreparedPlan {
  uint64_t txid = 0;
  bool write_abort = false;  // false: no txlog record in it; rolled back without an Abort
  std::string abort_key, abort_value;
};
PreparedPlan plan_prepared(const PreparedTxn& p);

// Step 2, every txlog record: a decision the cache node may not have received. `C` wins over
// `A` for one txid (the commit record exists only if the transaction committed: an Abort after
// it would drop a durable write). Queued in txid order.
struct TxlogPlan {
  std::vector<PendingDecision> queue;   // to the resolver (counted in txns_recovered)
  std::vector<std::string> drop;        // txlog keys to delete
  std::vector<PendingDecision> unusable;  // dropped for an unknown cache node or an unreadable value (for the log)
  size_t commits = 0, aborts = 0;
};
TxlogPlan plan_txlog(const std::vector<std::pair<std::string, std::string>>& records,
                     const KnownCacheNode& known);

// Step 3, the marks (key -> cache node): loaded into memory, or dropped (empty key, unknown node).
struct MarksPlan {
  std::vector<std::pair<std::string, std::string>> load;
  std::vector<std::string> drop;
};
MarksPlan plan_marks(const std::vector<std::pair<std::string, std::string>>& records,
                     const KnownCacheNode& known);

}  // namespace exo::db
