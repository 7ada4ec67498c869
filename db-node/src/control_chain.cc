// The DbNode RPCs of chain replication (docs/design/replication.md, 3.1 and 4): Replicate, a
// write passed by this node's predecessor; SetChains and ChainStatus, the controller's table
// push and heartbeat; CopySlot, a slot streamed to a learner; and SlotDigest, what this node
// holds of each slot (the tests' and chaos campaign's check that a chain's members agree).
#include <xxhash.h>

#include <chrono>
#include <map>
#include <thread>

#include "control_service.h"
#include "keyhash.h"
#include "log.h"

namespace exo::db {

namespace {

// What a Replicate or ReplicateBatch outcome is on the wire.
grpc::Status status_of(const ReplicaOutcome& o, const char* method) {
  switch (o.code) {
    case ReplicaOutcome::kApplied:
      return grpc::Status::OK;
    case ReplicaOutcome::kNotPredecessor:
      LOG_WARN("%s refused: %s", method, o.error.c_str());
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, o.error);
    case ReplicaOutcome::kBadRequest:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, o.error);
    case ReplicaOutcome::kUncertain:
      break;
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, o.error);
}

}  // namespace

// Who passes writes: a db node's certificate (allowed_roles = db). With checks off
// (security.insecure_dev_mode) nobody is authenticated and any caller is taken as the
// predecessor (*from stays nullopt). False: refused, with *status set.
bool ControlService::replicate_caller(grpc::ServerContext* ctx,
                                      const google::protobuf::MethodDescriptor* method,
                                      std::optional<uint32_t>* from, grpc::Status* status) {
  if (!chain_) {
    *status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this node does not replicate");
    return false;
  }
  if (!authz_.checks_on()) return true;
  const std::string name = caller(ctx);
  *from = db_index(cluster_, name);
  if (*from) return true;
  *status = authz_.refuse(ctx, method, "'" + name + "' is not a db node of this cluster");
  return false;
}

grpc::Status ControlService::Replicate(grpc::ServerContext* ctx, const exo::ReplicateRequest* req,
                                       exo::ReplicateReply* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.Replicate");
  std::optional<uint32_t> from;
  grpc::Status refused;
  if (!replicate_caller(ctx, kMethod, &from, &refused)) return refused;
  const ReplicaOutcome o = chain_->apply_from_predecessor(*req, from, ctx->deadline());
  rep->set_duplicate(o.duplicate);
  return status_of(o, "Replicate");
}

grpc::Status ControlService::ReplicateBatch(grpc::ServerContext* ctx,
                                            const exo::ReplicateBatchRequest* req,
                                            exo::ReplicateBatchReply* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.ReplicateBatch");
  std::optional<uint32_t> from;
  grpc::Status refused;
  if (!replicate_caller(ctx, kMethod, &from, &refused)) return refused;
  std::vector<const exo::ReplicateRequest*> writes;
  writes.reserve(req->writes_size());
  for (const exo::ReplicateRequest& w : req->writes()) writes.push_back(&w);
  const ReplicaOutcome o = chain_->apply_batch_from_predecessor(writes, from, ctx->deadline());
  rep->set_duplicates(o.duplicates);
  return status_of(o, "ReplicateBatch");
}

grpc::Status ControlService::SetChains(grpc::ServerContext* ctx, const exo::SetChainsRequest* req,
                                       exo::SetChainsReply* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.SetChains");
  if (!chain_ || !chain_->replicates())
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this node does not replicate (replication.factor 1)");
  const ChainRuntime::PushOutcome o = chain_->set_table(*req);
  switch (o.code) {
    case ChainRuntime::PushOutcome::kOk:
      rep->set_version(chain_->table()->version);
      return grpc::Status::OK;
    case ChainRuntime::PushOutcome::kStale:
    case ChainRuntime::PushOutcome::kWrongIncarnation:
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, o.error);
    case ChainRuntime::PushOutcome::kBadTable:
      break;
  }
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, o.error);
}

grpc::Status ControlService::ChainStatus(grpc::ServerContext* ctx, const exo::StatsRequest*,
                                         exo::ChainStatusReply* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.ChainStatus");
  if (!chain_) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this node does not replicate");
  chain_->status(rep);
  return grpc::Status::OK;
}

