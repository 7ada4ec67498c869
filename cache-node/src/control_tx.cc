// Two-phase write propagation (thesis 3.4.2): the gRPC side. The owning db node is the
// coordinator; what Prepare/Commit/Abort do to a key (held or being fetched) is the key table's
// (key_table/key_tx.cc). Here: lock, ask the table, count, copy its answer into the reply.
#include <grpcpp/grpcpp.h>

#include "control_service.h"

#ifdef EXO_FAULTS  // ---- mutant test build only (common/cpp/fault_switch.h) ----
#include "fault_switch.h"
#endif

namespace exo::cache {
namespace {

void set(TxReply* r, const TxAnswer& a) {
  r->set_ok(a.ok);
  r->set_cached(a.cached);
  if (!a.error.empty()) r->set_error(a.error);
}

}  // namespace

grpc::Status ControlService::Prepare(grpc::ServerContext*, const PrepareRequest* req, TxReply* reply) {
  TxAnswer a;
  {
    std::lock_guard lock(state_.mu);
    a = state_.keys.prepare(req->key(), req->txid(), req->is_delete(), req->value());
  }
  if (a.applied) ++cp_.prepares;
  set(reply, a);
  return grpc::Status::OK;
}

grpc::Status ControlService::Commit(grpc::ServerContext*, const TxRequest* req, TxReply* reply) {
#ifdef EXO_FAULTS
  // --fault serve-stale: drop the write as an Abort would, keep serving the old value, and
  // still answer the db node that it committed.
  if (exo::fault::active(exo::fault::kServeStale)) return finish_tx(*req, reply, /*commit=*/false);
#endif
  return finish_tx(*req, reply, /*commit=*/true);
}

grpc::Status ControlService::Abort(grpc::ServerContext*, const TxRequest* req, TxReply* reply) {
  return finish_tx(*req, reply, /*commit=*/false);
}

grpc::Status ControlService::finish_tx(const TxRequest& req, TxReply* reply, bool commit) {
  TxAnswer a;
  {
    std::lock_guard lock(state_.mu);
    // A committed DELETE retires the key's rule when the filler runs (it removes it and EVICTs
    // the key like any victim's); without the filler the rule stays until an Evict.
    a = commit ? state_.keys.commit(req.key(), req.txid(), cluster_.cache_fill.enabled)
               : state_.keys.abort(req.key(), req.txid());
  }
  if (a.applied) ++(commit ? cp_.commits : cp_.aborts);
  set(reply, a);
  return grpc::Status::OK;
}

}  // namespace exo::cache
