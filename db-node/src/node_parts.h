// Everything one db node is made of around its store, built the same way for exo-db-node
// (a RocksStore, src/main.cc) and for every node the wimpy emulator hosts (a FixedValueStore,
// emulator/src): the cached-key map, the 2PC propagator, txids, the dedup table, the resolver,
// the hot-key detector, the reporter with its gRPC sink to the node's cache node, the counter
// blocks, the DbNode gRPC service and the per-thread request handlers.
//
// Building starts nothing. The owner then (db node only) runs start-up recovery on the parts,
// calls start() (gRPC server, then the REPORT thread), drives resolve_once()/sweep_once() from
// its periodic threads and its packet threads through the handlers, and calls stop().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cached_keys.h"
#include "cluster.h"
#include "control_service.h"
#include "counters.h"
#include "dedup_table.h"
#include "grpc_security.h"
#include "hot_keys/hot_key_detector.h"
#include "propagator.h"
#include "replication/chain_runtime.h"
#include "replication/forwarder.h"
#include "reporter.h"
#include "request_handler.h"
#include "resolver.h"
#include "store.h"

namespace grpc {
class Server;
}

namespace exo::db {

struct NodePartsOptions {
  uint64_t dedup_ttl_ms = DedupTable::kTtlMs;
  // The gRPC credentials of the server and channels. Null: loaded from the cluster for the
  // node's certificate name (cert_name_of: its own, or its emulator's).
  std::shared_ptr<const GrpcSecurity> security;
};

// One packet thread's (or lcore's) view of the node: its handler and its counter block.
struct NodeLane {
  RequestHandler* handler = nullptr;
  Counters* counters = nullptr;
};

class NodeParts {
 public:
  // Builds db node `self_index` of `cluster` around `store` (both outlive the parts). Returns
  // nullptr and sets *error (naming the config field) when the node's cache_node is unknown or
  // its certificate files cannot be used (security.cert_dir).
  static std::unique_ptr<NodeParts> build(const Cluster& cluster, uint32_t self_index,
                                          KvStore& store, std::string* error,
                                          const NodePartsOptions& opts = {});
  ~NodeParts();  // stop()
  NodeParts(const NodeParts&) = delete;
  NodeParts& operator=(const NodeParts&) = delete;

  // A handler with its own counter block, for one packet thread. Call before threads run.
  NodeLane add_lane();

  // Starts the DbNode gRPC server on self().grpc, then the REPORT thread (a REPORT makes the
  // cache node Fetch from us, so the server must be up first). false + *error (prefixed with
  // "grpc: ") when the server cannot listen.
  bool start(std::string* error);
  // Stops the REPORT thread, then the gRPC server (in-flight RPCs get `grace`). Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(500));

  // One delivery round of the resolver; one sweep of expired dedup records (warns on error).
  // One delivery round of the resolver and one retry round of the chain runtime's uncommitted writes.
  size_t resolve_once() { return resolver.run_once() + chain.resolve_once(); }
  void sweep_once();

  const DbNodeInfo& self() const { return cluster.db_nodes[self_index]; }

  const Cluster& cluster;
  const uint32_t self_index;
  KvStore& store;
  const std::shared_ptr<const GrpcSecurity> security;  // before the propagator and sink using it
  CounterSet counters;
  CachedKeys cached;
  GrpcPropagator propagator;
  DedupTable dedup;
  Resolver resolver;
  TxIdSource txids;
  HotKeyDetector detector;
  GrpcChainForwarder forwarder;  // Replicate calls to the next member of a chain
  ChainRuntime chain;
  NodeContext ctx;
  std::unique_ptr<GrpcReportSink> sink;  // null when the node has no cache node
  Reporter reporter;
  ControlService service;

 private:
  NodeParts(const Cluster& cluster, uint32_t self_index, KvStore& store,
            std::shared_ptr<const GrpcSecurity> security, std::unique_ptr<GrpcReportSink> sink,
            const NodePartsOptions& opts);

  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<RequestHandler>> handlers_;
};

}  // namespace exo::db
