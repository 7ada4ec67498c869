// Request frames for the TX loop, built once by the project's encoder (wire::build) as a GET
// and a PUT template; per request only the parts that change are patched: the key bytes, the
// destination MAC (prefix + 40-bit key hash), the IPv4 destination (request_ip: the hash's top
// 32 bits) and the seq, through wire::FrameHeader. Every key has the same length, so the IPv4
// total length of a template holds for every request built from it; the IPv4 header checksum is
// recomputed after the destination is patched (20 bytes, wire::ipv4_checksum); the UDP checksum
// is 0 (none), so the key, seq and addresses need none.
// With a fixed destination MAC (--dst-mac) the MAC and the IPv4 destination (service_ip) are
// part of the template and not patched; a fixed IPv4 destination alone (--dst-ip) keeps the IP
// and patches the MAC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "keyhash.h"

namespace exo::loadgen {

// Where requests come from and go to (docs/wire-format.md).
struct Endpoint {
  Mac mac{};                // the client's MAC (Ethernet src)
  uint32_t ip = 0;          // the client's IP, host order
  uint16_t src_port = 0;    // UDP src port: replies come back to it
  // IPv4 dst of every request (host order) when it is fixed (fixed_dst_ip or fixed_dst_mac);
  // else each request's is request_ip(key hash) (docs/wire-format.md) and this is unused.
  uint32_t service_ip = 0;
  uint16_t udp_port = 0;    // UDP dst port of every request
  // --dst-mac: every request goes to dst_mac instead of prefix + key hash (a reflector or a
  // memcached server has one MAC; memcached mode always sets it), and to service_ip.
  bool fixed_dst_mac = false;
  Mac dst_mac{};
  // --dst-ip: every request goes to service_ip instead of request_ip(key hash).
  bool fixed_dst_ip = false;

  bool ip_dst_fixed() const { return fixed_dst_mac || fixed_dst_ip; }
};

// What the TX loop needs from a request format (exo: RequestBuilder; memcached:
// MemcachedRequestBuilder in memcached_udp.h). One virtual call per request: a few ns against
// the microseconds of a sendmmsg slot.
class RequestWriter {
 public:
  virtual ~RequestWriter() = default;
  // The largest frame write() produces (the TX loop's buffer stride).
  virtual size_t max_frame_len() const = 0;
  // Writes the GET (put = false) or PUT request for key id `key_id` with `seq` into `out`,
  // which must hold max_frame_len() bytes. Returns the frame length.
  virtual size_t write(uint8_t* out, bool put, uint64_t key_id, uint32_t seq) const = 0;
};

class RequestBuilder final : public RequestWriter {
 public:
  // Throws std::invalid_argument naming the option when a frame would not fit 14 + mtu bytes
  // or key_size is outside what key_name and the wire format allow.
  RequestBuilder(const Endpoint& ep, uint32_t client_id, size_t key_size, size_t value_size,
                 size_t mtu);

  size_t frame_len(bool put) const { return put ? put_.size() : get_.size(); }
  size_t max_frame_len() const override { return put_.size(); }
  size_t key_size() const { return key_size_; }

  // Writes the GET (put = false) or PUT request for key id `key_id` with `seq` into `out`,
  // which must hold frame_len(put) bytes. Returns the frame length.
  size_t write(uint8_t* out, bool put, uint64_t key_id, uint32_t seq) const override;

 private:
  std::vector<uint8_t> get_;
  std::vector<uint8_t> put_;
  size_t key_size_;
  bool fixed_dst_mac_;
  bool fixed_dst_ip_;
};

}  // namespace exo::loadgen
