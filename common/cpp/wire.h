// Exoskeleton data-plane frames: Ethernet + IPv4 + UDP + 20-byte header + key + value.
// Layout with byte offsets: docs/wire-format.md, and as a struct: wire_layout.h. Python twin:
// client-lib/exoskeleton/wire.py.
//
// Parsing never copies: FrameView points into the caller's buffer, which must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "keyhash.h"
#include "wire_layout.h"

namespace exo::wire {

inline constexpr uint16_t kMagic = 0x4558;  // "EX"
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kMaxKeyLen = 250;

enum Op : uint8_t { kGet = 0x01, kPut = 0x02, kDelete = 0x03, kReplyBit = 0x80 };
enum Status : uint8_t { kOk = 0, kNotFound = 1, kError = 2, kBadRequest = 3, kBusy = 4 };
// kForwarded is set only on requests (a GET a cache node forwards); no reply carries it.
enum Flags : uint8_t { kFromCache = 0x01, kForwarded = 0x02 };
// The DSCP the switch writes on every frame with prefix 0xAE that arrives on a cache node's port
// (docs/switch-rules.md, "Ingress hygiene"). A cache node forwards a miss with the client's own
// source addresses, so this mark is how a db node tells a forwarded GET from a client's forgery:
// the switch drops a client's frame with prefix 0xAE, and a db node refuses a GET with prefix
// 0xAE (or 0xBA, an older cache node's forward) or FORWARDED that lacks it. A codepoint of
// RFC 2474's local-use pool (xxxx11).
inline constexpr uint8_t kForwardedDscp = 0x2B;

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
  kIpChecksum,   // IPv4 header checksum wrong
  kUdpChecksum,  // non-zero UDP checksum wrong (0 means "none" and is accepted)
  // Not returned by parse(); screen() reports them:
  kOversize,    // longer than the node's largest frame (14 + mtu)
  kNotRequest,  // a reply where only requests may arrive
};
// The reason as one short phrase; the Python decoder raises MalformedFrame with the same text
// (proto/wire_vectors.json pins both).
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

// The DSCP of a parsed frame (top 6 bits of its IPv4 TOS byte).
inline uint8_t ip_dscp(const FrameView& v) { return header_of(v.eth_dst)->ip.tos >> 2; }

// Is the dst MAC one of ours (0xAA / 0xAE / 0xBA prefix)?
inline bool is_request_mac(const uint8_t* dst) {
  return dst[0] == kPrefixGet || dst[0] == kPrefixForwarded || dst[0] == kPrefixOther;
}

// Full validation of a frame, checksums included. Returns kNone and fills `out` on success.
ParseError parse(std::span<const uint8_t> frame, FrameView& out);

// ---- the one frame pre-filter of every node ----

// What a node does with a received frame (screen()).
enum class Screen : uint8_t {
  kIgnore,     // not Exoskeleton traffic for this node: not counted as malformed
  kMalformed,  // ours, but invalid: dropped and counted, never answered
  kRequest,    // a well-formed request; the FrameView is filled
};

struct ScreenPolicy {
  uint16_t udp_port = 7777;        // the cluster's udp_port
  size_t max_frame = 14 + 1500;    // 14 + the cluster's mtu: a longer frame of ours is malformed
  const uint8_t* self_mac = nullptr;  // frames from this MAC (our own, seen again) are ignored
};

// The pre-filter the cache node, the db node and every node the emulator hosts (through the db
// node's handler) run on each received frame, in this order:
//   ignore     shorter than an Ethernet header; dst MAC prefix not 0xAA, 0xAE or 0xBA; sent from
//              self_mac; or IPv4/UDP (no options) to a port other than udp_port (someone else's
//              traffic that happens to carry our prefix)
//   malformed  longer than max_frame; fails parse() (layout, lengths, IPv4 header checksum, a
//              non-zero UDP checksum); or a reply
//   request    everything else
// `why` (optional) receives the reason of a kMalformed.
Screen screen(std::span<const uint8_t> frame, const ScreenPolicy& policy, FrameView& view,
              ParseError* why = nullptr);

// ---- building ----

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

// Writes a whole frame into `out` (valid IPv4 header checksum, UDP checksum 0). Returns its
// length, or 0 if it does not fit.
size_t build(std::span<uint8_t> out, const uint8_t* eth_dst, const Addr& src, uint32_t ip_dst,
             uint16_t udp_dst, const Header& h, std::span<const uint8_t> key,
             std::span<const uint8_t> value);

// Writes the reply to `req` (from `self`) into `out`: dst = request's src MAC/IP/port,
// same client_id/seq/key, opcode | kReplyBit. Returns its length, or 0 if it does not fit.
// `out` may alias the request buffer (in-place reply): the key is moved with memmove.
size_t build_reply(std::span<uint8_t> out, const FrameView& req, const Addr& self, uint8_t status,
                   uint8_t flags, std::span<const uint8_t> value);

// Rewrites a GET request in place into the GET a cache node forwards: prefix 0xAE, FORWARDED
// set, and a non-zero UDP checksum updated for the changed flags byte (RFC 1624), so the db
// node's check still passes. The frame must have passed parse().
void mark_forwarded(uint8_t* frame);

// Largest key+value that fits a frame for this IP MTU.
inline constexpr size_t max_kv_bytes(size_t mtu) { return mtu - kIpLen - kUdpLen - kHdrLen; }

// ---- checksums (RFC 1071 one's-complement sums) ----

// The one's complement of the sum of this 20-byte IPv4 header, host order: the value to store
// when its checksum field is 0, and 0 for a valid header (like Python's wire.ip_checksum).
uint16_t ipv4_checksum(const uint8_t* hdr20);
// Does the 20-byte IPv4 header, checksum field included, sum to 0xFFFF?
bool ipv4_checksum_ok(const uint8_t* hdr20);
// The value to store in the UDP checksum field (its current content ignored) of a frame whose
// IPv4 header is 20 bytes and whose UDP length field says how many bytes follow; host order,
// never 0 (a computed 0 is sent as 0xFFFF, RFC 768). The caller has checked the lengths.
uint16_t udp_checksum(const uint8_t* frame);
// Is the UDP checksum of such a frame 0 (none) or correct?
bool udp_checksum_ok(const uint8_t* frame);
// Fills in the frame's UDP checksum (tests and vectors: a client may send one).
void set_udp_checksum(std::span<uint8_t> frame);

}  // namespace exo::wire
