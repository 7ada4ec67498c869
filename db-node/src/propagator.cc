#include "propagator.h"

#include <grpcpp/grpcpp.h>

#include "exoproto/control.grpc.pb.h"

#ifdef EXO_FAULTS  // ---- mutant test build only (common/cpp/fault_switch.h) ----
#include <mutex>

#include "fault_switch.h"
#include "log.h"

namespace {
// --fault skip-prepare: the write goes on as if the cache node had prepared (and later
// committed), but nothing is sent, so the cache node keeps serving the value it holds.
bool skip_prepare() {
  if (!exo::fault::active(exo::fault::kSkipPrepare)) return false;
  static std::once_flag once;
  std::call_once(once, [] { LOG_WARN("FAULT skip-prepare: a cached write skipped Prepare/Commit"); });
  return true;
}
}  // namespace
#endif  // ---- EXO_FAULTS ----

namespace exo::db {

uint64_t TxIdSource::from_clock() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

struct GrpcPropagator::Peer {
  std::string name;  // the cache node's, also its certificate's
  std::string address;
  std::once_flag once;
  // Stubs are thread-safe; after `once` ran, `stub` is read-only.
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<exo::CacheNode::Stub> stub;
};

GrpcPropagator::GrpcPropagator(const Cluster& cluster, std::shared_ptr<const GrpcSecurity> security,
                               std::chrono::milliseconds deadline)
    : security_(std::move(security)), deadline_(deadline) {
  for (const auto& c : cluster.cache_nodes) {
    auto p = std::make_unique<Peer>();
    p->name = c.name;
    p->address = c.grpc;
    peers_.emplace(c.name, std::move(p));
  }
}

GrpcPropagator::~GrpcPropagator() = default;

GrpcPropagator::Peer* GrpcPropagator::peer(const std::string& cache_node, std::string* error) {
  auto it = peers_.find(cache_node);
  if (it == peers_.end()) {
    *error = "no cache node named '" + cache_node + "' in the cluster";
    return nullptr;
  }
  Peer* p = it->second.get();
  std::call_once(p->once, [this, p] {
    // Fast reconnects (grpc_channel.h): pending writes of a restarted cache node's keys answer
    // BUSY until the resolver gets through.
    p->channel = security_->channel(p->address, p->name);
    p->stub = exo::CacheNode::NewStub(p->channel);
  });
  return p;
}

namespace {

std::string rpc_error(const char* what, const std::string& node, const grpc::Status& s) {
  return std::string(what) + " to " + node + ": " + std::to_string(s.error_code()) + " " +
         s.error_message();
}

}  // namespace

PrepareOutcome GrpcPropagator::prepare(const std::string& cache_node, std::span<const uint8_t> key,
                                       uint64_t txid, bool is_delete,
                                       std::span<const uint8_t> value) {
#ifdef EXO_FAULTS
  if (skip_prepare()) return PrepareOutcome{PrepareOutcome::kPrepared, {}};
#endif
  PrepareOutcome out;
  Peer* p = peer(cache_node, &out.error);
  if (!p) return out;
  exo::PrepareRequest req;
  req.set_key(key.data(), key.size());
  req.set_txid(txid);
  req.set_is_delete(is_delete);
  if (!is_delete) req.set_value(value.data(), value.size());
  exo::TxReply rep;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline_);
  const grpc::Status s = p->stub->Prepare(&ctx, req, &rep);
  if (!s.ok()) {
    out.error = rpc_error("Prepare", cache_node, s);
    return out;
  }
  if (!rep.ok()) {
    out.error = "Prepare refused by " + cache_node + ": " + rep.error();
    return out;
  }
  out.code = rep.cached() ? PrepareOutcome::kPrepared : PrepareOutcome::kNotCached;
  return out;
}

namespace {

template <typename Fn>
FinishOutcome finish(Fn&& call, const char* what, const std::string& node,
                     std::span<const uint8_t> key, uint64_t txid,
                     std::chrono::milliseconds deadline) {
  exo::TxRequest req;
  req.set_key(key.data(), key.size());
  req.set_txid(txid);
  exo::TxReply rep;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  FinishOutcome out;
  const grpc::Status s = call(&ctx, req, &rep);
  if (!s.ok()) {
    out.code = FinishOutcome::kUnreachable;
    out.error = rpc_error(what, node, s);
  } else if (!rep.ok()) {
    // The cache node only refuses a Commit/Abort when it has no prepared write of this txid
    // for the key (none at all, or another txid's): nothing of ours is pending there.
    out.code = FinishOutcome::kRefused;
    out.error = std::string(what) + " refused by " + node + ": " + rep.error();
  } else {
    out.code = rep.cached() ? FinishOutcome::kDone : FinishOutcome::kNotCached;
  }
  return out;
}

}  // namespace

FinishOutcome GrpcPropagator::commit(const std::string& cache_node, std::span<const uint8_t> key,
                                     uint64_t txid) {
#ifdef EXO_FAULTS
  if (skip_prepare()) return FinishOutcome{FinishOutcome::kDone, {}};  // nothing was prepared there
#endif
  FinishOutcome out;
  Peer* p = peer(cache_node, &out.error);
  if (!p) return out;  // kUnreachable: a name the config does not know is never reachable
  return finish([p](auto* c, const auto& r, auto* o) { return p->stub->Commit(c, r, o); }, "Commit",
                cache_node, key, txid, deadline_);
}

FinishOutcome GrpcPropagator::abort(const std::string& cache_node, std::span<const uint8_t> key,
                                    uint64_t txid) {
  FinishOutcome out;
  Peer* p = peer(cache_node, &out.error);
  if (!p) return out;
  return finish([p](auto* c, const auto& r, auto* o) { return p->stub->Abort(c, r, o); }, "Abort",
                cache_node, key, txid, deadline_);
}

}  // namespace exo::db
