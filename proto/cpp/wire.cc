#include "wire.h"

#include <cstring>

namespace exo::wire {
namespace {

inline uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t rd32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline void wr16(uint8_t* p, uint16_t v) {
  p[0] = v >> 8;
  p[1] = v & 0xff;
}
inline void wr32(uint8_t* p, uint32_t v) {
  p[0] = v >> 24;
  p[1] = (v >> 16) & 0xff;
  p[2] = (v >> 8) & 0xff;
  p[3] = v & 0xff;
}

// Fills bytes 12..61 (EtherType, IPv4, UDP, header) for a payload of `kv` key+value bytes.
void write_headers(uint8_t* f, uint32_t ip_src, uint32_t ip_dst, uint16_t sport, uint16_t dport,
                   const Header& h, size_t key_len, size_t value_len) {
  const size_t udp_len = kUdpLen + kHdrLen + key_len + value_len;
  f[12] = 0x08;
  f[13] = 0x00;
  uint8_t* ip = f + kEthLen;
  ip[0] = 0x45;
  ip[1] = 0;
  wr16(ip + 2, static_cast<uint16_t>(kIpLen + udp_len));
  wr16(ip + 4, 0);       // identification
  wr16(ip + 6, 0x4000);  // DF
  ip[8] = 64;
  ip[9] = 17;
  wr16(ip + 10, 0);
  wr32(ip + 12, ip_src);
  wr32(ip + 16, ip_dst);
  wr16(ip + 10, ipv4_checksum(ip));
  uint8_t* udp = ip + kIpLen;
  wr16(udp, sport);
  wr16(udp + 2, dport);
  wr16(udp + 4, static_cast<uint16_t>(udp_len));
  wr16(udp + 6, 0);  // no checksum (legal for IPv4)
  uint8_t* p = udp + kUdpLen;
  wr16(p, kMagic);
  p[2] = kVersion;
  p[3] = h.opcode;
  p[4] = h.status;
  p[5] = h.flags;
  wr16(p + 6, static_cast<uint16_t>(key_len));
  wr32(p + 8, static_cast<uint32_t>(value_len));
  wr32(p + 12, h.client_id);
  wr32(p + 16, h.seq);
}

}  // namespace

const char* to_string(ParseError e) {
  switch (e) {
    case ParseError::kNone: return "ok";
    case ParseError::kShort: return "short frame";
    case ParseError::kNotIpv4: return "not IPv4";
    case ParseError::kIpOptions: return "IPv4 IHL is not 5";
    case ParseError::kNotUdp: return "not UDP";
    case ParseError::kIpLength: return "IPv4 total length exceeds frame";
    case ParseError::kUdpLength: return "UDP length disagrees with IPv4 length";
    case ParseError::kBadMagic: return "bad magic";
    case ParseError::kBadVersion: return "bad version";
    case ParseError::kBadOpcode: return "unknown opcode";
    case ParseError::kBadKeyLen: return "bad key length";
    case ParseError::kKvOverflow: return "key/value exceed payload";
  }
  return "?";
}

uint16_t ipv4_checksum(const uint8_t* hdr) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += rd16(hdr + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

ParseError parse(std::span<const uint8_t> frame, FrameView& out) {
  const uint8_t* f = frame.data();
  const size_t n = frame.size();
  if (n < kMinFrame) return ParseError::kShort;
  if (f[12] != 0x08 || f[13] != 0x00) return ParseError::kNotIpv4;
  const uint8_t* ip = f + kEthLen;
  if (ip[0] != 0x45) return ParseError::kIpOptions;
  if (ip[9] != 17) return ParseError::kNotUdp;
  const size_t ip_total = rd16(ip + 2);
  if (ip_total < kIpLen + kUdpLen + kHdrLen || kEthLen + ip_total > n) return ParseError::kIpLength;
  const uint8_t* udp = ip + kIpLen;
  if (rd16(udp + 4) != ip_total - kIpLen) return ParseError::kUdpLength;
  const uint8_t* p = udp + kUdpLen;
  if (rd16(p) != kMagic) return ParseError::kBadMagic;
  if (p[2] != kVersion) return ParseError::kBadVersion;
  const uint8_t op = p[3] & ~kReplyBit;
  if (op != kGet && op != kPut && op != kDelete) return ParseError::kBadOpcode;
  const size_t key_len = rd16(p + 6);
  if (key_len == 0 || key_len > kMaxKeyLen) return ParseError::kBadKeyLen;
  const size_t value_len = rd32(p + 8);
  const size_t payload_len = ip_total - kIpLen - kUdpLen;
  if (value_len > payload_len || kHdrLen + key_len + value_len > payload_len) return ParseError::kKvOverflow;

  out.eth_dst = f;
  out.eth_src = f + 6;
  out.ip_src = rd32(ip + 12);
  out.ip_dst = rd32(ip + 16);
  out.udp_src = rd16(udp);
  out.udp_dst = rd16(udp + 2);
  out.opcode = p[3];
  out.status = p[4];
  out.flags = p[5];
  out.client_id = rd32(p + 12);
  out.seq = rd32(p + 16);
  out.key = std::span<const uint8_t>(p + kHdrLen, key_len);
  out.value = std::span<const uint8_t>(p + kHdrLen + key_len, value_len);
  out.frame_len = kEthLen + ip_total;
  return ParseError::kNone;
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
  std::memcpy(f, eth_dst, 6);
  std::memcpy(f + 6, src.mac, 6);
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
  std::memcpy(f, client_mac, 6);
  std::memcpy(f + 6, self.mac, 6);
  write_headers(f, self.ip, client_ip, self.port, client_port, h, key_len, value.size());
  return len;
}

}  // namespace exo::wire
