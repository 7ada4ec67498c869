// Classifies every frame the RX socket delivers and books replies to our requests:
//   other      not for us: another MAC, not IPv4/UDP, or another UDP port (ARP, other clients'
//              generators on the same host, ...); ignored
//   malformed  to our MAC and port but fails wire::parse, or is not a reply
//   foreign    a well-formed reply carrying another client_id
//   unknown    our client_id, but a seq we never sent
//   late       our client_id and a seq sent so long ago that its ring slot was reused
//   duplicate  a second reply to an answered request (not counted again)
//   answered   the first reply to a request in the window: latency and status into the series
// Used by the RX thread only (counters are atomics so the main thread can read them live).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

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
  ReplyHandler(const Endpoint& self, uint32_t client_id, SendRing& ring, Series& series)
      : self_(self), client_id_(client_id), ring_(ring), series_(series) {}

  void handle(std::span<const uint8_t> frame, uint64_t recv_ns);

  RxCounters& counters() { return counters_; }
  const RxCounters& counters() const { return counters_; }

 private:
  bool to_our_port(std::span<const uint8_t> frame) const;

  Endpoint self_;
  uint32_t client_id_;
  SendRing& ring_;
  Series& series_;
  RxCounters counters_;
};

}  // namespace exo::loadgen
