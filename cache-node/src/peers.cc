// gRPC implementation of Peers: DbNode.Fetch/Evict grouped by slot head (heads.h), Controller
// Add/RemoveCacheRules for this cache node.
#include "peers.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_set>

#include "controller_choice.h"
#include "log.h"
#include "lru_map.h"

namespace exo::cache {
namespace {

// Db node calls and queued (no_wait) rule changes answer quickly.
constexpr auto kRpcDeadline = std::chrono::seconds(2);
// A waiting rule change is paced by the controller's rate limit (switch.rule_update_rate), so a
// batch of a few hundred rules legitimately takes seconds.
constexpr auto kRuleWaitDeadline = std::chrono::seconds(10);

void append(std::string& err, const std::string& e) {
  if (!e.empty()) err += (err.empty() ? "" : "; ") + e;
}

}  // namespace

// One outgoing RPC's context, registered so cancel_all() can reach it.
class GrpcPeers::Call {
 public:
  template <typename Duration>
  Call(GrpcPeers& p, Duration deadline) : p_(p) {
    ctx_.set_deadline(std::chrono::system_clock::now() + deadline);
    std::lock_guard lock(p_.mu_);
    if (p_.cancelled_) ctx_.TryCancel();  // the RPC then fails at once with CANCELLED
    p_.live_.insert(&ctx_);
  }
  ~Call() {
    std::lock_guard lock(p_.mu_);
    p_.live_.erase(&ctx_);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  grpc::ClientContext* ctx() { return &ctx_; }

 private:
  GrpcPeers& p_;
  grpc::ClientContext ctx_;
};

GrpcPeers::GrpcPeers(const Cluster& cluster, std::string self_name,
                     std::shared_ptr<const GrpcSecurity> security, const Heads& heads)
    : cluster_(cluster), name_(std::move(self_name)), security_(std::move(security)), heads_(heads) {}

void GrpcPeers::cancel_all() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  for (auto* ctx : live_) ctx->TryCancel();
}

exo::DbNode::Stub& GrpcPeers::db_stub(uint32_t index) {
  std::lock_guard lock(mu_);
  if (db_stubs_.size() < cluster_.db_nodes.size()) db_stubs_.resize(cluster_.db_nodes.size());
  auto& s = db_stubs_.at(index);
  if (!s) {
    const DbNodeInfo& db = cluster_.db_nodes[index];
    s = exo::DbNode::NewStub(security_->channel(db.grpc, cert_name_of(db)));
  }
  return *s;
}

exo::Controller::Stub& GrpcPeers::controller_stub(size_t* index) {
  std::lock_guard lock(mu_);
  // Every instance presents the one `controller` certificate (docs/design/replication.md, 5.4).
  const size_t n = std::max<size_t>(1, cluster_.controllers.size());
  if (controllers_.size() < n) controllers_.resize(n);
  if (controller_index_ >= n) controller_index_ = 0;
  auto& s = controllers_[controller_index_];
  if (!s) {
    const std::string& address = cluster_.controllers.empty() ? cluster_.controller_grpc
                                                              : cluster_.controllers[controller_index_].grpc;
    s = exo::Controller::NewStub(security_->channel(address, kControllerCertName));
  }
  if (index != nullptr) *index = controller_index_;
  return *s;
}

void GrpcPeers::controller_answered(size_t index, const grpc::Status& st) {
  std::lock_guard lock(mu_);
  if (index != controller_index_) return;  // another call moved on already
  const size_t next = controller_after(cluster_.controllers, index,
                                       st.error_code() == grpc::StatusCode::UNAVAILABLE,
                                       st.error_code() == grpc::StatusCode::FAILED_PRECONDITION, st.error_message());
  if (next != index)
    LOG_INFO("controller %s answered %s; asking %s next", cluster_.controllers[index].name.c_str(),
             st.error_message().c_str(), cluster_.controllers[next].name.c_str());
  controller_index_ = next;
}

namespace {

// Splits keys into one request per slot head (index into cluster.db_nodes). One table for the
// whole call: a SetHeads meanwhile applies to the next one.
template <typename Request>
std::map<uint32_t, Request> by_owner(const HeadsTable& heads, const std::string& self,
                                     const Keys& keys) {
  std::map<uint32_t, Request> out;
  for (const auto& k : keys) {
    Request& req = out[heads.head_index(LruMap::hash_of(k))];
    req.add_keys(k);
    req.set_cache_node(self);
  }
  return out;
}

}  // namespace

FetchResult GrpcPeers::fetch(const Keys& keys) {
  FetchResult out;
  for (auto& [idx, req] : by_owner<FetchRequest>(*heads_.get(), name_, keys)) {
    FetchReply rep;
    Call call(*this, kRpcDeadline);
    const grpc::Status st = db_stub(idx).Fetch(call.ctx(), req, &rep);
    if (!st.ok()) {
      append(out.error, cluster_.db_nodes[idx].name + ".Fetch: " + st.error_message());
      out.failed.insert(out.failed.end(), req.keys().begin(), req.keys().end());
      continue;
    }
    for (const auto& v : rep.values())
      if (v.found()) out.found.emplace_back(v.key(), v.value());
  }
  return out;
}

std::string GrpcPeers::evict(const Keys& keys) {
  std::string err;
  for (auto& [idx, req] : by_owner<EvictRequest>(*heads_.get(), name_, keys)) {
    EvictReply rep;
    Call call(*this, kRpcDeadline);
    const grpc::Status st = db_stub(idx).Evict(call.ctx(), req, &rep);
    if (!st.ok()) append(err, cluster_.db_nodes[idx].name + ".Evict: " + st.error_message());
  }
  return err;
}

RuleOutcome GrpcPeers::change_rules(const std::vector<KeyRate>& keys, bool add, bool no_wait) {
  if (keys.empty()) return {"", true};
  CacheRulesRequest req;
  req.set_no_wait(no_wait);
  for (const auto& k : keys) {
    auto* r = req.add_rules();
    r->set_key_hash(LruMap::hash_of(k.key));
    r->set_cache_node(name_);
    r->set_load(k.rate);
  }
  CacheRulesReply rep;
  grpc::Status st;
  // A standby refuses (FAILED_PRECONDITION, naming the master) and an unreachable instance
  // never got the request: both are safe to send on, so try each instance at most once.
  for (size_t tries = 0, n = std::max<size_t>(1, cluster_.controllers.size()); tries < n; ++tries) {
    rep.Clear();
    Call call(*this, no_wait ? kRpcDeadline : kRuleWaitDeadline);
    size_t index = 0;
    auto& stub = controller_stub(&index);
    st = add ? stub.AddCacheRules(call.ctx(), req, &rep) : stub.RemoveCacheRules(call.ctx(), req, &rep);
    controller_answered(index, st);
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE &&
        st.error_code() != grpc::StatusCode::FAILED_PRECONDITION)
      break;
  }
  const char* what = add ? "Controller.AddCacheRules" : "Controller.RemoveCacheRules";
  // UNAVAILABLE: the request never reached the controller, and FAILED_PRECONDITION: a standby
  // refused it unapplied, so either is safe to send again. Any other failure (a deadline, say)
  // may have been applied: not resending risks a rule that is missing or left over, each only a
  // cache miss or a wasted slot; resending risks a reference nobody removes.
  if (!st.ok())
    return {std::string(what) + ": " + st.error_message(),
            st.error_code() != grpc::StatusCode::UNAVAILABLE &&
                st.error_code() != grpc::StatusCode::FAILED_PRECONDITION};
  // A node the controller counts as out of the cluster (it declared us dead and we have not
  // finished rejoining) gets every add rejected and nothing counted: resending later is safe,
  // and needed, or the keys would stay cached with no rule.
  const bool out_of_cluster = add && rep.rejected() == keys.size() &&
                              rep.error().find("out of the cluster") != std::string::npos;
  if (rep.rejected() > 0) {
    RuleOutcome out{std::string(what) + ": " + std::to_string(rep.rejected()) + " rejected: " + rep.error(),
                    !out_of_cluster, {}, rep.rejected()};
    if (add && rep.full_key_hashes_size() > 0) {
      const std::unordered_set<uint64_t> full(rep.full_key_hashes().begin(), rep.full_key_hashes().end());
      for (const auto& k : keys)
        if (full.count(LruMap::hash_of(k.key))) out.full.push_back(k.key);
    }
    return out;
  }
  // A waiting call can end (deadline) while some changes are still queued at the controller:
  // those count as neither accepted nor rejected. Not confirmed is not done.
  const auto settled = static_cast<size_t>(rep.accepted()) + rep.rejected();
  if (settled < keys.size())
    return {std::string(what) + ": " + std::to_string(keys.size() - settled) +
                " not confirmed by the switch yet (still queued)",
            true};
  return {"", true};
}

RuleOutcome GrpcPeers::add_rules(const std::vector<KeyRate>& keys, bool no_wait) {
  return change_rules(keys, /*add=*/true, no_wait);
}

RuleOutcome GrpcPeers::remove_rules(const Keys& keys, bool no_wait) {
  std::vector<KeyRate> rules;
  rules.reserve(keys.size());
  for (const auto& k : keys) rules.push_back({k, 0});
  return change_rules(rules, /*add=*/false, no_wait);
}

}  // namespace exo::cache
