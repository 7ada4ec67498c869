#include "request_handler.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

namespace exo::cache {
namespace {

inline uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// Offsets from docs/wire-format.md.
constexpr size_t kUdpDstOff = 36;
constexpr size_t kFlagsOff = wire::kPayloadOffset + 5;

}  // namespace

Verdict classify(std::span<const uint8_t> frame, const SelfInfo& self, wire::FrameView& view) {
  const uint8_t* f = frame.data();
  const size_t n = frame.size();
  if (n < 12 || !wire::is_request_mac(f)) return Verdict::kIgnore;
  // Our own replies can come back to us (e.g. flooded by a switch): never treat them as requests.
  if (std::memcmp(f + 6, self.mac.data(), 6) == 0) return Verdict::kIgnore;
  // Other UDP traffic that happens to carry our prefix is not ours; check the port before the full
  // parse so it is ignored rather than counted as malformed.
  if (n >= kUdpDstOff + 2 && f[12] == 0x08 && f[13] == 0x00 && f[14] == 0x45 && f[23] == 17 &&
      rd16(f + kUdpDstOff) != self.udp_port)
    return Verdict::kIgnore;
  if (n > self.max_frame) return Verdict::kMalformed;  // oversized: the link MTU was ignored
  if (wire::parse(frame, view) != wire::ParseError::kNone) return Verdict::kMalformed;
  // Only GET requests are routed to cache nodes (Ruleset 2 matches prefix 0xAA only). A PUT, a
  // reply or a 0xBA frame here is a misroute: drop it rather than guess.
  if (view.opcode != wire::kGet || f[0] != kPrefixGet) return Verdict::kMalformed;
  return Verdict::kGet;
}

void make_forward(uint8_t* frame) {
  frame[0] = kPrefixOther;
  frame[kFlagsOff] |= wire::kForwarded;  // UDP checksum is 0, IPv4 checksum does not cover it
}

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
