// An uncached write at the head of a replicated slot (docs/design/replication.md, 3.1): applied
// here in one batch with its outcome record, passed down the chain, answered only once the
// acknowledgement is back. So OK means every member of the chain has the write in its WAL, and
// the tail, which serves the slot's GETs, has it before the client hears OK.
//
// A burst's chained writes travel together: write_chained() applies each and adds it to the
// burst's batch; flush_chained() (after the burst's writes, or before a second write of a key
// in the same burst) passes the batch down in one ReplicateBatch per next node and answers the
// writes the chain acknowledged. A loaded head thus pays one round trip per burst, not per
// write (docs/replication.md, "Cost, measured").
//
// When the rest of the chain does not acknowledge (a deadline, a member down), the write stays
// applied here and is left to the chain runtime's resolver; the client gets no reply and
// resends under the same request id, and a resend is answered only once the write is through
// (the dedup claim is kept until then). Never BUSY or ERROR for it: some member may have it.
#include "log.h"
#include "request_handler.h"

namespace exo::db {

size_t RequestHandler::write_chained(const wire::FrameView& req, uint64_t hash,
                                     const ChainTable& table, const DedupRecord& rec,
                                     bool apply_data, DedupClaim& claim, std::span<uint8_t> out) {
  const bool is_delete = req.op() == wire::kDelete;
  const RequestId id{req.client_id, req.seq};
  const std::string dedup_key = request_key(id), dedup_value = encode_dedup(rec);
  StoreOp ops[2];
  size_t n = 0;
  if (apply_data)
    ops[n++] = is_delete ? StoreOp::del(Cf::kData, req.key) : StoreOp::put(Cf::kData, req.key, req.value);
  ops[n++] = StoreOp::put(Cf::kRequests, bytes_of(dedup_key), bytes_of(dedup_value));
  if (const StoreResult r = ctx_.store.write(std::span<const StoreOp>(ops, n)); !r.ok()) {
    // Nothing was forwarded yet: definitely not applied anywhere.
    LOG_WARN("%s failed: %s", is_delete ? "DELETE" : "PUT", r.error.c_str());
    return refuse(req, rec, wire::kError, out);
  }

  ChainRuntime& chain = *ctx_.chain;
  UncommittedWrite w;
  w.hash = hash;
  w.id = id;
  w.record = rec;
  w.req = chain.make_request(table, table.slot_of(hash), id, apply_data, is_delete, req.key,
                             req.value, rec);
  const auto answer = [&] {  // the ack-at-head mutant's immediate answer
    if (rec.status == wire::kNotFound) bump(c_.not_found);
    return reply(req, out, rec.status);
  };

  if (ChainRuntime::acks_before_forwarding()) {  // the ack-at-head mutant only
    ctx_.dedup.insert(id, rec);
    chain.defer(std::move(w));
    return answer();
  }
  // Into the burst's batch (flush_chained). Uncommitted from now on, so the key's next write,
  // here or on another packet thread, waits for this one (design 3.8); the claim stays until
  // the chain's answer.
  claim.keep();
  chained_.push_back(PendingChained{burst_item_, req, hash, id, rec.status, w.req});
  chain.defer_batched(std::move(w));
  return 0;
}

void RequestHandler::flush_chained() {
  if (chained_.empty()) return;
  ChainRuntime& chain = *ctx_.chain;
  std::vector<const exo::ReplicateRequest*> reqs;
  reqs.reserve(chained_.size());
  for (const PendingChained& p : chained_) reqs.push_back(&p.fwd);
  const std::vector<bool> acked = chain.forward_batch(reqs);
  for (size_t i = 0; i < chained_.size(); ++i) {
    PendingChained& p = chained_[i];
    const std::string_view key = as_sv(p.req.key);
    CachedKeys::Guard guard = ctx_.cached.lock(p.hash);
    if (!acked[i]) {
      LOG_DEBUG("write of slot %u seq %llu not acknowledged by the chain: no reply yet",
                p.fwd.slot(), static_cast<unsigned long long>(p.fwd.seq()));
      chain.unbatch(key, p.id);
      continue;
    }
    // Still ours unless another thread settled it meanwhile (then a resend is answered from
    // the dedup table) or this node left the slot.
    std::optional<UncommittedWrite> w = chain.take(key, p.id);
    if (!w) continue;
    chain.complete(*w);
    if (p.status == wire::kNotFound) bump(c_.not_found);
    if (p.item) p.item->len = reply(p.req, p.item->out.first(std::min(p.item->out.size(), max_frame_)), p.status);
  }
  chained_.clear();
}

}  // namespace exo::db
