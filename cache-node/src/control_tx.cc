// Two-phase write propagation (thesis 3.4.2): the owning db node is the coordinator.
//   Prepare: mark the key pending; GETs for it are forwarded to the db node until the outcome.
//   Commit:  apply the write (new value; delete erases the entry but keeps its switch rule, so
//            GETs miss here, are forwarded, and the db node answers NOT_FOUND).
//   Abort:   drop the prepared write, keep the old value.
// A key being fetched by Cache() records the prepared/committed write in its FetchState, so the
// insert that follows the Fetch uses the committed outcome instead of a stale fetched value.
#include <grpcpp/grpcpp.h>

#include "control_service.h"

namespace exo::cache {
namespace {

void set(TxReply* r, bool ok, bool cached, std::string error = "") {
  r->set_ok(ok);
  r->set_cached(cached);
  if (!error.empty()) r->set_error(std::move(error));
}

std::string txid_error(uint64_t want, uint64_t got) {
  return "txid mismatch: prepared " + std::to_string(want) + ", got " + std::to_string(got);
}

}  // namespace

grpc::Status ControlService::Prepare(grpc::ServerContext*, const PrepareRequest* req, TxReply* reply) {
  std::lock_guard lock(state_.mu);
  switch (state_.map.prepare(req->key(), req->txid(), req->is_delete(), req->value())) {
    case LruMap::TxResult::kOk:
      ++cp_.prepares;
      set(reply, true, true);
      return grpc::Status::OK;
    case LruMap::TxResult::kBusy:
      set(reply, false, true, "another write is prepared for this key");
      return grpc::Status::OK;
    default:
      break;  // not in the map: maybe being fetched
  }
  auto it = state_.fetching.find(req->key());
  if (it == state_.fetching.end()) {
    set(reply, true, false);
    return grpc::Status::OK;
  }
  FetchState& fs = it->second;
  if (fs.prepared && fs.txid > req->txid()) {  // newer supersedes older: see LruMap::prepare
    set(reply, false, true, "another write is prepared for this key");
    return grpc::Status::OK;
  }
  fs.prepared = true;
  fs.txid = req->txid();
  fs.prepared_delete = req->is_delete();
  fs.prepared_value = req->value();
  ++cp_.prepares;
  set(reply, true, true);
  return grpc::Status::OK;
}

grpc::Status ControlService::Commit(grpc::ServerContext*, const TxRequest* req, TxReply* reply) {
  return finish_tx(*req, reply, /*commit=*/true);
}

grpc::Status ControlService::Abort(grpc::ServerContext*, const TxRequest* req, TxReply* reply) {
  return finish_tx(*req, reply, /*commit=*/false);
}

// Commit and Abort differ only in what happens to the prepared write; the lookups (map entry,
// else a Fetch still in flight), the txid checks and the replies are the same.
grpc::Status ControlService::finish_tx(const TxRequest& req, TxReply* reply, bool commit) {
  std::lock_guard lock(state_.mu);
  auto& map = state_.map;
  std::atomic<uint64_t>& applied = commit ? cp_.commits : cp_.aborts;
  const LruMap::Entry* e = map.find(req.key());
  const uint64_t held_txid = e ? e->prepared.txid : 0;
  switch (commit ? map.commit(req.key(), req.txid()) : map.abort(req.key(), req.txid())) {
    case LruMap::TxResult::kErased:
      // A committed DELETE took the entry; its rule is still on the switch. The retire thread
      // removes it (and EVICTs the key) like any victim's.
      if (cluster_.cache_fill.enabled) state_.retiring.insert(req.key());
      [[fallthrough]];
    case LruMap::TxResult::kOk:
      ++applied;
      set(reply, true, true);
      return grpc::Status::OK;
    case LruMap::TxResult::kNoPending:
      set(reply, false, true, "no prepared write for this key");
      return grpc::Status::OK;
    case LruMap::TxResult::kTxidMismatch:
      set(reply, false, true, txid_error(held_txid, req.txid()));
      return grpc::Status::OK;
    default:
      break;
  }
  auto it = state_.fetching.find(req.key());
  if (it == state_.fetching.end()) {
    set(reply, true, false);  // evicted since Prepare: nothing to update
    return grpc::Status::OK;
  }
  FetchState& fs = it->second;
  if (!fs.prepared) {
    set(reply, false, true, "no prepared write for this key");
  } else if (fs.txid != req.txid()) {
    set(reply, false, true, txid_error(fs.txid, req.txid()));
  } else {
    if (commit) {  // the pending Fetch insert will use this outcome instead of its value
      fs.committed = true;
      fs.committed_delete = fs.prepared_delete;
      fs.committed_value = std::move(fs.prepared_value);
    }
    fs.prepared = false;
    fs.prepared_value.clear();
    ++applied;
    set(reply, true, true);
  }
  return grpc::Status::OK;
}

}  // namespace exo::cache
