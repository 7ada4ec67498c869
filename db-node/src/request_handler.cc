#include "request_handler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "log.h"

namespace exo::db {

// Each thread's sampler gets its own seed (the handler's address tells threads apart, the
// clock tells runs apart) so threads do not sample in lockstep.
RequestHandler::RequestHandler(const NodeContext& ctx, Counters& counters)
    : ctx_(ctx),
      c_(counters),
      max_frame_(wire::kEthLen + ctx.cluster.mtu),
      sampler_(ctx.hot_keys ? ctx.hot_keys->sample_rate() : 0.0,
               reinterpret_cast<uintptr_t>(this) ^
                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) {
  std::memcpy(self_mac_, ctx.self().mac.data(), 6);
  self_addr_ = wire::Addr{self_mac_, ctx.self().ip, ctx.cluster.udp_port};
  screen_policy_.udp_port = ctx.cluster.udp_port;
  screen_policy_.max_frame = max_frame_;
  screen_policy_.self_mac = self_mac_;
}

bool RequestHandler::accept(std::span<const uint8_t> frame, wire::FrameView* req, uint64_t* hash,
                            bool* owned) {
  bump(c_.rx_frames);
  // The nodes' one pre-filter (wire::screen): someone else's traffic is ignored; a frame of ours
  // that fails validation (checksums included), is longer than 14 + mtu (no client of this
  // cluster sends that: it refuses such values with ValueTooLarge) or is a reply (never
  // legitimate here: a reflected or looped frame must not start a reply storm) is malformed.
  wire::ParseError err = wire::ParseError::kNone;
  switch (wire::screen(frame, screen_policy_, *req, &err)) {
    case wire::Screen::kIgnore:
      bump(c_.ignored);
      return false;
    case wire::Screen::kMalformed:
      bump(c_.malformed_dropped);
      LOG_DEBUG("dropped malformed frame (%zu bytes): %s", frame.size(), wire::to_string(err));
      return false;
    case wire::Screen::kRequest:
      break;
  }
  // A request for another node's key: the switch routes by the hash in the dst MAC, so only a
  // frame whose MAC hash and key disagree (a forgery, or a config mismatch between switch and
  // node) gets here. GETs are served anyway; writes are refused (refusal()).
  *hash = key_hash(req->key);
  *owned = ctx_.cluster.owner_index(*hash) == ctx_.self_index;
  if (!*owned) bump(c_.misrouted);
  return true;
}

const char* RequestHandler::refusal(const wire::FrameView& req, bool owned) {
  if (req.op() == wire::kGet) {
    // A cache node forwards with prefix 0xAE; 0xBA is an older cache node's forward, still
    // served at rf 1 for one release (docs/design/replication.md, 2.3). Either one, or the
    // FORWARDED flag, claims the switch's mark.
    const uint8_t prefix = req.eth_dst[0];
    const bool dressed_as_forwarded =
        (req.flags & wire::kForwarded) || prefix == kPrefixForwarded || prefix == kPrefixOther;
    if (dressed_as_forwarded && wire::ip_dscp(req) != wire::kForwardedDscp) {
      bump(c_.forwarded_unmarked_dropped);
      return "a forwarded GET that did not come from a cache node's port";
    }
    return nullptr;
  }
  if (!owned) {
    bump(c_.wrong_owner_dropped);
    return "a write for a key this node does not own";
  }
  return nullptr;
}

size_t RequestHandler::handle(std::span<const uint8_t> frame, std::span<uint8_t> out) {
  BurstItem one{frame, out};
  handle_burst(std::span<BurstItem>(&one, 1));
  return one.len;
}

RequestHandler::Route RequestHandler::route(const ChainTable* table, const wire::FrameView& req,
                                            uint64_t hash, bool* owned) {
  if (!table) return Route::kServe;
  if (!ctx_.chain->active()) {
    // Started, and no table naming this process has been pushed yet (design 4.1).
    *owned = false;
    bump(c_.chain_inactive_dropped);
    return req.op() == wire::kGet ? Route::kBusy : Route::kDrop;
  }
  const uint32_t slot = table->slot_of(hash);
  const ChainRole role = table->role(slot, ctx_.self_index);
  if (req.op() == wire::kGet) {
    // Only the read server (the tail) has every acknowledged write of the slot; another member
    // may lag (a middle) or lead (the head: writes not yet acknowledged), so it answers BUSY and
    // the client retries (the switch's read rule sends GETs to the tail). Misrouted GETs here
    // come from a forwarded GET with the write prefix (an older cache node) or a rule in motion.
    *owned = table->is_read_server(slot, ctx_.self_index);
    if (*owned) return Route::kServe;
    bump(c_.not_reader_busy);
    return Route::kBusy;
  }
  // Writes: only the head orders a slot's writes. Anywhere else no reply, not BUSY or
  // BAD_REQUEST: either would end the client's resends of this request id, while a copy of it
  // may still reach the real head once the switch's write rule points there, and be applied
  // after the client was told it failed (design 3.7). The client's resend finds the head.
  *owned = table->is_head(slot, ctx_.self_index);
  if (*owned) return Route::kServe;
  bump(role == ChainRole::kNone ? c_.wrong_owner_dropped : c_.not_head_dropped);
  return Route::kDrop;
}

void RequestHandler::handle_burst(std::span<BurstItem> items) {
  gets_.clear();
  get_keys_.clear();
  // One table for the whole burst (a new one may be swapped in meanwhile; the next burst sees it).
  const std::shared_ptr<const ChainTable> chains =
      ctx_.chain && ctx_.chain->replicates() ? ctx_.chain->table() : nullptr;
  for (size_t i = 0; i < items.size(); ++i) {
    BurstItem& it = items[i];
    it.len = 0;
    wire::FrameView req;
    uint64_t hash = 0;
    bool owned = false;
    if (!accept(it.frame, &req, &hash, &owned)) continue;
    const Route where = route(chains.get(), req, hash, &owned);
    if (where == Route::kDrop) continue;
    if (const char* why = refusal(req, owned)) {
      // Answered BAD_REQUEST (never applied, no larger than the request: nothing to amplify),
      // so a sender that got here by a config mismatch learns it at once instead of retrying.
      LOG_DEBUG("refused %s", why);
      it.len = reply(req, it.out.first(std::min(it.out.size(), max_frame_)), wire::kBadRequest);
      continue;
    }
    if (where == Route::kBusy) {
      it.len = reply(req, it.out.first(std::min(it.out.size(), max_frame_)), wire::kBusy);
      continue;
    }
    switch (req.op()) {
      case wire::kGet:
        note_get(req, owned);
        gets_.push_back({i, req});
        get_keys_.push_back(req.key);
        continue;
      case wire::kPut:
      case wire::kDelete:
        // A second write of a key whose first is still in the burst's batch: the batch goes
        // first, so the key's writes reach the chain in order and the second need not wait.
        for (const PendingChained& p : chained_)
          if (p.hash == hash && p.req.key.size() == req.key.size() &&
              std::equal(p.req.key.begin(), p.req.key.end(), req.key.begin())) {
            flush_chained();
            break;
          }
        burst_item_ = &it;
        it.len = handle_write(req, hash, chains.get(),
                              it.out.first(std::min(it.out.size(), max_frame_)));
        burst_item_ = nullptr;
        continue;
    }
    bump(c_.malformed_dropped);  // unreachable: parse() rejects other opcodes
  }
  // The writes first: a GET this node serves of a key written in the same burst then sees
  // either value, both fine for requests outstanding together.
  flush_chained();
  if (gets_.empty()) return;
  // No stripe lock: a RocksDB read is atomic per key and sees either the old or the new value
  // of a concurrent write, both fine for a request concurrent with that write.
  ctx_.store.multi_get(get_keys_, &get_values_, &get_results_);
  for (size_t g = 0; g < gets_.size(); ++g) {
    BurstItem& it = items[gets_[g].item];
    it.len = answer_get(gets_[g].req, get_results_[g], get_values_[g],
                        it.out.first(std::min(it.out.size(), max_frame_)));
  }
}

void RequestHandler::note_get(const wire::FrameView& req, bool owned) {
  bump(c_.gets);
  if (req.flags & wire::kForwarded) bump(c_.forwarded_gets);
  // Forwarded GETs count too: they are reads of this node's keys that the cache did not serve.
  // Only GETs are sampled (caching helps reads only; see docs/cache-fill.md).
  if (ctx_.hot_keys && owned && sampler_.sample()) {
    bump(c_.hot_sampled);
    ctx_.hot_keys->observe(as_sv(req.key), steady_ms());
  }
}

size_t RequestHandler::answer_get(const wire::FrameView& req, const StoreResult& r,
                                  const std::string& value, std::span<uint8_t> out) {
  if (r.code == StoreResult::kNotFound) {
    bump(c_.not_found);
    return reply(req, out, wire::kNotFound);
  }
  if (!r.ok()) {
    LOG_WARN("GET failed: %s", r.error.c_str());
    return error(req, out);
  }
  const auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size());
  const size_t n = reply(req, out, wire::kOk, bytes);
  if (n == 0) {
    // Stored by a client with a larger MTU, or written directly: it cannot go in one frame.
    LOG_DEBUG("GET value of %zu bytes does not fit a %zu-byte frame", value.size(), out.size());
    return error(req, out);
  }
  return n;
}

