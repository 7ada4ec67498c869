#include "request_handler.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace exo::cache {

Verdict classify(std::span<const uint8_t> frame, const SelfInfo& self, wire::FrameView& view) {
  // The nodes' one pre-filter: not ours (prefix, own MAC, other UDP port) is ignored; ours but
  // invalid (checksums included), oversized or a reply is malformed.
  wire::ScreenPolicy policy;
  policy.udp_port = self.udp_port;
  policy.max_frame = self.max_frame;
  policy.self_mac = self.mac.data();
  switch (wire::screen(frame, policy, view)) {
    case wire::Screen::kIgnore: return Verdict::kIgnore;
    case wire::Screen::kMalformed: return Verdict::kMalformed;
    case wire::Screen::kRequest: break;
  }
  // Only GET requests are routed to cache nodes (Ruleset 2 matches prefix 0xAA only). A PUT, or
  // a 0xBA or 0xAE (forwarded: a loop) frame here is a misroute: drop it rather than guess.
  if (view.opcode != wire::kGet || view.eth_dst[0] != kPrefixGet) return Verdict::kMalformed;
  return Verdict::kGet;
}

void make_forward(uint8_t* frame) { wire::mark_forwarded(frame); }

Action execute_get(FrameRef& f, const wire::FrameView& view, uint64_t hash, LruMap& map,
                   const SelfInfo& self) {
  const std::string_view key(reinterpret_cast<const char*>(view.key.data()), view.key.size());
  LruMap::Entry* e = map.touch(key, hash);
  // Pending: a write is prepared; only the db node knows whether it commits, so reads go there
  // until Commit/Abort (keeps reads linearizable).
  if (e && !e->pending) {
    const wire::Addr addr{self.mac.data(), self.ip, self.udp_port};
    const std::span<const uint8_t> value(reinterpret_cast<const uint8_t*>(e->value.data()),
                                         e->value.size());
    // Never larger than the link MTU allows (a value committed over gRPC may be larger than
    // any PUT could carry): such a GET is forwarded, like one whose reply does not fit `cap`.
    const size_t room = std::min(f.cap, self.max_frame);
    const size_t len = wire::build_reply({f.data, room}, view, addr, wire::kOk, wire::kFromCache, value);
    if (len != 0) {
      f.action = Action::kReply;
      f.out_len = len;
      return f.action;
    }
  }
  make_forward(f.data);
  f.action = Action::kForward;
  f.out_len = f.len;
  return f.action;
}

void process_burst(FrameRef* frames, size_t n, CacheState& state, const SelfInfo& self,
                   DpCounters& c) {
  std::array<wire::FrameView, kMaxBurst> views;
  std::array<uint64_t, kMaxBurst> hashes;
  std::array<uint16_t, kMaxBurst> gets;  // indices of frames that are GETs
  size_t ngets = 0;
  if (n > kMaxBurst) n = kMaxBurst;
  bump(c.rx_frames, n);

  // Phase 1: parse everything. The key's hash is already in the dst MAC (the client put it
  // there and the switch routed on it): read it instead of hashing the key again. The lookup
  // still compares the key, so a client that sent a wrong hash only gets a forwarded miss.
  for (size_t i = 0; i < n; ++i) {
    FrameRef& f = frames[i];
    f.action = Action::kDrop;
    Verdict v = classify({f.data, f.len}, self, views[i]);
    if (f.truncated && v != Verdict::kIgnore) v = Verdict::kMalformed;
    switch (v) {
      case Verdict::kIgnore: bump(c.ignored); break;
      case Verdict::kMalformed: bump(c.malformed_dropped); break;
      case Verdict::kGet:
        bump(c.gets);
        hashes[i] = exo::hash_from_mac(f.data);
        gets[ngets++] = static_cast<uint16_t>(i);
        break;
    }
  }
  if (ngets == 0) return;

  // Phase 2: prefetch the buckets so the lookups below overlap their cache misses.
  for (size_t g = 0; g < ngets; ++g) state.map.prefetch(hashes[gets[g]]);

  // Phase 3: one lock for the whole burst.
  std::lock_guard lock(state.mu);
  for (size_t g = 0; g < ngets; ++g) {
    const size_t i = gets[g];
    if (execute_get(frames[i], views[i], hashes[i], state.map, self) == Action::kReply) {
      bump(c.hits);
      bump(c.requests_served);
    } else {
      bump(c.forwarded_misses);
    }
  }
}

}  // namespace exo::cache
