#include "wire.h"

#include <bit>
#include <cstring>

namespace exo::wire {
namespace {

// ---- RFC 1071 one's-complement sums ----
//
// Summed in native byte order, 8 bytes at a time with the end-around carry (RFC 1071 section
// 2 (B) and 4.1): the folded 16-bit result is the byte-swapped big-endian sum on a
// little-endian machine, so a sum is compared with 0xFFFF (the same in both orders) or swapped
// once before it is stored as a big-endian number. Each block starts at an even offset of the
// checksummed data; a block's odd last byte is padded with zero, as the RFC pads the data.
inline uint64_t add_bytes(uint64_t sum, const uint8_t* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    sum += w;
    sum += sum < w;  // end-around carry
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    sum += w;
    sum += sum < w;
  }
  return sum;
}

inline uint64_t add16(uint64_t sum, uint16_t v) {
  sum += v;
  return sum + (sum < v);
}

inline uint16_t fold(uint64_t s) {
  s = (s & 0xffffffffu) + (s >> 32);
  s = (s & 0xffffffffu) + (s >> 32);
  s = (s & 0xffffu) + (s >> 16);
  s = (s & 0xffffu) + (s >> 16);
  return static_cast<uint16_t>(s);
}

// A native-order 16-bit sum as the big-endian number a header field holds.
inline uint16_t as_be_number(uint16_t native) {
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap16(native);
  return native;
}

inline uint16_t native16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Pseudo-header (src IP, dst IP, 0, protocol 17, UDP length) + UDP header + payload, not folded.
uint64_t udp_sum(const uint8_t* frame) {
  const FrameHeader* h = header_of(frame);
  const uint16_t udp_len = h->udp.length.get();
  const uint8_t proto_len[4] = {0, kIpProtoUdp, h->udp.length.b[0], h->udp.length.b[1]};
  uint64_t s = add_bytes(0, frame + off::kIpSrc, 8);  // src and dst IP, adjacent
  s = add_bytes(s, proto_len, 4);
  return add_bytes(s, frame + off::kUdp, udp_len);
}

// Fills EtherType, IPv4, UDP and the Exoskeleton header (everything after the MACs).
void write_headers(uint8_t* f, uint32_t ip_src, uint32_t ip_dst, uint16_t sport, uint16_t dport,
                   const Header& h, size_t key_len, size_t value_len) {
  const size_t udp_len = kUdpLen + kHdrLen + key_len + value_len;
  FrameHeader* fh = header_of(f);
  fh->eth.ethertype.set(kEtherTypeIpv4);
  Ipv4Header& ip = fh->ip;
  ip.version_ihl = kIpv4NoOptions;
  ip.tos = 0;
  ip.total_len.set(static_cast<uint16_t>(kIpLen + udp_len));
  ip.id.set(0);
  ip.frag.set(kIpDontFragment);
  ip.ttl = kDefaultTtl;
  ip.protocol = kIpProtoUdp;
  ip.src.set(ip_src);
  ip.dst.set(ip_dst);
  ip.checksum.set(0);
  ip.checksum.set(ipv4_checksum(reinterpret_cast<const uint8_t*>(&ip)));
  UdpHeader& udp = fh->udp;
  udp.src_port.set(sport);
  udp.dst_port.set(dport);
  udp.length.set(static_cast<uint16_t>(udp_len));
  udp.checksum.set(0);  // none (legal for IPv4): nodes then verify nothing past the IPv4 header
  ExoHeader& x = fh->exo;
  x.magic.set(kMagic);
  x.version = kVersion;
  x.opcode = h.opcode;
  x.status = h.status;
  x.flags = h.flags;
  x.key_len.set(static_cast<uint16_t>(key_len));
  x.value_len.set(static_cast<uint32_t>(value_len));
  x.client_id.set(h.client_id);
  x.seq.set(h.seq);
}

}  // namespace

const char* to_string(ParseError e) {
  switch (e) {
    case ParseError::kNone: return "ok";
    case ParseError::kShort: return "short frame";
    case ParseError::kNotIpv4: return "not IPv4";
    case ParseError::kIpOptions: return "IPv4 IHL is not 5";
    case ParseError::kNotUdp: return "not UDP";
    case ParseError::kIpLength: return "IPv4 total length disagrees with frame";
    case ParseError::kUdpLength: return "UDP length disagrees with IPv4 length";
    case ParseError::kBadMagic: return "bad magic";
    case ParseError::kBadVersion: return "bad version";
    case ParseError::kBadOpcode: return "unknown opcode";
    case ParseError::kBadKeyLen: return "bad key length";
    case ParseError::kKvOverflow: return "key/value exceed payload";
    case ParseError::kIpChecksum: return "bad IPv4 header checksum";
    case ParseError::kUdpChecksum: return "bad UDP checksum";
    case ParseError::kOversize: return "longer than 14 + mtu";
    case ParseError::kNotRequest: return "reply opcode";
  }
  return "?";
}

