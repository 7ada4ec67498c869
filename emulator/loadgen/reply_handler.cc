#include "loadgen/reply_handler.h"

#include <cstring>

#include "loadgen/memcached_udp.h"
#include "wire.h"

namespace exo::loadgen {
namespace {

void bump(std::atomic<uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace

// IPv4/UDP to (or, as_source, from) our source port, judged from the raw bytes (for frames
// wire::parse rejects, which may carry IPv4 options: the UDP header then starts IHL * 4 bytes
// after the IPv4 one).
bool ReplyHandler::to_our_port(std::span<const uint8_t> f, bool as_source) const {
  if (f.size() < wire::kEthLen + wire::kIpLen) return false;
  const wire::FrameHeader* h = wire::header_of(f.data());
  if (h->eth.ethertype.get() != wire::kEtherTypeIpv4) return false;
  if ((h->ip.version_ihl >> 4) != 4 || h->ip.protocol != wire::kIpProtoUdp) return false;
  const size_t udp = wire::kEthLen + size_t{h->ip.version_ihl & 0x0fu} * 4;
  if (f.size() < udp + offsetof(wire::UdpHeader, dst_port) + 2) return false;
  const auto* uh = reinterpret_cast<const wire::UdpHeader*>(f.data() + udp);
  return (as_source ? uh->src_port : uh->dst_port).get() == self_.src_port;
}

void ReplyHandler::book(uint32_t seq, uint64_t recv_ns, uint8_t status, uint8_t flags) {
  uint64_t send_ns = 0;
  switch (ring_.match(seq, &send_ns)) {
    case SendRing::Match::kAnswered:
      bump(counters_.answered);
      series_.on_reply(send_ns, recv_ns, status, flags);
      return;
    case SendRing::Match::kDuplicate: bump(counters_.duplicates); return;
    case SendRing::Match::kLate: bump(counters_.late); return;
    case SendRing::Match::kUnknown: bump(counters_.unknown); return;
  }
}

void ReplyHandler::handle(std::span<const uint8_t> frame, uint64_t recv_ns) {
  bump(counters_.frames);
  if (frame.size() < 6 || std::memcmp(frame.data(), self_.mac.data(), 6) != 0) {
    bump(counters_.other);
    return;
  }
  switch (protocol_) {
    case Protocol::kExo: handle_exo(frame, recv_ns); return;
    case Protocol::kReflect: handle_reflected(frame, recv_ns); return;
    case Protocol::kMemcached: handle_memcached(frame, recv_ns); return;
  }
}

void ReplyHandler::handle_exo(std::span<const uint8_t> frame, uint64_t recv_ns) {
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
  book(v.seq, recv_ns, v.status, v.flags);
}

// macswap swaps the two Ethernet addresses and nothing else: the frame still goes from our UDP
// port to the service's, and its source MAC is the one the request was sent to (the key-hash
// MAC, or --dst-mac). Checking that source ties the frame to a request we built, not just to
// one that claims our client_id.
void ReplyHandler::handle_reflected(std::span<const uint8_t> frame, uint64_t recv_ns) {
  wire::FrameView v{};
  if (wire::parse(frame, v) != wire::ParseError::kNone) {
    bump(to_our_port(frame, /*as_source=*/true) ? counters_.malformed : counters_.other);
    return;
  }
  if (v.udp_src != self_.src_port) {
    bump(counters_.other);
    return;
  }
  const Mac sent_to = self_.fixed_dst_mac
                          ? self_.dst_mac
                          : request_mac(v.op() == wire::kGet ? kPrefixGet : kPrefixOther, key_hash(v.key));
  if (v.is_reply() || std::memcmp(v.eth_src, sent_to.data(), sent_to.size()) != 0) {
    bump(counters_.malformed);
    return;
  }
  if (v.client_id != client_id_) {
    bump(counters_.foreign);
    return;
  }
  book(v.seq, recv_ns, wire::kOk, 0);
}

void ReplyHandler::handle_memcached(std::span<const uint8_t> frame, uint64_t recv_ns) {
  std::span<const uint8_t> payload;
  switch (parse_mc_frame(frame, self_.src_port, self_.service_ip, self_.udp_port, &payload)) {
    case McFrame::kReply: break;
    case McFrame::kOther: bump(counters_.other); return;
    case McFrame::kMalformed: bump(counters_.malformed); return;
  }
  const McReply r = parse_mc_reply(payload);
  uint8_t status = wire::kOk;
  switch (r.outcome) {
    case McOutcome::kOk: break;
    case McOutcome::kNotFound: status = wire::kNotFound; break;
    case McOutcome::kError: status = wire::kError; break;
    case McOutcome::kMalformed: bump(counters_.malformed); return;
  }
  uint32_t newest = 0, seq = 0;
  uint64_t booked = 0;
  if (!ring_.newest(&newest, &booked) || !seq_for_request_id(r.request_id, newest, booked, &seq)) {
    bump(counters_.unknown);
    return;
  }
  book(seq, recv_ns, status, 0);
}

}  // namespace exo::loadgen
