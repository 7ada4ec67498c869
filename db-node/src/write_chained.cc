// An uncached write at the head of a replicated slot (docs/design/replication.md, 3.1): applied
// here in one batch with its outcome record, passed down the chain (ChainRuntime::forward:
// every member applies it and passes it on, the tail acknowledges), answered only once the
// acknowledgement is back. So OK means every member of the chain has the write in its WAL, and
// the tail, which serves the slot's GETs, has it before the client hears OK.
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
  const auto answer = [&] {
    if (rec.status == wire::kNotFound) bump(c_.not_found);
    return reply(req, out, rec.status);
  };

  if (ChainRuntime::acks_before_forwarding()) {  // the ack-at-head mutant only
    ctx_.dedup.insert(id, rec);
    chain.defer(std::move(w));
    return answer();
  }
  const ForwardOutcome f = chain.forward(w.req);
  if (f.code == ForwardOutcome::kAcked) {
    chain.complete(w);
    return answer();
  }
  LOG_DEBUG("write of slot %u seq %llu not acknowledged by the chain (%s): no reply yet",
            w.req.slot(), static_cast<unsigned long long>(w.req.seq()), f.error.c_str());
  claim.keep();
  chain.defer(std::move(w));
  return 0;
}

}  // namespace exo::db
