#include "replication/forwarder.h"

#include <grpcpp/grpcpp.h>

#include "exoproto/control.grpc.pb.h"

namespace exo::db {

struct GrpcChainForwarder::Peer {
  std::once_flag once;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<exo::DbNode::Stub> stub;  // read-only once `once` ran
};

GrpcChainForwarder::GrpcChainForwarder(const Cluster& cluster,
                                       std::shared_ptr<const GrpcSecurity> security)
    : cluster_(cluster), security_(std::move(security)) {
  for (size_t i = 0; i < cluster.db_nodes.size(); ++i) peers_.push_back(std::make_unique<Peer>());
}

GrpcChainForwarder::~GrpcChainForwarder() = default;

ForwardOutcome GrpcChainForwarder::replicate(uint32_t to, const exo::ReplicateRequest& req,
                                             std::chrono::system_clock::time_point deadline) {
  ForwardOutcome out;
  if (to >= peers_.size()) {
    out.error = "no db node with index " + std::to_string(to);
    return out;
  }
  const DbNodeInfo& node = cluster_.db_nodes[to];
  Peer& p = *peers_[to];
  std::call_once(p.once, [&] {
    p.channel = security_->channel(node.grpc, node.name);
    p.stub = exo::DbNode::NewStub(p.channel);
  });
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  exo::ReplicateReply rep;
  const grpc::Status s = p.stub->Replicate(&ctx, req, &rep);
  if (s.ok()) {
    out.code = ForwardOutcome::kAcked;
    return out;
  }
  out.code = s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ? ForwardOutcome::kRefused
                                                                      : ForwardOutcome::kUncertain;
  out.error = "Replicate to " + node.name + ": " + std::to_string(s.error_code()) + " " +
              s.error_message();
  return out;
}

}  // namespace exo::db
