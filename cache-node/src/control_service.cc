// Cache/Evict (FETCH/EVICT, thesis 3.6.1), Report, test hooks and stats. Two-phase writes:
// control_tx.cc. What happens to each key is the key table's (key_table/); the handlers here
// lock, ask it, and make the RPCs it calls for, never holding the lock across one.
#include "control_service.h"

#include <grpcpp/grpcpp.h>

#include <cmath>
#include <set>

#include "insert_fetched.h"
#include "log.h"
#include "wire.h"

namespace exo::cache {
namespace {

// Request keys, de-duplicated, in order; empty or oversized keys go to `skipped`.
std::vector<std::string> unique_keys(const KeysRequest& req, KeysReply* reply) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& k : req.keys()) {
    if (k.empty() || k.size() > exo::wire::kMaxKeyLen) {
      reply->add_skipped(k);
      continue;
    }
    if (seen.insert(k).second) out.push_back(k);
  }
  return out;
}

void append_error(KeysReply* reply, const std::string& e) {
  if (e.empty()) return;
  reply->set_error(reply->error().empty() ? e : reply->error() + "; " + e);
}

std::vector<KeyRate> no_rates(const Keys& keys) {
  std::vector<KeyRate> out;
  for (const auto& k : keys) out.push_back({k, 0});
  return out;
}

}  // namespace

ControlService::ControlService(const Cluster& cluster, std::string self_name, CacheState& state,
                               CpCounters& cp, Peers& peers, Heads& heads, HotList& hot, DpSum sum_dp,
                               Clock clock)
    : cluster_(cluster), name_(std::move(self_name)), state_(state), cp_(cp), peers_(peers),
      heads_(heads), hot_(hot), sum_dp_(std::move(sum_dp)), clock_(std::move(clock)),
      authz_(cluster, cp.rpc_refused, &cp.tls_handshake_refused) {}

grpc::Status ControlService::Cache(grpc::ServerContext* ctx, const KeysRequest* req, KeysReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.Cache");
  Keys want, already;
  {
    std::lock_guard lock(state_.mu);
    for (auto& k : unique_keys(*req, reply)) {
      switch (state_.keys.admit_for_cache(k)) {
        case CacheAdmit::kFetch: want.push_back(std::move(k)); break;
        case CacheAdmit::kHeld: already.push_back(std::move(k)); break;
        case CacheAdmit::kSkip: reply->add_skipped(k); break;  // the caller may retry
      }
    }
  }

  const FetchResult fetched = peers_.fetch(want);
  append_error(reply, fetched.error);

  InsertOutcome o;
  {
    std::lock_guard lock(state_.mu);
    // LRU victims stay "removing" until their EVICT is back, so neither the filler nor another
    // Cache() can FETCH them again meanwhile (a late EVICT would untrack the new copy).
    o = insert_fetched(state_, want, fetched, exo::wire::max_kv_bytes(cluster_.mtu));
    // A batch larger than the free space may push out already-cached keys too.
    std::erase_if(already, [&](const std::string& k) {
      if (state_.keys.held(k)) return false;
      reply->add_skipped(k);
      return true;
    });
  }
  for (const auto* keys : {&o.failed, &o.not_cached, &o.cancelled})
    for (const auto& k : *keys) reply->add_skipped(k);
  const std::set<std::string> want_set(want.begin(), want.end());
  for (const auto& k : o.evicted)
    if (want_set.count(k)) reply->add_skipped(k);  // pushed out by a later key of this batch
  const Keys& inserted = o.inserted;
  const Keys& evicted = o.evicted;
  Keys not_cached = o.not_cached;
  not_cached.insert(not_cached.end(), o.cancelled.begin(), o.cancelled.end());
  cp_.cached_inserts += inserted.size();
  cp_.evictions += evicted.size();

  // The value is in the map: now the switch may send GETs here.
  append_error(reply, peers_.add_rules(no_rates(inserted), /*no_wait=*/false).error);
  // LRU victims: their entries are gone already, so a GET still routed here is forwarded.
  append_error(reply, peers_.remove_rules(evicted, /*no_wait=*/false).error);
  not_cached.insert(not_cached.end(), evicted.begin(), evicted.end());
  append_error(reply, peers_.evict(not_cached));  // the db node need not 2PC these keys with us
  if (!evicted.empty()) {
    std::lock_guard lock(state_.mu);
    state_.keys.removal_done(evicted);
  }
  reply->set_done(static_cast<uint32_t>(inserted.size() + already.size()));
  if (!reply->error().empty()) LOG_WARN("Cache: %s", reply->error().c_str());
  return grpc::Status::OK;
}

