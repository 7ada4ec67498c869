// Two-phase write propagation (thesis 3.4.2): the gRPC side. The head of the key's slot is the
// coordinator; what Prepare/Commit/Abort do to a key (held or being fetched) is the key table's
// (key_table/key_tx.cc). Here: check the caller, lock, ask the table, count, copy its answer
// into the reply. Only the db node heading a key's slot (heads.h: the config's owner until the
// controller pushes other heads) may Prepare, Commit or Abort a write of it: another db node
// (or any other certificate) could otherwise plant a value the cache serves, or leave the key
// pending forever.
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

grpc::Status ControlService::check_owner(const grpc::ServerContext* ctx,
                                         const google::protobuf::MethodDescriptor* method,
                                         const std::string& key) const {
  if (!authz_.checks_on()) return grpc::Status::OK;
  // The head as the controller last pushed it (SetHeads), not the config's owner: after a
  // failover the old owner is no longer the slot's coordinator.
  const DbNodeInfo& head = cluster_.db_nodes[heads_.get()->head_index(LruMap::hash_of(key))];
  if (speaks_for(caller(ctx), head)) return grpc::Status::OK;
  return authz_.refuse(ctx, method, "the key's partition is owned by '" + head.name + "' (its head)");
}

grpc::Status ControlService::Prepare(grpc::ServerContext* ctx, const PrepareRequest* req, TxReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.Prepare");
  if (grpc::Status s = check_owner(ctx, kMethod, req->key()); !s.ok()) return s;
  TxAnswer a;
  {
    std::lock_guard lock(state_.mu);
    a = state_.keys.prepare(req->key(), req->txid(), req->is_delete(), req->value());
  }
  if (a.applied) ++cp_.prepares;
  set(reply, a);
  return grpc::Status::OK;
}

grpc::Status ControlService::Commit(grpc::ServerContext* ctx, const TxRequest* req, TxReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.Commit");
  if (grpc::Status s = check_owner(ctx, kMethod, req->key()); !s.ok()) return s;
#ifdef EXO_FAULTS
  // --fault serve-stale: drop the write as an Abort would, keep serving the old value, and
  // still answer the db node that it committed.
  if (exo::fault::active(exo::fault::kServeStale)) return finish_tx(*req, reply, /*commit=*/false);
#endif
  return finish_tx(*req, reply, /*commit=*/true);
}

grpc::Status ControlService::Abort(grpc::ServerContext* ctx, const TxRequest* req, TxReply* reply) {
  EXO_AUTHORIZE(authz_, ctx, "exo.CacheNode.Abort");
  if (grpc::Status s = check_owner(ctx, kMethod, req->key()); !s.ok()) return s;
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
