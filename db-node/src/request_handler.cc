#include "request_handler.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "log.h"

namespace exo::db {
namespace {

constexpr size_t kUdpDstPortOffset = wire::kEthLen + wire::kIpLen + 2;  // 36

// Is this an IPv4/UDP frame to some port other than ours? Such frames are someone else's
// traffic (e.g. DHCP, mDNS on the link) even if their dst MAC happens to carry our prefix,
// so they are ignored rather than counted as malformed. Anything that claims to be IPv4/UDP
// to our port, or that is not IPv4/UDP at all despite a request MAC, goes to wire::parse.
bool udp_to_other_port(std::span<const uint8_t> f, uint16_t our_port) {
  if (f.size() < kUdpDstPortOffset + 2) return false;
  if (f[12] != 0x08 || f[13] != 0x00) return false;       // not IPv4
  if (f[14] != 0x45 || f[14 + 9] != 17) return false;      // options, or not UDP
  const uint16_t port = static_cast<uint16_t>(f[kUdpDstPortOffset] << 8 | f[kUdpDstPortOffset + 1]);
  return port != our_port;
}

}  // namespace

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
}

size_t RequestHandler::handle(std::span<const uint8_t> frame, std::span<uint8_t> out) {
  bump(c_.rx_frames);
  if (frame.size() < wire::kEthLen || !wire::is_request_mac(frame.data()) ||
      udp_to_other_port(frame, ctx_.cluster.udp_port)) {
    bump(c_.ignored);
    return 0;
  }
  wire::FrameView req;
  const wire::ParseError err = wire::parse(frame, req);
  // A reply arriving at a db node is never legitimate (replies go to clients): drop it like
  // any other malformed frame, so a reflected or looped frame cannot trigger a reply storm.
  if (err != wire::ParseError::kNone || req.is_reply()) {
    bump(c_.malformed_dropped);
    LOG_DEBUG("dropped malformed frame (%zu bytes): %s", frame.size(),
              err != wire::ParseError::kNone ? wire::to_string(err) : "reply opcode");
    return 0;
  }
  out = out.first(std::min(out.size(), max_frame_));

  const uint64_t hash = key_hash(req.key);
  // Serve misrouted requests anyway: during a partition-table change the switch and the
  // config may briefly disagree, and answering beats a client timeout. The counter shows it.
  if (ctx_.cluster.owner_index(hash) != ctx_.self_index) bump(c_.misrouted);

  switch (req.op()) {
    case wire::kGet:
      return handle_get(req, out);
    case wire::kPut:
    case wire::kDelete:
      return handle_write(req, hash, out);
  }
  bump(c_.malformed_dropped);  // unreachable: parse() rejects other opcodes
  return 0;
}

size_t RequestHandler::handle_get(const wire::FrameView& req, std::span<uint8_t> out) {
  bump(c_.gets);
  if (req.flags & wire::kForwarded) bump(c_.forwarded_gets);
  // Forwarded GETs count too: they are reads of this node's keys that the cache did not serve.
  // Only GETs are sampled (caching helps reads only; see docs/cache-fill.md).
  if (ctx_.hot_keys && sampler_.sample()) {
    bump(c_.hot_sampled);
    ctx_.hot_keys->observe(as_sv(req.key), steady_ms());
  }
  // No stripe lock: a RocksDB Get is atomic per key and sees either the old or the new value
  // of a concurrent write, both fine for a request concurrent with that write.
  const StoreResult r = ctx_.store.get(req.key, &value_);
  if (r.code == StoreResult::kNotFound) {
    bump(c_.not_found);
    return reply(req, out, wire::kNotFound);
  }
  if (!r.ok()) {
    LOG_WARN("GET failed: %s", r.error.c_str());
    return error(req, out);
  }
  const auto value = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value_.data()),
                                              value_.size());
  const size_t n = reply(req, out, wire::kOk, value);
  if (n == 0) {
    // Stored by a client with a larger MTU, or written directly: it cannot go in one frame.
    LOG_DEBUG("GET value of %zu bytes does not fit a %zu-byte frame", value_.size(), out.size());
    return error(req, out);
  }
  return n;
}

StoreResult RequestHandler::write(const wire::FrameView& req) {
  return req.op() == wire::kPut ? ctx_.store.put(req.key, req.value) : ctx_.store.del(req.key);
}

size_t RequestHandler::handle_write(const wire::FrameView& req, uint64_t hash,
                                    std::span<uint8_t> out) {
  const bool is_delete = req.op() == wire::kDelete;
  bump(is_delete ? c_.deletes : c_.puts);

  // Held until the reply is built: serializes writes of this key across packet threads and
  // against Fetch (see cached_keys.h). Propagation RPCs run under it; a slow cache node thus
  // delays other keys of the same stripe, which is the price of per-key ordering.
  CachedKeys::Guard guard = ctx_.cached.lock(hash);
  const std::string* holder = guard.holder(as_sv(req.key));
  if (!holder) {
    const StoreResult r = write(req);
    if (!r.ok()) {
      LOG_WARN("%s failed: %s", is_delete ? "DELETE" : "PUT", r.error.c_str());
      return error(req, out);
    }
    return reply(req, out, wire::kOk);
  }

  // Cached key: the cache node must stop serving the old value before the new one is durable
  // here, or a client could read the old value from the cache after its write was acked.
  const std::string cache_node = *holder;
  const uint64_t txid = ctx_.txids.next();
  const PrepareOutcome prep = ctx_.propagator.prepare(cache_node, req.key, txid, is_delete, req.value);
  if (prep.code == PrepareOutcome::kFailed) {
    LOG_WARN("write not applied, Prepare failed: %s", prep.error.c_str());
    return error(req, out);
  }
  const StoreResult r = write(req);
  if (prep.code == PrepareOutcome::kNotCached) {
    // The cache node holds neither the entry nor a Fetch of it in flight (it answers
    // cached=false only then), so stop tracking it now: its Evict may never come (a lost Fetch
    // reply, a restarted cache node), and every later write would pay a Prepare for nothing.
    // A new Fetch needs this stripe lock, so it cannot slip in between.
    guard.unmark(as_sv(req.key), cache_node);
    if (!r.ok()) {
      LOG_WARN("%s failed: %s", is_delete ? "DELETE" : "PUT", r.error.c_str());
      return error(req, out);
    }
    return reply(req, out, wire::kOk);
  }
  std::string why;
  if (!r.ok()) {
    LOG_WARN("%s failed, aborting txid %llu on %s: %s", is_delete ? "DELETE" : "PUT",
             static_cast<unsigned long long>(txid), cache_node.c_str(), r.error.c_str());
    if (!ctx_.propagator.abort(cache_node, req.key, txid, &why))
      LOG_WARN("Abort failed: %s", why.c_str());
    return error(req, out);
  }
  if (!ctx_.propagator.commit(cache_node, req.key, txid, &why)) {
    // TODO(issue "Linearizable under faults"): the write is durable here but the cache node
    // may still hold the key pending (it forwards GETs meanwhile) or, worse, serve the old
    // value after a restart. Full 2PC recovery (retrying Commit, a txn log) lands with that
    // issue; until then the client is told ERROR so it does not assume the write is visible.
    LOG_WARN("Commit of txid %llu on %s failed: %s", static_cast<unsigned long long>(txid),
             cache_node.c_str(), why.c_str());
    return error(req, out);
  }
  bump(c_.writes_propagated);
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

}  // namespace exo::db
