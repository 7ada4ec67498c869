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

GrpcChainForwarder::Peer* GrpcChainForwarder::peer(uint32_t node) {
  if (node >= peers_.size()) return nullptr;
  Peer& p = *peers_[node];
  std::call_once(p.once, [&] {
    const DbNodeInfo& info = cluster_.db_nodes[node];
    p.channel = security_->channel(info.grpc, info.name);
    p.stub = exo::DbNode::NewStub(p.channel);
  });
  return &p;
}

namespace {

// What a Replicate or ReplicateBatch status means for the writes it carried.
ForwardOutcome outcome_of(const grpc::Status& s, const std::string& what) {
  ForwardOutcome out;
  if (s.ok()) {
    out.code = ForwardOutcome::kAcked;
    return out;
  }
  out.code = s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ? ForwardOutcome::kRefused
                                                                      : ForwardOutcome::kUncertain;
  out.error = what + ": " + std::to_string(s.error_code()) + " " + s.error_message();
  return out;
}

ForwardOutcome no_such_node(uint32_t to) {
  ForwardOutcome out;
  out.error = "no db node with index " + std::to_string(to);
  return out;
}

}  // namespace

ForwardOutcome GrpcChainForwarder::replicate(uint32_t to, const exo::ReplicateRequest& req,
                                             std::chrono::system_clock::time_point deadline) {
  Peer* p = peer(to);
  if (!p) return no_such_node(to);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  exo::ReplicateReply rep;
  return outcome_of(p->stub->Replicate(&ctx, req, &rep), "Replicate to " + cluster_.db_nodes[to].name);
}

ForwardOutcome GrpcChainForwarder::replicate_batch(uint32_t to, const exo::ReplicateBatchRequest& batch,
                                                   std::chrono::system_clock::time_point deadline) {
  Peer* p = peer(to);
  if (!p) return no_such_node(to);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  exo::ReplicateBatchReply rep;
  return outcome_of(p->stub->ReplicateBatch(&ctx, batch, &rep),
                    "ReplicateBatch to " + cluster_.db_nodes[to].name);
}

bool GrpcChainForwarder::copy_slot(uint32_t from, uint32_t slot, uint64_t version,
                                   const std::function<void(const exo::CopySlotChunk&)>& on_chunk,
                                   std::string* error) {
  Peer* p = peer(from);
  if (!p) {
    *error = "no db node with index " + std::to_string(from);
    return false;
  }
  grpc::ClientContext ctx;
  // A whole slot at the copy throttle: generous, but a dead source must not hang the copier.
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
  exo::CopySlotRequest req;
  req.set_slot(slot);
  req.set_version(version);
  std::unique_ptr<grpc::ClientReader<exo::CopySlotChunk>> reader = p->stub->CopySlot(&ctx, req);
  exo::CopySlotChunk chunk;
  while (reader->Read(&chunk)) on_chunk(chunk);
  const grpc::Status s = reader->Finish();
  if (s.ok()) return true;
  *error = "CopySlot from " + cluster_.db_nodes[from].name + ": " + std::to_string(s.error_code()) +
           " " + s.error_message();
  return false;
}

}  // namespace exo::db
