// The CacheNode gRPC service (proto/exoproto/control.proto): FETCH/EVICT on request, REPORTs
// into the hot list, two-phase write propagation from db nodes, test hooks and stats. Runs on
// gRPC's own threads, never on an lcore; outgoing RPCs go through Peers (deadlines, errors as
// strings). Every handler first runs the caller checks of control.proto (grpc_security.h):
// the caller's role, and for Prepare/Commit/Abort/Report that a db node acts only for itself.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cache_state.h"
#include "cluster.h"
#include "counters.h"
#include "exoproto/control.grpc.pb.h"
#include "grpc_security.h"
#include "ms_clock.h"
#include "fill/hot_list.h"
#include "heads.h"
#include "peers.h"

namespace exo::cache {

class ControlService final : public exo::CacheNode::Service {
 public:
  using DpSum = std::function<DpCounters()>;
  // `heads`: the slots' heads that SetHeads replaces and check_owner reads (the same object the
  // node's GrpcPeers routes Fetch/Evict by).
  ControlService(const Cluster& cluster, std::string self_name, CacheState& state, CpCounters& cp,
                 Peers& peers, Heads& heads, HotList& hot, DpSum sum_dp, Clock clock = steady_ms);

  grpc::Status Cache(grpc::ServerContext*, const KeysRequest*, KeysReply*) override;
  grpc::Status Evict(grpc::ServerContext*, const KeysRequest*, KeysReply*) override;
  grpc::Status Prepare(grpc::ServerContext*, const PrepareRequest*, TxReply*) override;
  grpc::Status Commit(grpc::ServerContext*, const TxRequest*, TxReply*) override;
  grpc::Status Abort(grpc::ServerContext*, const TxRequest*, TxReply*) override;
  grpc::Status DropEntries(grpc::ServerContext*, const KeysRequest*, KeysReply*) override;
  grpc::Status ListKeys(grpc::ServerContext*, const StatsRequest*, CachedKeysReply*) override;
  grpc::Status Stats(grpc::ServerContext*, const StatsRequest*, StatsReply*) override;
  grpc::Status Report(grpc::ServerContext*, const ReportRequest*, ReportReply*) override;
  grpc::Status Reset(grpc::ServerContext*, const StatsRequest*, KeysReply*) override;
  grpc::Status SetHeads(grpc::ServerContext*, const SetHeadsRequest*, SetHeadsReply*) override;  // control_heads.cc

  // What Stats replies: every counter and gauge now, in counter-list order. Also the /metrics
  // page's source (main.cc); safe from any thread.
  std::vector<std::pair<std::string, uint64_t>> counters() const;

 private:
  grpc::Status finish_tx(const TxRequest& req, TxReply* reply, bool commit);
  // OK when the caller speaks for the head of `key`'s slot (heads_: the config's owner until the
  // controller's first SetHeads) for Prepare/Commit/Abort, else the refusal, counted.
  grpc::Status check_owner(const grpc::ServerContext* ctx,
                           const google::protobuf::MethodDescriptor* method, const std::string& key) const;
  // "" if the REPORT may enter the hot list, else why not.
  std::string check_report(const ReportRequest& req) const;

  const Cluster& cluster_;
  const std::string name_;
  CacheState& state_;
  CpCounters& cp_;
  Peers& peers_;
  Heads& heads_;
  HotList& hot_;
  DpSum sum_dp_;
  Clock clock_;
  // Counts refusals in cp_.rpc_refused, the process's refused TLS handshakes in
  // cp_.tls_handshake_refused.
  Authorizer authz_;
};

}  // namespace exo::cache