size_t RequestHandler::handle_write(const wire::FrameView& req, uint64_t hash,
                                    const ChainTable* table, std::span<uint8_t> out) {
  const bool is_delete = req.op() == wire::kDelete;
  bump(is_delete ? c_.deletes : c_.puts);

  // Held until the reply is built: serializes writes of this key across packet threads and
  // against Fetch (see cached_keys.h), and so also two copies of one request (same key).
  // Propagation RPCs run under it; a slow cache node thus delays other keys of the same
  // stripe, which is the price of per-key ordering.
  CachedKeys::Guard guard = ctx_.cached.lock(hash);

  // A resend of a write already applied (its reply was lost, or the frame was duplicated):
  // answer as the first time, never apply it again, or an old PUT could overwrite a newer one.
  // Every outcome is remembered, not only OK: the client retries a BUSY under a new seq, so a
  // late copy of this id (a resend that crossed the BUSY reply) must be answered BUSY again and
  // never applied, or the write could take effect twice (refuse()). The id alone decides: a
  // copy with other content gets the first outcome too and is not applied (docs/wire-format.md).
  const RequestId id{req.client_id, req.seq};
  DedupRecord rec;
  rec.status = wire::kOk;
  rec.fingerprint = request_fingerprint(req.op(), req.key, req.value);
  rec.recorded_ms = ctx_.wall_ms();
  const DedupTable::Lookup seen = ctx_.dedup.claim(id, rec.recorded_ms);
  if (seen.kind != DedupTable::Lookup::kNew) {
    bump(c_.duplicate_writes);
    // In flight: the first copy has another key (copies of one key wait on its stripe lock),
    // and its outcome is not known yet; a resend of this copy gets it.
    const bool other_write = seen.kind == DedupTable::Lookup::kInFlight ||
                             seen.record.fingerprint != rec.fingerprint;
    if (other_write) {
      bump(c_.duplicate_id_conflicts);
      LOG_DEBUG("request id %u/%u reused for another write: not applied", req.client_id, req.seq);
    }
    if (seen.kind == DedupTable::Lookup::kInFlight) return 0;
    return reply(req, out, seen.record.status);
  }
  // Ours until a record replaces the claim (every answer below inserts one).
  DedupClaim claim(ctx_.dedup, id);

  // At most one write of a key travels down its chain at a time (design 3.8): an earlier one
  // still unacknowledged is forwarded once more now, and if that fails too this one is refused.
  if (table && ctx_.chain->has_uncommitted(as_sv(req.key)) &&
      !ctx_.chain->settle(guard, as_sv(req.key))) {
    LOG_DEBUG("write answered BUSY: an earlier write of the key is not through its chain yet");
    return refuse(req, rec, wire::kBusy, out);
  }

  // A key a cache node holds: the two-phase write, decided by the coordinator's CachedWrite
  // (coordinator/cached_write.h) and carried out by write_cached.cc. It first tries to deliver
  // any undelivered decision for the key (BUSY if that fails), and hands the write back here
  // when an answer cached=false untracks the key. (An untracked key needs no such settling: it
  // was untracked because its cache node dropped it, answered cached=false, or was forgotten, so
  // nothing there can serve it from a pending write.)
  if (const std::string* holder = guard.holder(as_sv(req.key))) {
    if (const std::optional<size_t> n = write_cached(req, guard, *holder, rec, hash, table, claim, out))
      return *n;
  }

  // A DELETE of a key that does not exist answers NOT_FOUND (memcached's `delete` says whether
  // the key was there; exo-proxy and Client.delete report it). Still under the stripe lock, so
  // no write of this key can come between the read and the answer; the outcome is recorded for
  // the id like any other, so a resend that arrives after a later PUT is not applied either.
  if (is_delete) {
    const StoreResult g = ctx_.store.get(req.key, &existing_);
    if (g.code == StoreResult::kNotFound) {
      rec.status = wire::kNotFound;
      // Replicated like a write: a resend of this DELETE that reaches a later head must find
      // the outcome there too, or it could delete another client's later PUT (design 3.2).
      if (table) return write_chained(req, hash, *table, rec, /*apply_data=*/false, claim, out);
      const std::string k = request_key(id), v = encode_dedup(rec);
      const StoreOp op = StoreOp::put(Cf::kRequests, bytes_of(k), bytes_of(v));
      if (const StoreResult w = ctx_.store.write(std::span<const StoreOp>(&op, 1)); !w.ok()) {
        LOG_WARN("DELETE of a missing key: dedup record not written: %s", w.error.c_str());
        return refuse(req, rec, wire::kError, out);
      }
      ctx_.dedup.insert(id, rec);
      bump(c_.not_found);
      return reply(req, out, wire::kNotFound);
    }
    if (!g.ok()) {
      LOG_WARN("DELETE: reading the key failed: %s", g.error.c_str());
      return refuse(req, rec, wire::kError, out);
    }
  }

  if (table) return write_chained(req, hash, *table, rec, /*apply_data=*/true, claim, out);

  const std::string dedup_key = request_key(id);
  const std::string dedup_value = encode_dedup(rec);

  // Uncached: the write and its dedup record in one atomic batch (synced as configured), so
  // after a crash the record exists exactly when the write does.
  const StoreOp ops[2] = {
      is_delete ? StoreOp::del(Cf::kData, req.key) : StoreOp::put(Cf::kData, req.key, req.value),
      StoreOp::put(Cf::kRequests, bytes_of(dedup_key), bytes_of(dedup_value))};
  const StoreResult r = ctx_.store.write(ops);
  if (!r.ok()) {
    LOG_WARN("%s failed: %s", is_delete ? "DELETE" : "PUT", r.error.c_str());
    return refuse(req, rec, wire::kError, out);
  }
  ctx_.dedup.insert(id, rec);
  return reply(req, out, wire::kOk);
}

