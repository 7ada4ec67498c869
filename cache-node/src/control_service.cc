// Cache/Evict (FETCH/EVICT, thesis 3.6.1), test hooks and stats. Two-phase writes: control_tx.cc.
#include "control_service.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <set>

#include "keyhash.h"
#include "log.h"
#include "wire.h"

namespace exo::cache {
namespace {

constexpr auto kRpcDeadline = std::chrono::seconds(2);

std::unique_ptr<grpc::ClientContext> ctx_with_deadline() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
  return ctx;
}

uint64_t hash_of(const std::string& key) { return LruMap::hash_of(key); }

// Request keys, de-duplicated, in order; empty keys go to `skipped`.
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

}  // namespace

ControlService::ControlService(const Cluster& cluster, std::string self_name, CacheState& state,
                               CpCounters& cp, DpSum sum_dp)
    : cluster_(cluster), name_(std::move(self_name)), state_(state), cp_(cp),
      sum_dp_(std::move(sum_dp)) {}

exo::DbNode::Stub& ControlService::db_stub(uint32_t index) {
  std::lock_guard lock(stubs_mu_);
  if (db_stubs_.size() < cluster_.db_nodes.size()) db_stubs_.resize(cluster_.db_nodes.size());
  auto& s = db_stubs_.at(index);
  if (!s)
    s = exo::DbNode::NewStub(
        grpc::CreateChannel(cluster_.db_nodes[index].grpc, grpc::InsecureChannelCredentials()));
  return *s;
}

exo::Controller::Stub& ControlService::controller_stub() {
  std::lock_guard lock(stubs_mu_);
  if (!controller_)
    controller_ = exo::Controller::NewStub(
        grpc::CreateChannel(cluster_.controller_grpc, grpc::InsecureChannelCredentials()));
  return *controller_;
}

std::string ControlService::change_rules(const Keys& keys, bool add) {
  if (keys.empty()) return "";
  CacheRulesRequest req;
  for (const auto& k : keys) {
    auto* r = req.add_rules();
    r->set_key_hash(hash_of(k));
    r->set_cache_node(name_);
  }
  CacheRulesReply rep;
  auto ctx = ctx_with_deadline();
  auto& stub = controller_stub();
  const grpc::Status st = add ? stub.AddCacheRules(ctx.get(), req, &rep)
                              : stub.RemoveCacheRules(ctx.get(), req, &rep);
  const char* what = add ? "Controller.AddCacheRules" : "Controller.RemoveCacheRules";
  if (!st.ok()) return std::string(what) + ": " + st.error_message();
  if (rep.rejected() > 0)
    return std::string(what) + ": " + std::to_string(rep.rejected()) + " rejected: " + rep.error();
  return "";
}

template <typename Request>
std::map<uint32_t, Request> ControlService::by_owner(const Keys& keys) const {
  std::map<uint32_t, Request> out;
  for (const auto& k : keys) {
    Request& req = out[cluster_.owner_index(hash_of(k))];
    req.add_keys(k);
    req.set_cache_node(name_);
  }
  return out;
}

std::string ControlService::db_evict(const Keys& keys) {
  std::string err;
  for (auto& [idx, req] : by_owner<EvictRequest>(keys)) {
    EvictReply rep;
    auto ctx = ctx_with_deadline();
    const grpc::Status st = db_stub(idx).Evict(ctx.get(), req, &rep);
    if (!st.ok())
      err += (err.empty() ? "" : "; ") + cluster_.db_nodes[idx].name + ".Evict: " + st.error_message();
  }
  return err;
}

std::string ControlService::db_fetch(const Keys& keys,
                                     std::vector<std::pair<std::string, std::string>>& found,
                                     Keys& failed) {
  std::string err;
  for (auto& [idx, req] : by_owner<FetchRequest>(keys)) {
    FetchReply rep;
    auto ctx = ctx_with_deadline();
    const grpc::Status st = db_stub(idx).Fetch(ctx.get(), req, &rep);
    if (!st.ok()) {
      err += (err.empty() ? "" : "; ") + cluster_.db_nodes[idx].name + ".Fetch: " + st.error_message();
      failed.insert(failed.end(), req.keys().begin(), req.keys().end());
      continue;
    }
    for (const auto& v : rep.values())
      if (v.found()) found.emplace_back(v.key(), v.value());
  }
  return err;
}

