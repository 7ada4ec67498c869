// libFuzzer target: wire::parse on arbitrary bytes must never read out of bounds, and whatever
// it accepts must stay self-consistent through an in-place reply and a forward rewrite
// (checksums repaired unless marked, frame_fuzz.h).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "frame_fuzz.h"
#include "wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly-sized heap buffer so ASan sees any read past the frame.
  std::vector<uint8_t> frame(data, data + size);
  exo::fuzz::repair_checksums(frame);
  exo::wire::FrameView v{};
  if (exo::wire::parse(frame, v) != exo::wire::ParseError::kNone) return 0;

  // Invariants of an accepted frame.
  if (v.frame_len > size) std::abort();
  if (v.key.empty() || v.key.size() > exo::wire::kMaxKeyLen) std::abort();
  if (v.value.data() + v.value.size() > frame.data() + size) std::abort();

  // A GET forwarded by a cache node still parses: its UDP checksum, if any, stays valid.
  if (v.op() == exo::wire::kGet && !v.is_reply()) {
    std::vector<uint8_t> fwd(frame);
    exo::wire::mark_forwarded(fwd.data());
    exo::wire::FrameView fv{};
    if (exo::wire::parse(fwd, fv) != exo::wire::ParseError::kNone) std::abort();
    if (!(fv.flags & exo::wire::kForwarded) || fv.eth_dst[0] != exo::kPrefixForwarded) std::abort();
  }

  // Answer it in place (as the cache node does) and parse the reply again.
  std::vector<uint8_t> buf(frame);
  buf.resize(2048);
  exo::wire::FrameView req{};
  if (exo::wire::parse(std::span<const uint8_t>(buf.data(), size), req) != exo::wire::ParseError::kNone)
    std::abort();
  const std::vector<uint8_t> key(req.key.begin(), req.key.end());
  static const uint8_t kValue[100] = {1, 2, 3};
  const exo::Mac mac{0x02, 0, 0, 0, 1, 1};
  const exo::wire::Addr self{mac.data(), 0x0a000101, 7777};
  const size_t n = exo::wire::build_reply(buf, req, self, exo::wire::kOk, exo::wire::kFromCache,
                                          std::span<const uint8_t>(kValue, sizeof kValue));
  if (n == 0) return 0;
  exo::wire::FrameView rep{};
  if (exo::wire::parse(std::span<const uint8_t>(buf.data(), n), rep) != exo::wire::ParseError::kNone)
    std::abort();
  if (!rep.is_reply() || rep.key.size() != key.size() ||
      std::memcmp(rep.key.data(), key.data(), key.size()) != 0 || rep.value.size() != sizeof kValue)
    std::abort();
  return 0;
}
