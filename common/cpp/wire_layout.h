// The one definition of the frame layout in C++: Ethernet + IPv4 + UDP + Exoskeleton header as
// one packed struct, FrameHeader (62 bytes), with every offset static_asserted against the
// table in docs/wire-format.md and checked against proto/wire_vectors.json ("layout") by
// common/cpp/tests/wire_vectors_test.cc. The Python twin is the field list in
// client-lib/exoskeleton/wire.py.
//
// Every field is a byte or an array of bytes (multi-byte fields big-endian, read and written
// through Be16/Be32), so the struct has alignment 1 and no padding: it overlays any received
// buffer without unaligned loads, and its members are unsigned chars, which may alias anything.
// Code that reads or patches a field uses header_of(frame)->... instead of re-deriving the
// offset.
#pragma once

#include <cstddef>
#include <cstdint>

namespace exo::wire {

struct Be16 {
  uint8_t b[2];
  constexpr uint16_t get() const { return static_cast<uint16_t>(b[0] << 8 | b[1]); }
  constexpr void set(uint16_t v) {
    b[0] = static_cast<uint8_t>(v >> 8);
    b[1] = static_cast<uint8_t>(v);
  }
};

struct Be32 {
  uint8_t b[4];
  constexpr uint32_t get() const {
    return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3];
  }
  constexpr void set(uint32_t v) {
    b[0] = static_cast<uint8_t>(v >> 24);
    b[1] = static_cast<uint8_t>(v >> 16);
    b[2] = static_cast<uint8_t>(v >> 8);
    b[3] = static_cast<uint8_t>(v);
  }
};

struct EthHeader {
  uint8_t dst[6];  // request: prefix + 40-bit key hash; reply: the client's MAC
  uint8_t src[6];
  Be16 ethertype;
};

struct Ipv4Header {
  uint8_t version_ihl;  // 0x45: version 4, no options
  uint8_t tos;
  Be16 total_len;
  Be16 id;
  Be16 frag;  // flags + fragment offset: DF only
  uint8_t ttl;
  uint8_t protocol;
  Be16 checksum;  // over these 20 bytes
  Be32 src;
  Be32 dst;
};

struct UdpHeader {
  Be16 src_port;
  Be16 dst_port;
  Be16 length;    // UDP header + payload
  Be16 checksum;  // 0 = none (legal for IPv4); else over pseudo-header + UDP header + payload
};

struct ExoHeader {
  Be16 magic;
  uint8_t version;
  uint8_t opcode;
  uint8_t status;
  uint8_t flags;
  Be16 key_len;
  Be32 value_len;
  Be32 client_id;
  Be32 seq;
};

struct FrameHeader {
  EthHeader eth;
  Ipv4Header ip;
  UdpHeader udp;
  ExoHeader exo;
};

// The frame seen through the struct. The caller has checked the frame holds sizeof(FrameHeader)
// bytes, or touches only fields inside what it holds.
inline const FrameHeader* header_of(const uint8_t* frame) {
  return reinterpret_cast<const FrameHeader*>(frame);
}
inline FrameHeader* header_of(uint8_t* frame) { return reinterpret_cast<FrameHeader*>(frame); }

inline constexpr size_t kEthLen = sizeof(EthHeader);
inline constexpr size_t kIpLen = sizeof(Ipv4Header);
inline constexpr size_t kUdpLen = sizeof(UdpHeader);
inline constexpr size_t kHdrLen = sizeof(ExoHeader);
inline constexpr size_t kPayloadOffset = offsetof(FrameHeader, exo);  // the UDP payload
inline constexpr size_t kMinFrame = sizeof(FrameHeader);              // the key starts here

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint8_t kIpv4NoOptions = 0x45;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kDefaultTtl = 64;
inline constexpr uint16_t kIpDontFragment = 0x4000;

