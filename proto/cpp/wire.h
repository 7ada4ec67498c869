// Exoskeleton data-plane frames: Ethernet + IPv4 + UDP + 20-byte header + key + value.
// Layout with byte offsets: docs/wire-format.md. Python twin: client-lib/exoskeleton/wire.py.
//
// Parsing never copies: FrameView points into the caller's buffer, which must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "keyhash.h"

namespace exo::wire {

inline constexpr uint16_t kMagic = 0x4558;  // "EX"
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kEthLen = 14, kIpLen = 20, kUdpLen = 8, kHdrLen = 20;
inline constexpr size_t kPayloadOffset = kEthLen + kIpLen + kUdpLen;  // 42
inline constexpr size_t kMinFrame = kPayloadOffset + kHdrLen;         // 62
inline constexpr size_t kMaxKeyLen = 250;

enum Op : uint8_t { kGet = 0x01, kPut = 0x02, kDelete = 0x03, kReplyBit = 0x80 };
enum Status : uint8_t { kOk = 0, kNotFound = 1, kError = 2, kBadRequest = 3, kBusy = 4 };
enum Flags : uint8_t { kFromCache = 0x01, kForwarded = 0x02 };

enum class ParseError : uint8_t {
  kNone = 0,
  kShort,
  kNotIpv4,
  kIpOptions,
  kNotUdp,
  kIpLength,
  kUdpLength,
  kBadMagic,
  kBadVersion,
  kBadOpcode,
  kBadKeyLen,
  kKvOverflow,
};
const char* to_string(ParseError e);

struct FrameView {
  const uint8_t* eth_dst;
  const uint8_t* eth_src;
  uint32_t ip_src;  // host order
  uint32_t ip_dst;  // host order
  uint16_t udp_src;
  uint16_t udp_dst;
  uint8_t opcode;
  uint8_t status;
  uint8_t flags;
  uint32_t client_id;
  uint32_t seq;
  std::span<const uint8_t> key;
  std::span<const uint8_t> value;
  size_t frame_len;  // 14 + IPv4 total length (padding after it is ignored)

  bool is_reply() const { return opcode & kReplyBit; }
  uint8_t op() const { return opcode & ~kReplyBit; }
};

// Is the dst MAC one of ours (0xAA / 0xBA prefix)? Cheap pre-filter before parse().
inline bool is_request_mac(const uint8_t* dst) { return dst[0] == kPrefixGet || dst[0] == kPrefixOther; }

// Full validation of a frame. Returns kNone and fills `out` on success.
ParseError parse(std::span<const uint8_t> frame, FrameView& out);

struct Header {
  uint8_t opcode = 0;
  uint8_t status = 0;
  uint8_t flags = 0;
  uint32_t client_id = 0;
  uint32_t seq = 0;
};

struct Addr {
  const uint8_t* mac;  // 6 bytes
  uint32_t ip;         // host order
  uint16_t port;
};

// Writes a whole frame into `out`. Returns its length, or 0 if it does not fit.
size_t build(std::span<uint8_t> out, const uint8_t* eth_dst, const Addr& src, uint32_t ip_dst,
             uint16_t udp_dst, const Header& h, std::span<const uint8_t> key,
             std::span<const uint8_t> value);

// Writes the reply to `req` (from `self`) into `out`: dst = request's src MAC/IP/port,
// same client_id/seq/key, opcode | kReplyBit. Returns its length, or 0 if it does not fit.
// `out` may alias the request buffer (in-place reply): the key is moved with memmove.
size_t build_reply(std::span<uint8_t> out, const FrameView& req, const Addr& self, uint8_t status,
                   uint8_t flags, std::span<const uint8_t> value);

// Largest key+value that fits a frame for this IP MTU.
inline constexpr size_t max_kv_bytes(size_t mtu) { return mtu - kIpLen - kUdpLen - kHdrLen; }

uint16_t ipv4_checksum(const uint8_t* hdr20);

}  // namespace exo::wire
