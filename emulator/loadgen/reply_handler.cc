#include "loadgen/reply_handler.h"

#include <cstring>

#include "wire.h"

namespace exo::loadgen {
namespace {

void bump(std::atomic<uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace

// IPv4/UDP to our source port, judged from the raw bytes (for frames wire::parse rejects,
// which may carry IPv4 options: the UDP header then starts IHL * 4 bytes after the IPv4 one).
bool ReplyHandler::to_our_port(std::span<const uint8_t> f) const {
  if (f.size() < wire::kEthLen + wire::kIpLen) return false;
  const wire::FrameHeader* h = wire::header_of(f.data());
  if (h->eth.ethertype.get() != wire::kEtherTypeIpv4) return false;
  if ((h->ip.version_ihl >> 4) != 4 || h->ip.protocol != wire::kIpProtoUdp) return false;
  const size_t udp = wire::kEthLen + size_t{h->ip.version_ihl & 0x0fu} * 4;
  if (f.size() < udp + offsetof(wire::UdpHeader, dst_port) + 2) return false;
  const auto* uh = reinterpret_cast<const wire::UdpHeader*>(f.data() + udp);
  return uh->dst_port.get() == self_.src_port;
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
