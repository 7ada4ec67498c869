#include "loadgen/reply_handler.h"

#include <cstring>

#include "wire.h"

namespace exo::loadgen {
namespace {

void bump(std::atomic<uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace

// IPv4/UDP to our source port, judged from the raw bytes (for frames wire::parse rejects).
bool ReplyHandler::to_our_port(std::span<const uint8_t> f) const {
  if (f.size() < wire::kEthLen + wire::kIpLen || f[12] != 0x08 || f[13] != 0x00) return false;
  const uint8_t* ip = f.data() + wire::kEthLen;
  if ((ip[0] >> 4) != 4 || ip[9] != 17) return false;
  const size_t udp = wire::kEthLen + size_t{ip[0] & 0x0fu} * 4;
  if (f.size() < udp + 4) return false;
  return (uint16_t{f[udp + 2]} << 8 | f[udp + 3]) == self_.src_port;
}

void ReplyHandler::handle(std::span<const uint8_t> frame, uint64_t recv_ns) {
  bump(counters_.frames);
  if (frame.size() < 6 || std::memcmp(frame.data(), self_.mac.data(), 6) != 0) {
    bump(counters_.other);
    return;
  }
  wire::FrameView v{};
  if (wire::parse(frame, v) != wire::ParseError::kNone) {
    bump(to_our_port(frame) ? counters_.malformed : counters_.other);
    return;
  }
  if (v.udp_dst != self_.src_port) {
    bump(counters_.other);
    return;
  }
  if (!v.is_reply()) {
    bump(counters_.malformed);
    return;
  }
  if (v.client_id != client_id_) {
    bump(counters_.foreign);
    return;
  }
  uint64_t send_ns = 0;
  switch (ring_.match(v.seq, &send_ns)) {
    case SendRing::Match::kAnswered:
      bump(counters_.answered);
      series_.on_reply(send_ns, recv_ns, v.status, v.flags);
      return;
    case SendRing::Match::kDuplicate: bump(counters_.duplicates); return;
    case SendRing::Match::kLate: bump(counters_.late); return;
    case SendRing::Match::kUnknown: bump(counters_.unknown); return;
  }
}

}  // namespace exo::loadgen
