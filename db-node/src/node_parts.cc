#include "node_parts.h"

#include <grpcpp/grpcpp.h>

#include "log.h"
#include "ms_clock.h"

namespace exo::db {

std::unique_ptr<NodeParts> NodeParts::build(const Cluster& cluster, uint32_t self_index,
                                            KvStore& store, std::string* error,
                                            const NodePartsOptions& opts) {
  if (self_index >= cluster.db_nodes.size()) {
    *error = "db_nodes[" + std::to_string(self_index) + "]: no such node";
    return nullptr;
  }
  const DbNodeInfo& self = cluster.db_nodes[self_index];
  std::shared_ptr<const GrpcSecurity> security = opts.security;
  if (!security) {
    try {
      security = GrpcSecurity::load(cluster, cert_name_of(self));
    } catch (const SecurityError& e) {
      *error = e.what();
      return nullptr;
    }
  }
  // REPORTs go to the cache node serving this node's partitions; without one there is nobody
  // to tell, but HotKeys still answers.
  std::unique_ptr<GrpcReportSink> sink;
  if (!self.cache_node.empty()) {
    const CacheNodeInfo* cache = cluster.find_cache(self.cache_node);
    if (!cache) {
      *error = "db_nodes[" + std::to_string(self_index) + "].cache_node: no cache node named '" +
               self.cache_node + "'";
      return nullptr;
    }
    sink = std::make_unique<GrpcReportSink>(cache->grpc, cache->name, security);
  }
  return std::unique_ptr<NodeParts>(
      new NodeParts(cluster, self_index, store, security, std::move(sink), opts));
}

NodeParts::NodeParts(const Cluster& c, uint32_t index, KvStore& s,
                     std::shared_ptr<const GrpcSecurity> sec,
                     std::unique_ptr<GrpcReportSink> report_sink, const NodePartsOptions& opts)
    : cluster(c),
      self_index(index),
      store(s),
      security(std::move(sec)),
      propagator(c, security),
      dedup(opts.dedup_ttl_ms),
      resolver(s, cached, propagator, counters.add_block()),
      txids(TxIdSource::from_clock()),
      detector(c.hot_keys, exo::steady_ms()),
      forwarder(c, security),
      chain(c, index, s, cached, dedup, resolver, forwarder, counters.add_block()),
      ctx{c, index, s, cached, propagator, txids, dedup, resolver, &detector, wall_clock_ms, &chain},
      sink(std::move(report_sink)),
      reporter(c.hot_keys, c.db_nodes[index].name, detector, counters, counters.add_block(),
               sink.get()),
      service(c, c.db_nodes[index].name, s, cached, resolver, counters, counters.add_block(),
              &reporter) {
  service.set_chain(&chain);
}

NodeParts::~NodeParts() { stop(); }

NodeLane NodeParts::add_lane() {
  Counters& c = counters.add_block();
  handlers_.push_back(std::make_unique<RequestHandler>(ctx, c));
  return NodeLane{handlers_.back().get(), &c};
}

bool NodeParts::start(std::string* error) {
  if (server_) return true;
  server_ = start_control_server(self().grpc, service, *security, error);
  if (!server_) return false;
  reporter.start();  // no-op without a sink
  return true;
}

void NodeParts::stop(std::chrono::milliseconds grace) {
  reporter.stop();  // before the server, the reverse of start()
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + grace);
    server_->Wait();
    server_.reset();
  }
}

void NodeParts::sweep_once() {
  std::string e;
  sweep_dedup(dedup, store, wall_clock_ms(), &e);
  if (!e.empty()) LOG_WARN("%s: dedup sweep: %s", self().name.c_str(), e.c_str());
}

}  // namespace exo::db