uint16_t ipv4_checksum(const uint8_t* hdr) {
  return as_be_number(static_cast<uint16_t>(~fold(add_bytes(0, hdr, kIpLen))));
}

bool ipv4_checksum_ok(const uint8_t* hdr) { return fold(add_bytes(0, hdr, kIpLen)) == 0xffff; }

uint16_t udp_checksum(const uint8_t* frame) {
  const uint64_t s = add16(udp_sum(frame), static_cast<uint16_t>(~native16(frame + off::kUdpChecksum)));
  const uint16_t c = as_be_number(static_cast<uint16_t>(~fold(s)));
  return c == 0 ? 0xffff : c;
}

bool udp_checksum_ok(const uint8_t* frame) {
  return header_of(frame)->udp.checksum.get() == 0 || fold(udp_sum(frame)) == 0xffff;
}

void set_udp_checksum(std::span<uint8_t> frame) {
  header_of(frame.data())->udp.checksum.set(udp_checksum(frame.data()));
}

ParseError parse(std::span<const uint8_t> frame, FrameView& out) {
  const uint8_t* f = frame.data();
  const size_t n = frame.size();
  if (n < kMinFrame) return ParseError::kShort;
  const FrameHeader* h = header_of(f);
  if (h->eth.ethertype.get() != kEtherTypeIpv4) return ParseError::kNotIpv4;
  if (h->ip.version_ihl != kIpv4NoOptions) return ParseError::kIpOptions;
  if (h->ip.protocol != kIpProtoUdp) return ParseError::kNotUdp;
  if (!ipv4_checksum_ok(f + off::kIp)) return ParseError::kIpChecksum;
  const size_t ip_total = h->ip.total_len.get();
  if (ip_total < kIpLen + kUdpLen + kHdrLen || kEthLen + ip_total > n) return ParseError::kIpLength;
  if (h->udp.length.get() != ip_total - kIpLen) return ParseError::kUdpLength;
  // After the length checks: the sum reads exactly the UDP length's bytes, all in the frame.
  if (!udp_checksum_ok(f)) return ParseError::kUdpChecksum;
  const ExoHeader& x = h->exo;
  if (x.magic.get() != kMagic) return ParseError::kBadMagic;
  if (x.version != kVersion) return ParseError::kBadVersion;
  const uint8_t op = x.opcode & ~kReplyBit;
  if (op != kGet && op != kPut && op != kDelete) return ParseError::kBadOpcode;
  const size_t key_len = x.key_len.get();
  if (key_len == 0 || key_len > kMaxKeyLen) return ParseError::kBadKeyLen;
  const size_t value_len = x.value_len.get();
  const size_t payload_len = ip_total - kIpLen - kUdpLen;
  if (value_len > payload_len || kHdrLen + key_len + value_len > payload_len) return ParseError::kKvOverflow;

  out.eth_dst = h->eth.dst;
  out.eth_src = h->eth.src;
  out.ip_src = h->ip.src.get();
  out.ip_dst = h->ip.dst.get();
  out.udp_src = h->udp.src_port.get();
  out.udp_dst = h->udp.dst_port.get();
  out.opcode = x.opcode;
  out.status = x.status;
  out.flags = x.flags;
  out.client_id = x.client_id.get();
  out.seq = x.seq.get();
  out.key = std::span<const uint8_t>(f + kMinFrame, key_len);
  out.value = std::span<const uint8_t>(f + kMinFrame + key_len, value_len);
  out.frame_len = kEthLen + ip_total;
  return ParseError::kNone;
}