size_t RequestHandler::reply(const wire::FrameView& req, std::span<uint8_t> out, uint8_t status,
                             std::span<const uint8_t> value) {
  return wire::build_reply(out, req, self_addr_, status, 0, value);
}

size_t RequestHandler::error(const wire::FrameView& req, std::span<uint8_t> out) {
  bump(c_.errors);
  // With an empty value the reply is no larger than the request, which fit in 14 + mtu.
  return wire::build_reply(out, req, self_addr_, wire::kError, 0, {});
}

size_t RequestHandler::busy(const wire::FrameView& req, std::span<uint8_t> out) {
  bump(c_.busy_writes);
  return wire::build_reply(out, req, self_addr_, wire::kBusy, 0, {});
}

size_t RequestHandler::refuse(const wire::FrameView& req, DedupRecord rec, uint8_t status,
                              std::span<uint8_t> out) {
  rec.status = status;
  const RequestId id{req.client_id, req.seq};
  const std::string k = request_key(id), v = encode_dedup(rec);
  const StoreOp op = StoreOp::put(Cf::kRequests, bytes_of(k), bytes_of(v));
  // Not synced: only a copy of the request that is still in flight when the process restarts
  // could need the record, and such a copy dies with the process's sockets; the write to the
  // WAL keeps it across a kill -9 all the same. A failure (the store is failing anyway) only
  // loses that protection.
  const StoreResult r = ctx_.store.write(std::span<const StoreOp>(&op, 1), Durability::kRelaxed);
  if (!r.ok()) LOG_DEBUG("dedup record of a refused write not written: %s", r.error.c_str());
  ctx_.dedup.insert(id, rec);
  return status == wire::kBusy ? busy(req, out) : error(req, out);
}

}  // namespace exo::db