grpc::Status ControlService::CopySlot(grpc::ServerContext* ctx, const exo::CopySlotRequest* req,
                                      grpc::ServerWriter<exo::CopySlotChunk>* writer) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.CopySlot");
  if (!chain_) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this node does not replicate");
  const std::string name = caller(ctx);
  const std::optional<uint32_t> from = db_index(cluster_, name);
  if (!from) return authz_.refuse(ctx, kMethod, "'" + name + "' is not a db node of this cluster");
  std::string why;
  if (!chain_->may_copy_to(req->slot(), *from, req->version(), &why))
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, why);
  // The outcome records of recent requests (all slots) first, then the slot's keys, in chunks
  // of at most ~256 KiB, paced to ChainRuntime::kCopyBytesPerSecond. The order matters: the
  // learner drops a live write whose request id it already holds a record for (a resend), so
  // every record it is sent must belong to a write whose data it is also sent. A write's data
  // and record are one batch, and each scan is its own RocksDB snapshot: a record in the first
  // scan means the write's data (or a newer value of the key) is in the second. Data first
  // would let a write land between the scans and reach the learner as a record only: the
  // learner then answers its live forward "duplicate" without the value, and an acknowledged
  // write is missing on the node that becomes tail (ChainTest's CopyRecordsBeforeData).
  const uint32_t bits = cluster_.partition_bits;
  constexpr size_t kChunkBytes = 256 << 10;
  exo::CopySlotChunk chunk;
  size_t chunk_bytes = 0;
  bool broken = false;
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t sent_bytes = 0;
  const auto flush = [&] {
    if (broken || (chunk.keys_size() == 0 && chunk.record_keys_size() == 0)) return;
    sent_bytes += chunk_bytes;
    const auto due = t0 + std::chrono::microseconds(sent_bytes * 1'000'000 / ChainRuntime::kCopyBytesPerSecond);
    std::this_thread::sleep_until(due);
    if (!writer->Write(chunk)) broken = true;
    chunk.Clear();
    chunk_bytes = 0;
  };
  StoreResult r = store_.scan(Cf::kRequests, [&](std::string_view k, std::string_view v) {
    if (broken) return;
    chunk.add_record_keys(std::string(k));
    chunk.add_record_values(std::string(v));
    chunk_bytes += k.size() + v.size();
    if (chunk_bytes >= kChunkBytes) flush();
  });
  if (r.ok())
    r = store_.scan(Cf::kData, [&](std::string_view k, std::string_view v) {
      if (broken) return;
      if (slot_of_hash(key_hash(bytes_of(k)), bits) != req->slot()) return;
      chunk.add_keys(std::string(k));
      chunk.add_values(std::string(v));
      chunk_bytes += k.size() + v.size();
      if (chunk_bytes >= kChunkBytes) flush();
    });
  flush();
  if (!r.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "store scan: " + r.error);
  if (broken) return grpc::Status(grpc::StatusCode::CANCELLED, "the learner went away");
  return grpc::Status::OK;
}

grpc::Status ControlService::SlotDigest(grpc::ServerContext* ctx, const exo::SlotDigestRequest* req,
                                        exo::SlotDigestReply* rep) {
  EXO_AUTHORIZE(authz_, ctx, "exo.DbNode.SlotDigest");
  const uint32_t bits = cluster_.partition_bits;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> by_slot;  // slot -> (keys, digest)
  for (uint32_t s : req->slots()) by_slot[s];
  const bool all = req->slots_size() == 0;
  std::string kv;
  // A full scan: an operator's and a test's tool, not a hot path.
  const StoreResult r = store_.scan(Cf::kData, [&](std::string_view k, std::string_view v) {
    const uint32_t slot = slot_of_hash(key_hash(bytes_of(k)), bits);
    auto it = by_slot.find(slot);
    if (it == by_slot.end()) {
      if (!all) return;
      it = by_slot.emplace(slot, std::make_pair(0, 0)).first;
    }
    kv.assign(k);
    kv.push_back('\0');
    kv.append(v);
    it->second.first += 1;
    it->second.second ^= XXH64(kv.data(), kv.size(), 0);
  });
  if (!r.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "store scan: " + r.error);
  rep->set_node(node_name_);
  for (const auto& [slot, kd] : by_slot) {
    exo::SlotDigestEntry* e = rep->add_slots();
    e->set_slot(slot);
    e->set_keys(kd.first);
    e->set_digest(kd.second);
  }
  return grpc::Status::OK;
}

}  // namespace exo::db