// Byte offsets of single fields in the frame, for the tests that check the layout against
// proto/wire_vectors.json and the docs.
namespace off {
inline constexpr size_t kEthDst = offsetof(FrameHeader, eth) + offsetof(EthHeader, dst);
inline constexpr size_t kEthSrc = offsetof(FrameHeader, eth) + offsetof(EthHeader, src);
inline constexpr size_t kEtherType = offsetof(FrameHeader, eth) + offsetof(EthHeader, ethertype);
inline constexpr size_t kIp = offsetof(FrameHeader, ip);
inline constexpr size_t kIpVersionIhl = kIp + offsetof(Ipv4Header, version_ihl);
inline constexpr size_t kIpTotalLen = kIp + offsetof(Ipv4Header, total_len);
inline constexpr size_t kIpId = kIp + offsetof(Ipv4Header, id);
inline constexpr size_t kIpFrag = kIp + offsetof(Ipv4Header, frag);
inline constexpr size_t kIpTtl = kIp + offsetof(Ipv4Header, ttl);
inline constexpr size_t kIpProtocol = kIp + offsetof(Ipv4Header, protocol);
inline constexpr size_t kIpChecksum = kIp + offsetof(Ipv4Header, checksum);
inline constexpr size_t kIpSrc = kIp + offsetof(Ipv4Header, src);
inline constexpr size_t kIpDst = kIp + offsetof(Ipv4Header, dst);
inline constexpr size_t kUdp = offsetof(FrameHeader, udp);
inline constexpr size_t kUdpSrc = kUdp + offsetof(UdpHeader, src_port);
inline constexpr size_t kUdpDst = kUdp + offsetof(UdpHeader, dst_port);
inline constexpr size_t kUdpLength = kUdp + offsetof(UdpHeader, length);
inline constexpr size_t kUdpChecksum = kUdp + offsetof(UdpHeader, checksum);
inline constexpr size_t kExo = offsetof(FrameHeader, exo);
inline constexpr size_t kMagic = kExo + offsetof(ExoHeader, magic);
inline constexpr size_t kVersion = kExo + offsetof(ExoHeader, version);
inline constexpr size_t kOpcode = kExo + offsetof(ExoHeader, opcode);
inline constexpr size_t kStatus = kExo + offsetof(ExoHeader, status);
inline constexpr size_t kFlags = kExo + offsetof(ExoHeader, flags);
inline constexpr size_t kKeyLen = kExo + offsetof(ExoHeader, key_len);
inline constexpr size_t kValueLen = kExo + offsetof(ExoHeader, value_len);
inline constexpr size_t kClientId = kExo + offsetof(ExoHeader, client_id);
inline constexpr size_t kSeq = kExo + offsetof(ExoHeader, seq);
inline constexpr size_t kKey = sizeof(FrameHeader);
}  // namespace off

// The table of docs/wire-format.md, byte for byte.
static_assert(alignof(FrameHeader) == 1, "overlays any buffer");
static_assert(sizeof(EthHeader) == 14 && sizeof(Ipv4Header) == 20 && sizeof(UdpHeader) == 8 &&
              sizeof(ExoHeader) == 20 && sizeof(FrameHeader) == 62, "no padding");
static_assert(off::kEthDst == 0 && off::kEthSrc == 6 && off::kEtherType == 12);
static_assert(off::kIp == 14 && off::kIpTotalLen == 16 && off::kIpProtocol == 23 &&
              off::kIpChecksum == 24 && off::kIpSrc == 26 && off::kIpDst == 30);
static_assert(off::kUdp == 34 && off::kUdpSrc == 34 && off::kUdpDst == 36 &&
              off::kUdpLength == 38 && off::kUdpChecksum == 40);
static_assert(off::kExo == 42 && off::kMagic == 42 && off::kVersion == 44 && off::kOpcode == 45 &&
              off::kStatus == 46 && off::kFlags == 47 && off::kKeyLen == 48 &&
              off::kValueLen == 50 && off::kClientId == 54 && off::kSeq == 58 && off::kKey == 62);

}  // namespace exo::wire
