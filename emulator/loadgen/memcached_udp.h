// memcached's UDP framing, for --protocol memcached (memcached's doc/protocol.txt, "UDP
// protocol"). Every datagram, request or reply, starts with an 8-byte frame header, then the
// ASCII protocol's text:
//   0  request id       u16 BE  chosen by the client, echoed in every datagram of the reply
//   2  sequence number  u16 BE  0 .. total - 1 within one message
//   4  total datagrams  u16 BE  of this message
//   6  reserved         u16 BE  0
// A request is Ethernet + IPv4 + UDP (the first 42 bytes of an exo frame, wire_layout.h), the
// header with request id = the low 16 bits of the generator's seq, and "get <key>\r\n" with the
// key the exo mode would ask for. Only 16 bits of the seq come back, so seq_for_request_id maps
// a reply to the most recent request that carried its id: a reply that comes back after 65,536
// newer requests were sent is taken for the newer one (the old request counts as lost; the
// options cap this mode's matching window at 65,536 requests, so the ring never holds both).
// memcached answers a GET in one datagram while the reply fits its 1,400-byte UDP payload;
// longer values come in several datagrams, which this generator counts as malformed (it does
// not reassemble them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "loadgen/request_builder.h"
#include "wire_layout.h"

namespace exo::loadgen {

inline constexpr uint16_t kMemcachedPort = 11211;  // memcached's default, --dst-port's default

struct McUdpHeader {
  wire::Be16 request_id;
  wire::Be16 seq;
  wire::Be16 total;
  wire::Be16 reserved;
};
static_assert(sizeof(McUdpHeader) == 8 && alignof(McUdpHeader) == 1);

inline constexpr size_t kMcHeaderLen = sizeof(McUdpHeader);
inline constexpr size_t kMcPayloadOffset = wire::kPayloadOffset;  // the UDP payload: 42
inline constexpr size_t kMcTextOffset = kMcPayloadOffset + kMcHeaderLen;
inline constexpr std::string_view kMcGet = "get ";
inline constexpr std::string_view kMcEol = "\r\n";
inline constexpr size_t kMcKeyOffset = kMcTextOffset + kMcGet.size();
static_assert(kMcPayloadOffset == 42 && kMcTextOffset == 50 && kMcKeyOffset == 54);

// Bytes of a GET request frame for a key of key_size bytes.
constexpr size_t mc_get_frame_len(size_t key_size) {
  return kMcKeyOffset + key_size + kMcEol.size();
}

// GET requests from one template, built once; per request the key bytes and the request id are
// patched. Every key has the same length, so the template's IPv4 total length and checksum hold
// for all; the UDP checksum is 0 (none), as in every sender of the project.
class MemcachedRequestBuilder final : public RequestWriter {
 public:
  // ep.dst_mac (fixed_dst_mac set), ep.service_ip and ep.udp_port are the server's. Throws
  // std::invalid_argument naming the option for a key size key_name cannot fill or a missing
  // destination MAC.
  MemcachedRequestBuilder(const Endpoint& ep, size_t key_size);

  size_t max_frame_len() const override { return tpl_.size(); }
  // Memcached mode sends GETs only: `put` is ignored (plan_run refuses --get-ratio < 1).
  size_t write(uint8_t* out, bool put, uint64_t key_id, uint32_t seq) const override;

 private:
  std::vector<uint8_t> tpl_;
  size_t key_size_;
};

// The request id a request with this seq carries.
constexpr uint16_t mc_request_id(uint32_t seq) { return static_cast<uint16_t>(seq); }

// The most recent of the `booked` consecutive seqs that end at `newest` whose low 16 bits are
// `request_id` (SendRing::newest gives both). False when none of them carried it: a request id
// this generator never sent.
bool seq_for_request_id(uint16_t request_id, uint32_t newest, uint64_t booked, uint32_t* seq);

// What a reply datagram says.
enum class McOutcome : uint8_t {
  kOk,         // VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n
  kNotFound,   // END\r\n
  kError,      // ERROR, CLIENT_ERROR ..., SERVER_ERROR ... (one line)
  kMalformed,  // anything else, a short header, or one datagram of several (total != 1)
};

struct McReply {
  McOutcome outcome = McOutcome::kMalformed;
  bool has_id = false;      // the 8-byte header was there
  uint16_t request_id = 0;  // valid when has_id
  std::span<const uint8_t> key, value;  // kOk only; point into the parsed buffer
};

// Parses one reply datagram's UDP payload (frame header + text). Reads only inside `payload`.
McReply parse_mc_reply(std::span<const uint8_t> payload);

// A received frame seen as a reply from the memcached server to our port.
enum class McFrame : uint8_t {
  kReply,      // IPv4/UDP from server_ip:server_port to our_port; *payload is its UDP payload
  kOther,      // not IPv4/UDP, a non-first fragment, to another port, or from someone else
  kMalformed,  // from the server to our port, but lengths or IPv4 header checksum are wrong, it
               // carries IPv4 options, or it is the first fragment of a datagram (memcached never
               // sends one: it splits long replies into datagrams that fit)
};

// Does not check the UDP checksum: the server's kernel may hand a veth peer a datagram whose
// checksum was left to offload, and AF_PACKET sees it unfinished. Reads only inside `frame`.
McFrame parse_mc_frame(std::span<const uint8_t> frame, uint16_t our_port, uint32_t server_ip,
                       uint16_t server_port, std::span<const uint8_t>* payload);

}  // namespace exo::loadgen
