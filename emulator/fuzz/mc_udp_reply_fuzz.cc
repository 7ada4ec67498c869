// libFuzzer target: exo-loadgen's memcached UDP reply path (--protocol memcached): a received
// frame screened by parse_mc_frame, its payload parsed by parse_mc_reply, and the reply's id
// mapped back to a seq by seq_for_request_id. Input: [newest seq:4][booked:2][frame...].
// Invariants: nothing is read outside the frame (ASan); a kReply payload lies inside the frame;
// an ok reply's key and value lie inside that payload; a reply without its 8-byte header is
// malformed; a matched seq is one of the `booked` newest and carries the reply's request id.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "loadgen/memcached_udp.h"

using namespace exo::loadgen;

namespace {

constexpr uint16_t kOurPort = 40000;
constexpr uint32_t kServerIp = 0x0A000101;  // 10.0.1.1

bool inside(std::span<const uint8_t> part, std::span<const uint8_t> whole) {
  if (part.empty()) return true;
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  uint32_t newest;
  uint16_t booked;
  std::memcpy(&newest, data, 4);
  std::memcpy(&booked, data + 4, 2);
  const std::span<const uint8_t> frame(data + 6, size - 6);

  std::span<const uint8_t> payload;
  const McFrame kind = parse_mc_frame(frame, kOurPort, kServerIp, kMemcachedPort, &payload);
  // The payload parser must hold on any bytes, not only on what the frame screen lets through.
  const std::span<const uint8_t> text = kind == McFrame::kReply ? payload : frame;
  if (kind == McFrame::kReply) check(inside(payload, frame));

  const McReply r = parse_mc_reply(text);
  if (!r.has_id) check(r.outcome == McOutcome::kMalformed);
  if (r.outcome == McOutcome::kOk) {
    check(inside(r.key, text) && inside(r.value, text));
    check(!r.key.empty());
  }
  if (r.has_id) {
    uint32_t seq = 0;
    if (seq_for_request_id(r.request_id, newest, booked, &seq)) {
      check(mc_request_id(seq) == r.request_id);
      check(static_cast<uint32_t>(newest - seq) < booked);
    }
  }
  return 0;
}
