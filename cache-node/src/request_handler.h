// Per-frame decisions of the data plane, on plain byte buffers (no DPDK), so they are unit-tested
// with frames built by exo::wire::build. The lcore loop maps mbufs onto FrameRef and back.
//
// A burst is processed in three phases (MICA-style batching): classify/parse every frame, prefetch
// the map buckets of all GET keys, then take the map lock once and execute the GETs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "cache_state.h"
#include "counters.h"
#include "keyhash.h"
#include "wire.h"

namespace exo::cache {

inline constexpr size_t kMaxBurst = 512;  // config schema caps burst at 512

struct SelfInfo {
  Mac mac{};
  uint32_t ip = 0;  // host order
  uint16_t udp_port = 7777;
  // 14 + cluster mtu: a longer frame of ours is malformed (dropped and counted), never answered
  // or forwarded (the switch and the db node would drop a forwarded one anyway).
  size_t max_frame = wire::kEthLen + 1500;
};

enum class Verdict : uint8_t { kIgnore, kMalformed, kGet };
enum class Action : uint8_t {
  kDrop,     // free the buffer (ignored or malformed)
  kReply,    // buffer now holds the reply, out_len bytes
  kForward,  // buffer rewritten to prefix 0xAE + FORWARDED, same length
};

struct FrameRef {
  uint8_t* data = nullptr;  // frame start
  size_t len = 0;           // bytes received
  size_t cap = 0;           // writable bytes from data (len + tailroom): bound of the reply
  bool truncated = false;   // the frame goes on past len (a chained mbuf: only its first
                            // segment is visible): malformed unless it is not ours at all
  Action action = Action::kDrop;
  size_t out_len = 0;  // frame length to transmit (kReply / kForward)
};

// Phase 1: wire::screen() (the pre-filter every node runs: ours? valid, checksums included? no
// longer than self.max_frame? a request?), then: a GET with prefix 0xAA? Fills `view` on kGet.
Verdict classify(std::span<const uint8_t> frame, const SelfInfo& self, wire::FrameView& view);

// Rewrites a GET so switch Ruleset 3 (not Ruleset 2) takes it to the owning db node
// (wire::mark_forwarded: prefix 0xAE, FORWARDED, a UDP checksum kept valid).
void make_forward(uint8_t* frame);

// Phase 3 for one classified GET. Caller holds the map lock.
// A hit whose reply would not fit `cap` or self.max_frame is forwarded instead (the db node can
// answer it).
Action execute_get(FrameRef& f, const wire::FrameView& view, uint64_t hash, LruMap& map,
                   const SelfInfo& self);

// All three phases over a burst (n <= kMaxBurst); sets each frame's action and counts.
void process_burst(FrameRef* frames, size_t n, CacheState& state, const SelfInfo& self,
                   DpCounters& counters);

}  // namespace exo::cache
