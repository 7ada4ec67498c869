// Classifies every frame the RX socket delivers and books replies to our requests:
//   other      not for us: another MAC, not IPv4/UDP, or another UDP port (ARP, other clients'
//              generators on the same host, ...); ignored
//   malformed  to our MAC and port but fails wire::parse, or is not a reply
//   foreign    a well-formed reply carrying another client_id
//   unknown    our client_id, but a seq we never sent
//   late       our client_id and a seq sent so long ago that its ring slot was reused
//   duplicate  a second reply to an answered request (not counted again)
//   answered   the first reply to a request in the window: latency and status into the series
// That is --protocol exo. The other two protocols book through the same seq match:
//   reflect    the "reply" is our request reflected with its Ethernet addresses swapped
//              (dpdk-testpmd --forward-mode=macswap): to our MAC, from the MAC the request was
//              sent to, UDP src = our port, a well-formed request (not a reply; malformed
//              otherwise) with our client_id (else foreign); answered with status OK. A frame
//              that was not swapped is addressed to the key-hash MAC: other.
//   memcached  IPv4/UDP from the server's IP and port to our MAC and port (else other); lengths
//              and IPv4 checksum (parse_mc_frame) and the reply text (parse_mc_reply) or
//              malformed; the 16-bit request id mapped to a seq (seq_for_request_id; an id never
//              sent is unknown). VALUE = OK, END = not_found, an error line = errors.
// Used by the RX thread only (counters are atomics so the main thread can read them live).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "loadgen/protocol.h"
#include "loadgen/request_builder.h"
#include "loadgen/send_ring.h"
#include "loadgen/series.h"

namespace exo::loadgen {

struct RxCounters {
  std::atomic<uint64_t> frames{0}, answered{0}, duplicates{0}, late{0}, unknown{0}, foreign{0},
      malformed{0}, other{0}, errors{0};
};

class ReplyHandler {
 public:
  // self: our requests' endpoint (their source is ours; for memcached, service_ip and udp_port
  // are the server's).
  ReplyHandler(const Endpoint& self, uint32_t client_id, SendRing& ring, Series& series,
               Protocol protocol = Protocol::kExo)
      : self_(self), client_id_(client_id), ring_(ring), series_(series), protocol_(protocol) {}

  void handle(std::span<const uint8_t> frame, uint64_t recv_ns);

  RxCounters& counters() { return counters_; }
  const RxCounters& counters() const { return counters_; }

 private:
  void handle_exo(std::span<const uint8_t> frame, uint64_t recv_ns);
  void handle_reflected(std::span<const uint8_t> frame, uint64_t recv_ns);
  void handle_memcached(std::span<const uint8_t> frame, uint64_t recv_ns);
  // Books the reply to `seq`: answered (into the series), duplicate, late or unknown.
  void book(uint32_t seq, uint64_t recv_ns, uint8_t status, uint8_t flags);
  // Is the frame IPv4/UDP with our port as its destination (exo) or source (reflect) port?
  bool to_our_port(std::span<const uint8_t> frame, bool as_source = false) const;

  Endpoint self_;
  uint32_t client_id_;
  SendRing& ring_;
  Series& series_;
  Protocol protocol_;
  RxCounters counters_;
};

}  // namespace exo::loadgen
