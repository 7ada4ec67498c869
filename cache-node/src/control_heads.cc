// CacheNode.SetHeads (control.proto): the controller master's heads replace the table that
// Fetch/Evict routing (peers.cc) and the Prepare/Commit/Abort caller check (control_tx.cc) read.
// Checking the table is heads.cc's (pure); here: authorize, check, swap, answer, log.
#include <grpcpp/grpcpp.h>

#include <vector>

#include "control_service.h"
#include "log.h"

namespace exo::cache {

grpc::Status ControlService::SetHeads(grpc::ServerContext* ctx, const SetHeadsRequest* req, SetHeadsReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.SetHeads");
  HeadsTable t;
  const std::vector<std::string> names(req->heads().begin(), req->heads().end());
  if (std::string e = build_heads(cluster_, req->version(), names, &t); !e.empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e);
  const std::shared_ptr<const HeadsTable> before = heads_.get();
  uint64_t held = 0;
  if (std::string e = heads_.replace(t, &held); !e.empty()) {
    LOG_WARN("SetHeads refused: %s", e.c_str());
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, e);
  }
  size_t changed = 0;
  for (size_t s = 0; s < t.head.size() && s < before->head.size(); ++s) changed += before->head[s] != t.head[s];
  if (changed > 0 || before->version != t.version)
    LOG_INFO("heads v%llu (was v%llu): %zu slot(s) changed head", static_cast<unsigned long long>(t.version),
             static_cast<unsigned long long>(before->version), changed);
  reply->set_version(held);
  return grpc::Status::OK;
}

}  // namespace exo::cache
