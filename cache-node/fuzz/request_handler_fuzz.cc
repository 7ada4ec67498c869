// libFuzzer target: the cache node's per-burst data-plane code (classify, hit/miss, in-place
// reply, forward rewrite) on arbitrary frames. Every frame must end with exactly one action and
// one counter, and nothing may be written past a frame's capacity; a forwarded GET still parses
// (its UDP checksum kept valid). Checksums are repaired unless marked (frame_fuzz.h).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz/frame_fuzz.h"
#include "keyhash.h"
#include "request_handler.h"

using namespace exo::cache;

namespace {

CacheState& state() {
  // A few cached keys, so fuzzed GETs for them take the in-place reply path.
  static CacheState* s = [] {
    auto* st = new CacheState(8);
    std::vector<std::string> evicted;
    for (const char* k : {"a", "key:0", "hot", "k"}) st->map.insert(k, std::string(300, 'v'), &evicted);
    return st;
  }();
  return *s;
}

}  // namespace

// Input: a sequence of [len:1][extra_cap:1][bytes:len] frames (up to 8 per burst); extra_cap*4
// bytes of tailroom follow each frame, so replies that do not fit are exercised too, and an odd
// extra_cap marks the frame truncated (a chained mbuf). The node's largest frame is set to 200
// bytes, so longer ones are oversized; neither kind may be answered or forwarded.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SelfInfo self;
  self.mac = {0x02, 0, 0, 0, 1, 1};
  self.ip = 0x0a000101;
  self.max_frame = 200;
  std::vector<std::vector<uint8_t>> bufs;
  FrameRef frames[8];
  size_t n = 0;
  while (size > 0 && n < 8) {
    if (size < 2) break;
    const size_t len = std::min<size_t>(data[0], size - 2);
    const size_t cap = len + size_t{data[1]} * 4;
    const bool truncated = data[1] & 1;
    data += 2;
    size -= 2;
    auto& b = bufs.emplace_back(data, data + len);
    exo::fuzz::repair_checksums(b);
    b.resize(cap);
    frames[n].data = b.data();
    frames[n].len = len;
    frames[n].cap = cap;
    frames[n].truncated = truncated;
    ++n;
    data += len;
    size -= len;
  }
  if (n == 0) return 0;
  DpCounters c{};
  process_burst(frames, n, state(), self, c);
  const uint64_t accounted = c.ignored + c.malformed_dropped + c.gets;
  if (accounted != n) std::abort();
  for (size_t i = 0; i < n; ++i) {
    if (frames[i].action != Action::kDrop && frames[i].out_len > frames[i].cap) std::abort();
    if (frames[i].action != Action::kDrop && (frames[i].truncated || frames[i].len > self.max_frame))
      std::abort();
    if (frames[i].action == Action::kReply && frames[i].out_len > self.max_frame) std::abort();
    if (frames[i].action == Action::kForward && frames[i].data[0] != exo::kPrefixForwarded) std::abort();
    if (frames[i].action == Action::kForward) {
      exo::wire::FrameView v{};
      if (exo::wire::parse({frames[i].data, frames[i].len}, v) != exo::wire::ParseError::kNone)
        std::abort();
    }
  }
  return 0;
}
