#include "control_service.h"

#include <grpcpp/grpcpp.h>

#include "keyhash.h"
#include "log.h"
#include "marks.h"
#include "rpc_metrics.h"
#include "unix_socket.h"
#include "wire.h"

namespace exo::db {

ControlService::ControlService(const Cluster& cluster, std::string node_name, KvStore& store,
                               CachedKeys& cached, Resolver& resolver, const CounterSet& all,
                               Counters& control, Reporter* reporter)
    : cluster_(cluster), node_name_(std::move(node_name)), store_(store), cached_(cached),
      resolver_(resolver), all_(all), c_(control), reporter_(reporter),
      authz_(cluster, control.rpc_refused, &control.tls_handshake_refused) {}

grpc::Status ControlService::check_cache_node(const grpc::ServerContext* ctx,
                                              const google::protobuf::MethodDescriptor* method,
                                              const std::string& cache_node) const {
  // A cache node Fetches and Evicts for itself only: in another's name it could make this node
  // propagate writes to the wrong node (or stop propagating them), and that node serve stale
  // values.
  if (!authz_.checks_on() || cache_node == caller(ctx)) return grpc::Status::OK;
  return authz_.refuse(ctx, method, "cache_node '" + cache_node + "' is not the caller");
}

grpc::Status ControlService::Fetch(grpc::ServerContext* ctx, const exo::FetchRequest* req,
                                   exo::FetchReply* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.Fetch");
  if (grpc::Status s = check_cache_node(ctx, kMethod, req->cache_node()); !s.ok()) return s;
  // Tracking a key for a cache node we cannot reach would make every later write of it fail
  // at Prepare, so refuse unknown names up front.
  if (!cluster_.find_cache(req->cache_node()))
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "cache_node: no cache node named '" + req->cache_node() + "'");
  std::string value;
  for (const std::string& key : req->keys()) {
    exo::FetchedValue* fv = rep->add_values();
    fv->set_key(key);
    if (key.empty() || key.size() > wire::kMaxKeyLen) {
      fv->set_found(false);  // not a key any client can use
      continue;
    }
    // The stripe lock orders this read against writes of the key: either the write finished
    // before (we return its value) or it starts after we marked the key (it is propagated).
    CachedKeys::Guard guard = cached_.lock_key(bytes_of(key));
    // A write of the key not yet acknowledged by its chain: this node's value may differ from
    // the tail's, which serves the key's GETs, so the cache node must not take either now.
    // Nor may it from a node that is not the key's head now: only the head knows which keys are
    // held (its marks) and coordinates their writes.
    if (chain_ && chain_->replicates() &&
        (!chain_->active() || !chain_->table()->is_head(
                                  chain_->table()->slot_of(key_hash(bytes_of(key))), chain_->self()))) {
      fv->set_found(false);
      continue;
    }
    // One cache node holds a key at a time: a second one asking (at replication factor > 1 the
    // node reporting a key hot changes with the read server, and each reports to its own cache
    // node) is refused while the first holds it, or writes would reach only one of them and the
    // other serve a stale value. At factor 1 only the owner's cache node ever asks.
    if (const std::string* held = guard.holder(key); held && *held != req->cache_node()) {
      fv->set_found(false);
      continue;
    }
    if (chain_ && chain_->has_uncommitted(key)) {
      fv->set_found(false);
      continue;
    }
    StoreResult r = store_.get(bytes_of(key), &value);
    // The mark must be durable before the value leaves: after a restart this node must still
    // know to propagate writes of the key, or the cache node would serve a stale value.
    if (r.ok()) r = mark_held(store_, guard, key, req->cache_node());
    if (r.ok()) {
      fv->set_found(true);
      fv->set_value(value);
      add_shared(c_.fetched_keys);
    } else {
      fv->set_found(false);
      if (r.code == StoreResult::kError) {
        add_shared(c_.errors);
        LOG_WARN("Fetch failed: %s", r.error.c_str());
      }
    }
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::Evict(grpc::ServerContext* ctx, const exo::EvictRequest* req,
                                   exo::EvictReply* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.Evict");
  if (grpc::Status s = check_cache_node(ctx, kMethod, req->cache_node()); !s.ok()) return s;
  uint32_t n = 0;
  std::string err;
  for (const std::string& key : req->keys()) {
    CachedKeys::Guard guard = cached_.lock_key(bytes_of(key));
    if (unmark_held(store_, guard, key, req->cache_node(), &err)) ++n;
  }
  if (!err.empty()) LOG_WARN("Evict: deleting a mark on disk failed (harmless): %s", err.c_str());
  add_shared(c_.evicted_keys, n);
  rep->set_evicted(n);
  return grpc::Status::OK;
}

grpc::Status ControlService::ForgetCacheNode(grpc::ServerContext* ctx,
                                             const exo::ForgetCacheNodeRequest* req,
                                             exo::ForgetCacheNodeReply* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.ForgetCacheNode");
  const std::string& node = req->cache_node();
  if (!cluster_.find_cache(node))
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "cache_node: no cache node named '" + node + "'");
  // Keys first, then decisions: once a key is untracked no new decision for this node can be
  // queued for it (no write propagates to the node any more), so none survives the forget.
  // Stripe by stripe: each is locked only while its own keys are untracked, so writes and
  // Fetches of other stripes go on meanwhile.
  uint32_t keys = 0;
  std::string err;
  for (size_t i = 0; i < CachedKeys::kStripes; ++i) {
    CachedKeys::Guard guard = cached_.lock_stripe(i);
    for (const std::string& key : guard.keys_held_by(node))
      if (unmark_held(store_, guard, key, node, &err)) ++keys;
  }
  if (!err.empty()) LOG_WARN("ForgetCacheNode: deleting a mark on disk failed: %s", err.c_str());
  const size_t txns = resolver_.forget(node);
  LOG_INFO("forgot cache node %s: %u keys untracked, %zu undelivered decisions dropped",
           node.c_str(), keys, txns);
  rep->set_keys_dropped(keys);
  rep->set_txns_dropped(static_cast<uint32_t>(txns));
  return grpc::Status::OK;
}

std::vector<std::pair<std::string, uint64_t>> ControlService::counters() const {
  Gauges gauges;
  gauges.cached_keys = cached_.size();
  return flatten(all_.sum(), gauges);
}

grpc::Status ControlService::Stats(grpc::ServerContext* ctx, const exo::StatsRequest*,
                                   exo::StatsReply* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.Stats");
  rep->set_node(node_name_);
  for (const auto& [name, value] : counters()) {
    exo::Counter* c = rep->add_counters();
    c->set_name(name);
    c->set_value(value);
  }
  if (extra_stats_)
    for (const auto& [name, value] : extra_stats_()) {
      exo::Counter* e = rep->add_counters();
      e->set_name(name);
      e->set_value(value);
    }
  return grpc::Status::OK;
}

grpc::Status ControlService::HotKeys(grpc::ServerContext* ctx, const exo::StatsRequest*,
                                     exo::ReportRequest* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.HotKeys");
  if (!reporter_)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "hot-key detection is not running");
  *rep = reporter_->peek();
  return grpc::Status::OK;
}

std::unique_ptr<grpc::Server> start_control_server(const std::string& address, ControlService& service,
                                                   const GrpcSecurity& security, std::string* error) {
  if (std::string e = exo::prepare_unix_socket(address); !e.empty()) {
    *error = "grpc: " + e;
    return nullptr;
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, security.server_credentials(), &port);
  builder.RegisterService(&service);
  exo::metrics::instrument(builder);  // health service + RPC latency histograms
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    *error = "grpc: cannot listen on '" + address + "'";
    return nullptr;
  }
  return server;
}

}  // namespace exo::db
