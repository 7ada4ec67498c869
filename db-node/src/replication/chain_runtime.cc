#include "replication/chain_runtime.h"

#include <cstdlib>

#include "keyhash.h"
#include "log.h"
#include "wire.h"

#ifdef EXO_FAULTS  // ---- mutant test build only (common/cpp/fault_switch.h) ----
#include <mutex>

#include "fault_switch.h"
#endif  // ---- EXO_FAULTS ----

namespace exo::db {

bool ChainRuntime::acks_before_forwarding() {
#ifdef EXO_FAULTS
  // --fault ack-at-head: the head answers OK as soon as it applied the write itself and leaves
  // the forward to the resolver's next round, so the tail, which serves GETs, may not have an
  // acknowledged write yet: stale reads the chaos campaign's checker must catch.
  if (!fault::active(fault::kAckAtHead)) return false;
  static std::once_flag once;
  std::call_once(once, [] { LOG_WARN("FAULT ack-at-head: writes are acknowledged before the chain has them"); });
  return true;
#else
  return false;
#endif
}

ChainRuntime::ChainRuntime(const Cluster& cluster, uint32_t self, KvStore& store,
                           CachedKeys& cached, DedupTable& dedup, Resolver& resolver,
                           ChainForwarder& forwarder, Counters& counters, Clock wall_ms)
    : cluster_(cluster), self_(self), store_(store), cached_(cached), dedup_(dedup),
      resolver_(resolver), forwarder_(forwarder), c_(counters), wall_ms_(std::move(wall_ms)),
      view_(ChainTable::from_cluster(cluster)),
      replicates_(view_.get()->replicated()),
      slot_seq_(new std::atomic<uint64_t>[size_t{1} << cluster.partition_bits]()) {}

exo::ReplicateRequest ChainRuntime::make_request(const ChainTable& t, uint32_t slot, RequestId id,
                                                 bool apply_data, bool is_delete, Bytes key,
                                                 Bytes value, const DedupRecord& record) {
  exo::ReplicateRequest r;
  r.set_version(t.version);
  r.set_slot(slot);
  r.set_seq(slot_seq_[slot].fetch_add(1, std::memory_order_relaxed) + 1);
  r.set_client_id(id.client_id);
  r.set_request_seq(id.seq);
  r.set_apply_data(apply_data);
  r.set_is_delete(is_delete);
  r.set_key(key.data(), key.size());
  if (apply_data && !is_delete) r.set_value(value.data(), value.size());
  r.set_dedup_record(encode_dedup(record));
  return r;
}

ForwardOutcome ChainRuntime::forward(const exo::ReplicateRequest& req) {
  return forward_by(req, std::chrono::system_clock::now() + kForwardDeadline);
}

ForwardOutcome ChainRuntime::forward_by(const exo::ReplicateRequest& req,
                                        std::chrono::system_clock::time_point deadline) {
  const std::shared_ptr<const ChainTable> t = view_.get();
  const std::optional<uint32_t> next = t->successor(req.slot(), self_);
  if (!next) return ForwardOutcome{ForwardOutcome::kAcked, {}};  // the last member
  ForwardOutcome f = forwarder_.replicate(*next, req, deadline);
  if (f.code != ForwardOutcome::kAcked) add_shared(c_.chain_forward_failed);
  return f;
}

void ChainRuntime::complete(UncommittedWrite& w) {
  if (w.txn) {
    // The write is at the read server already: failing to commit it here cannot be answered
    // with ERROR or undone with an Abort (the cache node would serve the old value while the
    // tail serves the new one). The node stops; its chains go on without it (design 3.4).
    if (const StoreResult s = w.txn->commit(); !s.ok()) {
      LOG_ERROR("commit of txid %llu after the chain acknowledged it failed: %s; stopping",
                static_cast<unsigned long long>(w.txid), s.error.c_str());
      std::_Exit(1);
    }
    w.txn.reset();
    resolver_.add(PendingDecision{w.txid, Decision::kCommit, w.cache_node, w.req.key()});
  }
  dedup_.insert(w.id, w.record);
  add_shared(c_.chain_writes);
}

void ChainRuntime::defer(UncommittedWrite w) {
  uncommitted_.put(std::move(w));
  set_gauge(c_.replication_pending, uncommitted_.size());
}

bool ChainRuntime::settle(CachedKeys::Guard&, std::string_view key) {
  std::optional<UncommittedWrite> w = uncommitted_.take(key);
  if (!w) return true;
  const ForwardOutcome f = forward(w->req);
  const bool done = f.code == ForwardOutcome::kAcked;
  if (done) {
    complete(*w);
  } else {
    LOG_DEBUG("write of slot %u seq %llu still uncommitted: %s", w->req.slot(),
              static_cast<unsigned long long>(w->req.seq()), f.error.c_str());
    uncommitted_.put(std::move(*w));
  }
  set_gauge(c_.replication_pending, uncommitted_.size());
  return done;
}

size_t ChainRuntime::resolve_once() {
  size_t done = 0;
  for (const auto& [key, hash] : uncommitted_.keys()) {
    CachedKeys::Guard guard = cached_.lock(hash);
    if (settle(guard, key)) ++done;
  }
  return done;
}

ReplicaOutcome ChainRuntime::apply_from_predecessor(const exo::ReplicateRequest& req,
                                                    std::optional<uint32_t> caller,
                                                    std::chrono::system_clock::time_point deadline) {
  ReplicaOutcome out;
  const std::shared_ptr<const ChainTable> t = view_.get();
  DedupRecord record;
  if (req.slot() >= t->chains.size() || req.key().empty() || req.key().size() > wire::kMaxKeyLen ||
      t->slot_of(key_hash(bytes_of(req.key()))) != req.slot() ||
      !decode_dedup(req.dedup_record(), &record)) {
    out.code = ReplicaOutcome::kBadRequest;
    out.error = "malformed Replicate (slot " + std::to_string(req.slot()) + ")";
    return out;
  }
  // Only the node before this one may pass it writes: a stale or forged forward could
  // otherwise put a value here that the head never ordered (design 3.1, "Transport").
  const std::optional<uint32_t> pred = t->predecessor(req.slot(), self_);
  if (!pred || (caller && *caller != *pred)) {
    add_shared(c_.replicate_refused);
    out.code = ReplicaOutcome::kNotPredecessor;
    out.error = "not this node's predecessor for slot " + std::to_string(req.slot()) +
                " (table version " + std::to_string(t->version) + ")";
    return out;
  }
  // At most one write of a key is in the chain at a time (the head holds the key's stripe lock
  // and refuses the next write while one is uncommitted), so no lock is taken here; two copies
  // of one forward (a resend that crossed a slow first try) are told apart by the claim.
  const RequestId id{req.client_id(), req.request_seq()};
  const DedupTable::Lookup seen = dedup_.claim(id, wall_ms_());
  if (seen.kind == DedupTable::Lookup::kInFlight) {
    out.error = "another copy of this write is being applied";
    return out;
  }
  if (seen.kind == DedupTable::Lookup::kAnswered) {
    out.duplicate = true;
    add_shared(c_.replicated_duplicates);
  } else {
    const DedupClaim claim(dedup_, id);
    const std::string dedup_key = request_key(id);
    StoreOp ops[2];
    size_t n = 0;
    if (req.apply_data())
      ops[n++] = req.is_delete() ? StoreOp::del(Cf::kData, bytes_of(req.key()))
                                 : StoreOp::put(Cf::kData, bytes_of(req.key()), bytes_of(req.value()));
    ops[n++] = StoreOp::put(Cf::kRequests, bytes_of(dedup_key), bytes_of(req.dedup_record()));
    if (const StoreResult s = store_.write(std::span<const StoreOp>(ops, n)); !s.ok()) {
      add_shared(c_.errors);
      out.error = "store: " + s.error;
      return out;
    }
    dedup_.insert(id, record);
    add_shared(c_.replicated_applied);
  }
  // Passed on even when it is a resend: the successor may not have it yet.
  const ForwardOutcome f = forward_by(req, deadline - std::chrono::milliseconds(20));
  if (f.code != ForwardOutcome::kAcked) {
    out.code = ReplicaOutcome::kUncertain;  // applied here; the head resends
    out.error = f.error;
    return out;
  }
  out.code = ReplicaOutcome::kApplied;
  return out;
}

}  // namespace exo::db
