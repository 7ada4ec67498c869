#include "recovery.h"

#include <map>

#include "log.h"
#include "records.h"

namespace exo::db {
namespace {

bool known_cache(const Cluster& cluster, const std::string& name) {
  return cluster.find_cache(name) != nullptr;
}

// Deletes records found unusable during a scan, after it (never while iterating). Not synced:
// one that survives an OS crash is found and dropped again at the next start.
StoreResult drop_all(KvStore& store, Cf cf, const std::vector<std::string>& keys) {
  std::vector<StoreOp> ops;
  ops.reserve(keys.size());
  for (const std::string& k : keys) ops.push_back(StoreOp::del(cf, bytes_of(k)));
  if (ops.empty()) return StoreResult::Ok();
  return store.write(ops, Durability::kRelaxed);
}

// Step 1.
StoreResult roll_back_prepared(KvStore& store, RecoveryReport* rep) {
  std::vector<PreparedTxn> prepared;
  StoreResult r = store.prepared_txns(&prepared);
  if (!r.ok()) return r;
  for (const PreparedTxn& p : prepared) {
    const RecoveredOp* commit_record = nullptr;
    for (const RecoveredOp& op : p.ops) {
      uint64_t txid = 0;
      Decision d;
      if (op.cf == Cf::kTxlog && !op.is_delete && parse_txlog_key(op.key, &txid, &d) &&
          d == Decision::kCommit)
        commit_record = &op;
    }
    if (commit_record) {
      // Durable before the rollback, for the reason given in write_cached.cc (abandon).
      const std::string ak = txlog_key(p.txid, Decision::kAbort);
      const StoreOp op = StoreOp::put(Cf::kTxlog, bytes_of(ak), bytes_of(commit_record->value));
      r = store.write(std::span<const StoreOp>(&op, 1), Durability::kAsConfigured);
      if (!r.ok()) return r;
    } else {
      LOG_WARN("prepared txid %llu has no txlog record; rolled back without an Abort",
               static_cast<unsigned long long>(p.txid));
    }
    r = store.rollback_prepared(p.txid);
    if (!r.ok()) return r;
    ++rep->prepared_rolled_back;
  }
  return StoreResult::Ok();
}

// Step 2.
StoreResult queue_decisions(KvStore& store, const Cluster& cluster, Resolver& resolver,
                            RecoveryReport* rep) {
  struct Found {
    std::string commit_value, abort_value;
    bool commit = false, abort = false;
  };
  std::map<uint64_t, Found> by_txid;
  std::vector<std::string> drop;
  StoreResult r = store.scan(Cf::kTxlog, [&](std::string_view k, std::string_view v) {
    uint64_t txid = 0;
    Decision d;
    if (!parse_txlog_key(k, &txid, &d)) {
      drop.emplace_back(k);
      return;
    }
    Found& f = by_txid[txid];
    (d == Decision::kCommit ? f.commit : f.abort) = true;
    (d == Decision::kCommit ? f.commit_value : f.abort_value) = v;
  });
  if (!r.ok()) return r;
  for (auto& [txid, f] : by_txid) {
    // Both records: the write was committed (its commit record is part of the transaction),
    // so the cache node must get the Commit; an Abort after it would drop a durable write.
    // (Only a failed RocksDB commit whose marker still reached the WAL can cause this.)
    if (f.commit && f.abort) drop.push_back(txlog_key(txid, Decision::kAbort));
    const Decision d = f.commit ? Decision::kCommit : Decision::kAbort;
    PendingDecision pd;
    pd.txid = txid;
    pd.decision = d;
    if (!decode_txlog_value(f.commit ? f.commit_value : f.abort_value, &pd.cache_node, &pd.key) ||
        !known_cache(cluster, pd.cache_node)) {
      LOG_WARN("dropping the %s record of txid %llu: cache node '%s' unknown or record unreadable",
               to_string(d), static_cast<unsigned long long>(txid), pd.cache_node.c_str());
      drop.push_back(txlog_key(txid, d));
      ++rep->txlog_dropped;
      continue;
    }
    ++(d == Decision::kCommit ? rep->commits_queued : rep->aborts_queued);
    resolver.add_recovered(std::move(pd));
  }
  return drop_all(store, Cf::kTxlog, drop);
}

// Step 3.
StoreResult load_marks(KvStore& store, const Cluster& cluster, CachedKeys& cached,
                       RecoveryReport* rep) {
  std::vector<std::string> drop;
  StoreResult r = store.scan(Cf::kCached, [&](std::string_view k, std::string_view node) {
    const std::string name(node);
    if (k.empty() || !known_cache(cluster, name)) {
      drop.emplace_back(k);
      ++rep->marks_dropped;
      return;
    }
    cached.lock_key(bytes_of(k)).mark(k, name);
    ++rep->marks_loaded;
  });
  if (!r.ok()) return r;
  return drop_all(store, Cf::kCached, drop);
}

// Step 4.
StoreResult load_dedup(KvStore& store, DedupTable& dedup, RecoveryReport* rep) {
  std::vector<std::string> drop;
  StoreResult r = store.scan(Cf::kRequests, [&](std::string_view k, std::string_view v) {
    RequestId id;
    DedupRecord rec;
    if (!parse_request_key(k, &id) || !decode_dedup(v, &rec)) {
      drop.emplace_back(k);
      ++rep->dedup_dropped;
      return;
    }
    dedup.insert(id, rec);
    ++rep->dedup_loaded;
  });
  if (!r.ok()) return r;
  return drop_all(store, Cf::kRequests, drop);
}

}  // namespace

StoreResult recover(KvStore& store, const Cluster& cluster, CachedKeys& cached, DedupTable& dedup,
                    Resolver& resolver, RecoveryReport* report) {
  // Prepared transactions first: rolling them back writes the abort records step 2 reads.
  StoreResult r = roll_back_prepared(store, report);
  if (r.ok()) r = queue_decisions(store, cluster, resolver, report);
  if (r.ok()) r = load_marks(store, cluster, cached, report);
  if (r.ok()) r = load_dedup(store, dedup, report);
  return r;
}

}  // namespace exo::db
