// The CacheNode gRPC service (proto/exoproto/control.proto): FETCH/EVICT on request, REPORTs
// into the hot list, two-phase write propagation from db nodes, test hooks and stats. Runs on
// gRPC's own threads, never on an lcore; outgoing RPCs go through Peers (deadlines, errors as
// strings).
#pragma once

#include <functional>
#include <string>

#include "cache_state.h"
#include "cluster.h"
#include "counters.h"
#include "exoproto/control.grpc.pb.h"
#include "ms_clock.h"
#include "fill/hot_list.h"
#include "peers.h"

namespace exo::cache {

class ControlService final : public exo::CacheNode::Service {
 public:
  using DpSum = std::function<DpCounters()>;
  ControlService(const Cluster& cluster, std::string self_name, CacheState& state, CpCounters& cp,
                 Peers& peers, HotList& hot, DpSum sum_dp, Clock clock = steady_ms);

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

 private:
  grpc::Status finish_tx(const TxRequest& req, TxReply* reply, bool commit);
  // "" if the REPORT may enter the hot list, else why not.
  std::string check_report(const ReportRequest& req) const;

  const Cluster& cluster_;
  const std::string name_;
  CacheState& state_;
  CpCounters& cp_;
  Peers& peers_;
  HotList& hot_;
  DpSum sum_dp_;
  Clock clock_;
};

}  // namespace exo::cache
