#include "recovery.h"

#include "coordinator/recovery_plan.h"
#include "log.h"
#include "records.h"

namespace exo::db {
namespace {

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
    const PreparedPlan plan = plan_prepared(p);
    if (plan.write_abort) {
      const StoreOp op = StoreOp::put(Cf::kTxlog, bytes_of(plan.abort_key), bytes_of(plan.abort_value));
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

using Records = std::vector<std::pair<std::string, std::string>>;

StoreResult read_all(KvStore& store, Cf cf, Records* out) {
  return store.scan(cf, [&](std::string_view k, std::string_view v) { out->emplace_back(k, v); });
}

// Step 2.
StoreResult queue_decisions(KvStore& store, const KnownCacheNode& known, Resolver& resolver,
                            RecoveryReport* rep) {
  Records records;
  StoreResult r = read_all(store, Cf::kTxlog, &records);
  if (!r.ok()) return r;
  TxlogPlan plan = plan_txlog(records, known);
  for (const PendingDecision& d : plan.unusable)
    LOG_WARN("dropping the %s record of txid %llu: cache node '%s' unknown or record unreadable",
             to_string(d.decision), static_cast<unsigned long long>(d.txid), d.cache_node.c_str());
  rep->txlog_dropped += plan.unusable.size();
  rep->commits_queued += plan.commits;
  rep->aborts_queued += plan.aborts;
  for (PendingDecision& d : plan.queue) resolver.add_recovered(std::move(d));
  return drop_all(store, Cf::kTxlog, plan.drop);
}

// Step 3.
StoreResult load_marks(KvStore& store, const KnownCacheNode& known, CachedKeys& cached,
                       RecoveryReport* rep) {
  Records records;
  StoreResult r = read_all(store, Cf::kCached, &records);
  if (!r.ok()) return r;
  const MarksPlan plan = plan_marks(records, known);
  for (const auto& [key, node] : plan.load) cached.lock_key(bytes_of(key)).mark(key, node);
  rep->marks_loaded += plan.load.size();
  rep->marks_dropped += plan.drop.size();
  return drop_all(store, Cf::kCached, plan.drop);
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
  const KnownCacheNode known = [&cluster](std::string_view name) {
    return cluster.find_cache(std::string(name)) != nullptr;
  };
  StoreResult r = roll_back_prepared(store, report);
  if (r.ok()) r = queue_decisions(store, known, resolver, report);
  if (r.ok()) r = load_marks(store, known, cached, report);
  if (r.ok()) r = load_dedup(store, dedup, report);
  return r;
}

}  // namespace exo::db