Screen screen(std::span<const uint8_t> frame, const ScreenPolicy& policy, FrameView& view,
              ParseError* why) {
  const uint8_t* f = frame.data();
  const size_t n = frame.size();
  if (n < kEthLen || !is_request_mac(f)) return Screen::kIgnore;
  const FrameHeader* h = header_of(f);
  // Our own frames can come back to us (e.g. flooded by a switch): never requests.
  if (policy.self_mac && std::memcmp(h->eth.src, policy.self_mac, 6) == 0) return Screen::kIgnore;
  // Other UDP traffic that happens to carry our prefix (DHCP, mDNS on the link) is not ours:
  // decided before the full parse so it is ignored rather than counted as malformed. Anything
  // that claims to be IPv4/UDP to our port, or is not IPv4/UDP at all despite a request MAC,
  // goes on to parse().
  if (n >= off::kUdpDst + 2 && h->eth.ethertype.get() == kEtherTypeIpv4 &&
      h->ip.version_ihl == kIpv4NoOptions && h->ip.protocol == kIpProtoUdp &&
      h->udp.dst_port.get() != policy.udp_port)
    return Screen::kIgnore;
  ParseError e = ParseError::kNone;
  if (n > policy.max_frame) {
    e = ParseError::kOversize;  // the link MTU was ignored: no client of this cluster sends it
  } else if ((e = parse(frame, view)) == ParseError::kNone && view.is_reply()) {
    // Replies go to clients: one arriving at a node is reflected or looped, and answering it
    // could start a reply storm.
    e = ParseError::kNotRequest;
  }
  if (e == ParseError::kNone) return Screen::kRequest;
  if (why) *why = e;
  return Screen::kMalformed;
}

size_t build(std::span<uint8_t> out, const uint8_t* eth_dst, const Addr& src, uint32_t ip_dst,
             uint16_t udp_dst, const Header& h, std::span<const uint8_t> key,
             std::span<const uint8_t> value) {
  const size_t len = kMinFrame + key.size() + value.size();
  if (len > out.size() || key.size() > kMaxKeyLen) return 0;
  uint8_t* f = out.data();
  // Empty spans may carry a null data(): memmove from null is undefined even for 0 bytes.
  if (!key.empty()) std::memmove(f + kMinFrame, key.data(), key.size());
  if (!value.empty()) std::memmove(f + kMinFrame + key.size(), value.data(), value.size());
  FrameHeader* fh = header_of(f);
  std::memcpy(fh->eth.dst, eth_dst, 6);
  std::memcpy(fh->eth.src, src.mac, 6);
  write_headers(f, src.ip, ip_dst, src.port, udp_dst, h, key.size(), value.size());
  return len;
}

size_t build_reply(std::span<uint8_t> out, const FrameView& req, const Addr& self, uint8_t status,
                   uint8_t flags, std::span<const uint8_t> value) {
  // Copy what we need from the request first: `out` may be the request's own buffer.
  uint8_t client_mac[6];
  std::memcpy(client_mac, req.eth_src, 6);
  const uint32_t client_ip = req.ip_src;
  const uint16_t client_port = req.udp_src;
  Header h;
  h.opcode = req.opcode | kReplyBit;
  h.status = status;
  h.flags = flags;
  h.client_id = req.client_id;
  h.seq = req.seq;
  const size_t len = kMinFrame + req.key.size() + value.size();
  if (len > out.size()) return 0;
  uint8_t* f = out.data();
  const size_t key_len = req.key.size();
  std::memmove(f + kMinFrame, req.key.data(), key_len);  // no-op when in place
  if (!value.empty()) std::memmove(f + kMinFrame + key_len, value.data(), value.size());
  FrameHeader* fh = header_of(f);
  std::memcpy(fh->eth.dst, client_mac, 6);
  std::memcpy(fh->eth.src, self.mac, 6);
  write_headers(f, self.ip, client_ip, self.port, client_port, h, key_len, value.size());
  return len;
}

void mark_forwarded(uint8_t* frame) {
  FrameHeader* h = header_of(frame);
  // status and flags form one 16-bit word of the checksummed data (payload offset 4: even).
  const uint16_t old_word = native16(&h->exo.status);
  h->eth.dst[0] = kPrefixForwarded;  // not checksummed
  h->exo.flags |= kForwarded;
  if (h->udp.checksum.get() == 0) return;  // none: nothing to keep valid
  // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), in native order like every sum here.
  const uint16_t hc = native16(h->udp.checksum.b);
  const uint64_t s = add16(add16(static_cast<uint16_t>(~hc), static_cast<uint16_t>(~old_word)),
                           native16(&h->exo.status));
  uint16_t c = static_cast<uint16_t>(~fold(s));
  if (c == 0) c = 0xffff;  // 0 would mean "no checksum"; 0xFFFF is the same sum
  std::memcpy(h->udp.checksum.b, &c, 2);
}

}  // namespace exo::wire
