#include "control_service.h"

#include <grpcpp/grpcpp.h>

#include "log.h"
#include "unix_socket.h"
#include "wire.h"

namespace exo::db {
namespace {

std::span<const uint8_t> bytes_of(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

}  // namespace

ControlService::ControlService(const Cluster& cluster, std::string node_name, KvStore& store,
                               CachedKeys& cached, const CounterSet& all, Counters& control,
                               Reporter* reporter)
    : cluster_(cluster), node_name_(std::move(node_name)), store_(store), cached_(cached),
      all_(all), c_(control), reporter_(reporter) {}

grpc::Status ControlService::Fetch(grpc::ServerContext*, const exo::FetchRequest* req,
                                   exo::FetchReply* rep) {
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
    const StoreResult r = store_.get(bytes_of(key), &value);
    if (r.ok()) {
      guard.mark(key, req->cache_node());
      fv->set_found(true);
      fv->set_value(value);
      add_shared(c_.fetched_keys);
    } else {
      fv->set_found(false);
      if (r.code == StoreResult::kError) {
        add_shared(c_.errors);
        LOG_WARN("Fetch read failed: %s", r.error.c_str());
      }
    }
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::Evict(grpc::ServerContext*, const exo::EvictRequest* req,
                                   exo::EvictReply* rep) {
  uint32_t n = 0;
  for (const std::string& key : req->keys()) {
    CachedKeys::Guard guard = cached_.lock_key(bytes_of(key));
    if (guard.unmark(key, req->cache_node())) ++n;
  }
  add_shared(c_.evicted_keys, n);
  rep->set_evicted(n);
  return grpc::Status::OK;
}

grpc::Status ControlService::Stats(grpc::ServerContext*, const exo::StatsRequest*,
                                   exo::StatsReply* rep) {
  rep->set_node(node_name_);
  const CounterValues v = all_.sum();
  for (size_t i = 0; i < kNumCounters; ++i) {
    exo::Counter* c = rep->add_counters();
    c->set_name(kCounterDescs[i].name);
    c->set_value(v[i]);
  }
  exo::Counter* g = rep->add_counters();
  g->set_name("cached_keys");
  g->set_value(cached_.size());
  return grpc::Status::OK;
}

grpc::Status ControlService::HotKeys(grpc::ServerContext*, const exo::StatsRequest*,
                                     exo::ReportRequest* rep) {
  if (!reporter_)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "hot-key detection is not running");
  *rep = reporter_->peek();
  return grpc::Status::OK;
}

std::unique_ptr<grpc::Server> start_control_server(const std::string& address,
                                                   ControlService& service, std::string* error) {
  if (std::string e = exo::prepare_unix_socket(address); !e.empty()) {
    *error = "grpc: " + e;
    return nullptr;
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    *error = "grpc: cannot listen on '" + address + "'";
    return nullptr;
  }
  return server;
}

}  // namespace exo::db
