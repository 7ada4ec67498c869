// The DbNode gRPC service (proto/exoproto/control.proto): Fetch/Evict/ForgetCacheNode
// bookkeeping of which keys a cache node holds (thesis 3.6.1; persisted, marks.h), Stats, and
// HotKeys (the REPORT the node would send). Every handler first runs the caller checks of
// control.proto (grpc_security.h): the caller's role, and for Fetch/Evict that a cache node acts
// only for itself.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cached_keys.h"
#include "cluster.h"
#include "counters.h"
#include "exoproto/control.grpc.pb.h"
#include "grpc_security.h"
#include "replication/chain_runtime.h"
#include "reporter.h"
#include "resolver.h"
#include "store.h"

namespace grpc {
class Server;
}

namespace exo::db {

class ControlService final : public exo::DbNode::Service {
 public:
  // `control` is the counter block of the control plane (written by several gRPC threads).
  // `reporter` (may be null: HotKeys then fails with FAILED_PRECONDITION) builds HotKeys replies.
  ControlService(const Cluster& cluster, std::string node_name, KvStore& store, CachedKeys& cached,
                 Resolver& resolver, const CounterSet& all, Counters& control,
                 Reporter* reporter = nullptr);

  // For each key, under its stripe lock: read it; if found, mark it held by req.cache_node
  // (durably first) and return its value. A missing key is returned found=false and not
  // tracked; so is a key whose read or mark failed (counted in errors), so the cache node
  // skips both.
  grpc::Status Fetch(grpc::ServerContext* ctx, const exo::FetchRequest* req,
                     exo::FetchReply* rep) override;
  // Untracks each key held by req.cache_node; keys tracked for another cache node are left
  // alone. Returns how many were untracked.
  grpc::Status Evict(grpc::ServerContext* ctx, const exo::EvictRequest* req,
                     exo::EvictReply* rep) override;
  // Untracks every key req.cache_node holds and drops the resolver's undelivered decisions for
  // it (with their txlog records). INVALID_ARGUMENT for a name not in the cluster config.
  grpc::Status ForgetCacheNode(grpc::ServerContext* ctx, const exo::ForgetCacheNodeRequest* req,
                               exo::ForgetCacheNodeReply* rep) override;
  grpc::Status Stats(grpc::ServerContext* ctx, const exo::StatsRequest* req,
                     exo::StatsReply* rep) override;
  // The REPORT the reporter would send now: same load, keys and rates, and the sequence number
  // the next REPORT will carry. Nothing is sent and nothing advances.
  grpc::Status HotKeys(grpc::ServerContext* ctx, const exo::StatsRequest* req,
                       exo::ReportRequest* rep) override;
  // Chain replication (control_chain.cc): a write passed by this node's predecessor
  // (FAILED_PRECONDITION when the caller is not it, nothing applied; UNAVAILABLE when it may be
  // applied but the rest of the chain did not acknowledge), and the per-slot digests.
  grpc::Status Replicate(grpc::ServerContext* ctx, const exo::ReplicateRequest* req,
                         exo::ReplicateReply* rep) override;
  grpc::Status ReplicateBatch(grpc::ServerContext* ctx, const exo::ReplicateBatchRequest* req,
                              exo::ReplicateBatchReply* rep) override;
  grpc::Status SlotDigest(grpc::ServerContext* ctx, const exo::SlotDigestRequest* req,
                          exo::SlotDigestReply* rep) override;
  // The controller's table push and heartbeat, and a learner's copy of a slot (control_chain.cc).
  grpc::Status SetChains(grpc::ServerContext* ctx, const exo::SetChainsRequest* req,
                         exo::SetChainsReply* rep) override;
  grpc::Status ChainStatus(grpc::ServerContext* ctx, const exo::StatsRequest* req,
                           exo::ChainStatusReply* rep) override;
  grpc::Status CopySlot(grpc::ServerContext* ctx, const exo::CopySlotRequest* req,
                        grpc::ServerWriter<exo::CopySlotChunk>* writer) override;
  // The node's chain runtime; set before the server starts. Without one, Replicate fails
  // FAILED_PRECONDITION (the wimpy emulator's nodes do not replicate).
  void set_chain(ChainRuntime* chain) { chain_ = chain; }

  // The node's own counters and gauges now, in counter-list order: Stats replies them (then the
  // extra ones below); exo-db-node's /metrics page shows them. Safe from any thread.
  std::vector<std::pair<std::string, uint64_t>> counters() const;

  // Extra (name, value) pairs Stats appends after the node's own counters, e.g. the wimpy
  // emulator's process-wide counters. Set before the server starts; the function must be
  // thread-safe (Stats runs on gRPC threads).
  using ExtraStats = std::function<std::vector<std::pair<std::string, uint64_t>>()>;
  void set_extra_stats(ExtraStats fn) { extra_stats_ = std::move(fn); }

 private:
  const Cluster& cluster_;
  std::string node_name_;
  KvStore& store_;
  CachedKeys& cached_;
  Resolver& resolver_;
  const CounterSet& all_;
  Counters& c_;
  ChainRuntime* chain_ = nullptr;
  // OK when `cache_node` is the caller (Fetch/Evict), else the refusal, counted.
  grpc::Status check_cache_node(const grpc::ServerContext* ctx,
                                const google::protobuf::MethodDescriptor* method,
                                const std::string& cache_node) const;
  // Replicate's and ReplicateBatch's caller: a db node of this cluster (its index in *from;
  // nullopt with checks off). False: refused, *status says why.
  bool replicate_caller(grpc::ServerContext* ctx, const google::protobuf::MethodDescriptor* method,
                        std::optional<uint32_t>* from, grpc::Status* status);

  Reporter* reporter_;
  ExtraStats extra_stats_;
  // Counts refusals in c_.rpc_refused, the process's refused TLS handshakes in
  // c_.tls_handshake_refused.
  Authorizer authz_;
};

// Starts a gRPC server for `service` on `address` ("unix:/path", "unix:///path" or
// "host:port") with `security`'s server credentials (mutual TLS unless insecure_dev_mode). A
// stale unix socket file from a previous run is removed first. Returns nullptr and sets *error
// when it cannot listen.
std::unique_ptr<grpc::Server> start_control_server(const std::string& address, ControlService& service,
                                                   const GrpcSecurity& security, std::string* error);

}  // namespace exo::db
