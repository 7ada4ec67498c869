#include "coordinator/recovery_plan.h"

#include <map>

namespace exo::db {

PreparedPlan plan_prepared(const PreparedTxn& p) {
  PreparedPlan plan;
  plan.txid = p.txid;
  for (const RecoveredOp& op : p.ops) {
    uint64_t txid = 0;
    Decision d;
    if (op.cf == Cf::kTxlog && !op.is_delete && parse_txlog_key(op.key, &txid, &d) &&
        d == Decision::kCommit) {
      plan.write_abort = true;
      plan.abort_value = op.value;
    }
  }
  if (plan.write_abort) plan.abort_key = txlog_key(p.txid, Decision::kAbort);
  return plan;
}

TxlogPlan plan_txlog(const std::vector<std::pair<std::string, std::string>>& records,
                     const KnownCacheNode& known) {
  struct Found {
    const std::string* commit_value = nullptr;
    const std::string* abort_value = nullptr;
  };
  std::map<uint64_t, Found> by_txid;
  TxlogPlan plan;
  for (const auto& [k, v] : records) {
    uint64_t txid = 0;
    Decision d;
    if (!parse_txlog_key(k, &txid, &d)) {
      plan.drop.push_back(k);
      continue;
    }
    Found& f = by_txid[txid];
    (d == Decision::kCommit ? f.commit_value : f.abort_value) = &v;
  }
  for (const auto& [txid, f] : by_txid) {
    // Both records: only a failed RocksDB commit whose marker still reached the WAL causes it.
    if (f.commit_value && f.abort_value) plan.drop.push_back(txlog_key(txid, Decision::kAbort));
    PendingDecision pd;
    pd.txid = txid;
    pd.decision = f.commit_value ? Decision::kCommit : Decision::kAbort;
    const std::string& value = f.commit_value ? *f.commit_value : *f.abort_value;
    if (!decode_txlog_value(value, &pd.cache_node, &pd.key) || !known(pd.cache_node)) {
      plan.drop.push_back(txlog_key(txid, pd.decision));
      plan.unusable.push_back(std::move(pd));
      continue;
    }
    ++(pd.decision == Decision::kCommit ? plan.commits : plan.aborts);
    plan.queue.push_back(std::move(pd));
  }
  return plan;
}

MarksPlan plan_marks(const std::vector<std::pair<std::string, std::string>>& records,
                     const KnownCacheNode& known) {
  MarksPlan plan;
  for (const auto& [key, node] : records) {
    if (key.empty() || !known(node)) {
      plan.drop.push_back(key);
    } else {
      plan.load.emplace_back(key, node);
    }
  }
  return plan;
}

}  // namespace exo::db