grpc::Status ControlService::Evict(grpc::ServerContext* ctx, const KeysRequest* req, KeysReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.Evict");
  const Keys keys = unique_keys(*req, reply);
  // Thesis order: rule first, then entry, so no GET reaches us for a key we no longer hold
  // except in-flight ones, which are forwarded. If the rule cannot be removed, keep the entry.
  if (std::string e = peers_.remove_rules(keys, /*no_wait=*/false).error; !e.empty()) {
    for (const auto& k : keys) reply->add_skipped(k);
    append_error(reply, e);
    LOG_WARN("Evict: %s", e.c_str());
    return grpc::Status::OK;
  }
  uint32_t erased = 0;
  {
    std::lock_guard lock(state_.mu);
    // Each key is removing until the EVICT below is back, so no FETCH of it can be overtaken
    // by it; a FETCH in flight inserts nothing.
    for (const auto& k : keys) {
      if (state_.keys.evict(k)) ++erased;
      else reply->add_skipped(k);
    }
  }
  cp_.evictions += erased;
  // Also for keys we did not hold (e.g. after DropEntries): the db node stops tracking them.
  append_error(reply, peers_.evict(keys));
  {
    std::lock_guard lock(state_.mu);
    state_.keys.removal_done(keys);
  }
  reply->set_done(erased);
  return grpc::Status::OK;
}

grpc::Status ControlService::DropEntries(grpc::ServerContext* ctx, const KeysRequest* req,
                                         KeysReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.DropEntries");
  uint32_t erased = 0;
  std::lock_guard lock(state_.mu);
  for (const auto& k : unique_keys(*req, reply)) {
    if (state_.keys.drop_entry(k)) ++erased;
    else reply->add_skipped(k);
  }
  reply->set_done(erased);
  return grpc::Status::OK;
}

// Reset (control.proto): the controller had declared this node dead, withdrew its Ruleset 2 rules
// and told the db nodes to forget it (DbNode.ForgetCacheNode), so no write to what is held here
// is propagated any more: drop it all, and cancel the FETCHes in flight. Neither the controller
// nor a db node is called: both have already let go. The filler sees keys.resets() change and
// forgets its held-key state, then refills from the REPORTs as after a start. What happens to
// each key is KeyTable::reset's.
grpc::Status ControlService::Reset(grpc::ServerContext* ctx, const StatsRequest*, KeysReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.Reset");
  size_t dropped = 0;
  {
    std::lock_guard lock(state_.mu);
    dropped = state_.keys.reset();
  }
  ++cp_.resets;
  LOG_INFO("Reset: dropped %zu entries", dropped);
  reply->set_done(static_cast<uint32_t>(dropped));
  return grpc::Status::OK;
}

grpc::Status ControlService::ListKeys(grpc::ServerContext* ctx, const StatsRequest*,
                                      CachedKeysReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.ListKeys");
  std::lock_guard lock(state_.mu);
  for (auto& k : state_.map.keys()) reply->add_keys(std::move(k));
  return grpc::Status::OK;
}

std::vector<std::pair<std::string, uint64_t>> ControlService::counters() const {
  Gauges g;
  {
    std::lock_guard lock(state_.mu);
    g.entries = state_.map.size();
    g.pending = state_.map.pending_count();
    g.retiring = state_.keys.retiring_count() + state_.keys.removing_count();
  }
  g.hot_list_keys = hot_.key_count();
  g.threshold_milli = cp_.threshold_milli.load(std::memory_order_relaxed);
  return flatten(sum_dp_(), cp_, g);
}

grpc::Status ControlService::Stats(grpc::ServerContext* ctx, const StatsRequest*, StatsReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.Stats");
  reply->set_node(name_);
  for (const auto& [name, value] : counters()) {
    auto* c = reply->add_counters();
    c->set_name(name);
    c->set_value(value);
  }
  return grpc::Status::OK;
}

std::string ControlService::check_report(const ReportRequest& req) const {
  if (!cluster_.find_db(req.db_node())) return "unknown db node '" + req.db_node() + "'";
  for (const auto& kl : req.keys()) {
    if (kl.key().empty() || kl.key().size() > exo::wire::kMaxKeyLen)
      return "key of " + std::to_string(kl.key().size()) + " bytes (1.." +
             std::to_string(exo::wire::kMaxKeyLen) + ")";
    if (!std::isfinite(kl.rate()) || kl.rate() < 0)
      return "rate " + std::to_string(kl.rate()) + " is not a finite rate >= 0";
  }
  return "";
}

// REPORT (docs/cache-fill.md 1-2): a db node's hottest keys replace its list in the hot list; the
// filler picks them up on its next round. A bad REPORT is refused whole: its sender is broken.
// A REPORT in another db node's name is refused as a call (a db node's certificate does not
// speak for its peers' load: it would steer what this node caches).
grpc::Status ControlService::Report(grpc::ServerContext* ctx, const ReportRequest* req,
                                    ReportReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.Report");
  if (const DbNodeInfo* db = cluster_.find_db(req->db_node());
      db && authz_.checks_on() && !speaks_for(caller(ctx), *db))
    return authz_.refuse(ctx, kMethod, "db_node '" + req->db_node() + "' is not the caller");
  if (std::string e = check_report(*req); !e.empty()) {
    ++cp_.reports_rejected;
    reply->set_accepted(false);
    reply->set_error(e);
    LOG_DEBUG("Report from '%s' refused: %s", req->db_node().c_str(), e.c_str());
    return grpc::Status::OK;
  }
  std::vector<KeyRate> keys;
  keys.reserve(req->keys_size());
  for (const auto& kl : req->keys()) keys.push_back({kl.key(), kl.rate()});
  hot_.report(req->db_node(), std::move(keys), clock_());
  ++cp_.reports_received;
  reply->set_accepted(true);
  return grpc::Status::OK;
}

}  // namespace exo::cache