grpc::Status ControlService::Cache(grpc::ServerContext*, const KeysRequest* req, KeysReply* reply) {
  Keys want, already;
  {
    std::lock_guard lock(state_.mu);
    for (auto& k : unique_keys(*req, reply)) {
      if (state_.map.find(k)) already.push_back(std::move(k));  // idempotent: re-assert its rule
      else if (state_.fetching.count(k)) reply->add_skipped(k);  // another Cache() is on it
      else {
        state_.fetching.emplace(k, FetchState{});
        want.push_back(std::move(k));
      }
    }
  }

  std::vector<std::pair<std::string, std::string>> found;
  Keys failed;
  append_error(reply, db_fetch(want, found, failed));
  std::map<std::string, std::string> values(std::make_move_iterator(found.begin()),
                                            std::make_move_iterator(found.end()));
  const std::set<std::string> failed_set(failed.begin(), failed.end());

  Keys inserted, evicted, not_cached;
  {
    std::lock_guard lock(state_.mu);
    for (const auto& k : want) {
      auto node = state_.fetching.extract(k);
      FetchState& fs = node.mapped();
      if (failed_set.count(k)) {
        reply->add_skipped(k);
        continue;
      }
      // A write committed while we were fetching is newer than what the db node returned.
      const std::string* value = nullptr;
      if (fs.committed) value = fs.committed_delete ? nullptr : &fs.committed_value;
      else if (auto it = values.find(k); it != values.end()) value = &it->second;
      // Not found on the db node (or deleted meanwhile), or too big to ever fit a reply frame.
      if (!value || k.size() + value->size() > exo::wire::max_kv_bytes(cluster_.mtu)) {
        reply->add_skipped(k);
        not_cached.push_back(k);
        continue;
      }
      state_.map.insert(k, *value, &evicted);
      if (fs.prepared) state_.map.prepare(k, fs.txid, fs.prepared_delete, fs.prepared_value);
      inserted.push_back(k);
    }
    // A batch larger than the free space evicts its own first keys (or already-cached ones):
    // those are not cached any more.
    auto gone = [&](const std::string& k) {
      if (state_.map.find(k)) return false;
      reply->add_skipped(k);
      return true;
    };
    std::erase_if(inserted, gone);
    std::erase_if(already, gone);
  }
  cp_.cached_inserts += inserted.size();
  cp_.evictions += evicted.size();

  // The value is in the map: now the switch may send GETs here.
  Keys rules = inserted;
  rules.insert(rules.end(), already.begin(), already.end());
  append_error(reply, change_rules(rules, /*add=*/true));
  // LRU victims: their entries are gone already, so a GET still routed here is forwarded.
  append_error(reply, change_rules(evicted, /*add=*/false));
  not_cached.insert(not_cached.end(), evicted.begin(), evicted.end());
  append_error(reply, db_evict(not_cached));  // the db node need not 2PC these keys with us
  reply->set_done(static_cast<uint32_t>(rules.size()));
  if (!reply->error().empty()) LOG_WARN("Cache: %s", reply->error().c_str());
  return grpc::Status::OK;
}

grpc::Status ControlService::Evict(grpc::ServerContext*, const KeysRequest* req, KeysReply* reply) {
  const Keys keys = unique_keys(*req, reply);
  // Thesis order: rule first, then entry, so no GET reaches us for a key we no longer hold
  // except in-flight ones, which are forwarded. If the rule cannot be removed, keep the entry.
  if (std::string e = change_rules(keys, /*add=*/false); !e.empty()) {
    for (const auto& k : keys) reply->add_skipped(k);
    append_error(reply, e);
    LOG_WARN("Evict: %s", e.c_str());
    return grpc::Status::OK;
  }
  uint32_t erased = 0;
  {
    std::lock_guard lock(state_.mu);
    for (const auto& k : keys) {
      if (state_.map.erase(k)) ++erased;
      else reply->add_skipped(k);
    }
  }
  cp_.evictions += erased;
  // Also for keys we did not hold (e.g. after DropEntries): the db node stops tracking them.
  append_error(reply, db_evict(keys));
  reply->set_done(erased);
  return grpc::Status::OK;
}

grpc::Status ControlService::DropEntries(grpc::ServerContext*, const KeysRequest* req,
                                         KeysReply* reply) {
  uint32_t erased = 0;
  std::lock_guard lock(state_.mu);
  for (const auto& k : unique_keys(*req, reply)) {
    if (state_.map.erase(k)) ++erased;
    else reply->add_skipped(k);
  }
  reply->set_done(erased);
  return grpc::Status::OK;
}

grpc::Status ControlService::ListKeys(grpc::ServerContext*, const StatsRequest*,
                                      CachedKeysReply* reply) {
  std::lock_guard lock(state_.mu);
  for (auto& k : state_.map.keys()) reply->add_keys(std::move(k));
  return grpc::Status::OK;
}

grpc::Status ControlService::Stats(grpc::ServerContext*, const StatsRequest*, StatsReply* reply) {
  uint64_t entries, pending;
  {
    std::lock_guard lock(state_.mu);
    entries = state_.map.size();
    pending = state_.map.pending_count();
  }
  reply->set_node(name_);
  for (const auto& [name, value] : flatten(sum_dp_(), cp_, entries, pending)) {
    auto* c = reply->add_counters();
    c->set_name(name);
    c->set_value(value);
  }
  return grpc::Status::OK;
}

}  // namespace exo::cache
