// The CacheNode gRPC service (proto/exoproto/control.proto): FETCH/EVICT driven by the controller,
// two-phase write propagation from db nodes, test hooks and stats. Runs on gRPC's own threads,
// never on an lcore; every outgoing RPC has a deadline and failures become `error` strings.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache_state.h"
#include "cluster.h"
#include "counters.h"
#include "exoproto/control.grpc.pb.h"

namespace exo::cache {

class ControlService final : public exo::CacheNode::Service {
 public:
  using DpSum = std::function<DpCounters()>;
  ControlService(const Cluster& cluster, std::string self_name, CacheState& state, CpCounters& cp,
                 DpSum sum_dp);

  grpc::Status Cache(grpc::ServerContext*, const KeysRequest*, KeysReply*) override;
  grpc::Status Evict(grpc::ServerContext*, const KeysRequest*, KeysReply*) override;
  grpc::Status Prepare(grpc::ServerContext*, const PrepareRequest*, TxReply*) override;
  grpc::Status Commit(grpc::ServerContext*, const TxRequest*, TxReply*) override;
  grpc::Status Abort(grpc::ServerContext*, const TxRequest*, TxReply*) override;
  grpc::Status DropEntries(grpc::ServerContext*, const KeysRequest*, KeysReply*) override;
  grpc::Status ListKeys(grpc::ServerContext*, const StatsRequest*, CachedKeysReply*) override;
  grpc::Status Stats(grpc::ServerContext*, const StatsRequest*, StatsReply*) override;

 private:
  using Keys = std::vector<std::string>;
  exo::DbNode::Stub& db_stub(uint32_t index);
  exo::Controller::Stub& controller_stub();
  // Each returns "" on success, else a human-readable error.
  std::string change_rules(const Keys& keys, bool add);
  std::string db_evict(const Keys& keys);
  grpc::Status finish_tx(const TxRequest& req, TxReply* reply, bool commit);
  // Splits keys into one request per owning db node (index into cluster_.db_nodes).
  template <typename Request>
  std::map<uint32_t, Request> by_owner(const Keys& keys) const;
  // Fetches keys from their owning db nodes; found -> values[key]; failed groups -> failed.
  std::string db_fetch(const Keys& keys, std::vector<std::pair<std::string, std::string>>& found,
                       Keys& failed);

  const Cluster& cluster_;
  const std::string name_;
  CacheState& state_;
  CpCounters& cp_;
  DpSum sum_dp_;

  std::mutex stubs_mu_;  // lazily created channels, one per db node
  std::vector<std::unique_ptr<exo::DbNode::Stub>> db_stubs_;
  std::unique_ptr<exo::Controller::Stub> controller_;
};

}  // namespace exo::cache
