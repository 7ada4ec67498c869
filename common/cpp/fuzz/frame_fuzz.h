// Shared by the frame fuzz targets (wire_parse_fuzz, the cache node's request_handler_fuzz, the
// db node's db_request_handler_fuzz, the emulator's emulator_fuzz).
//
// Every node verifies the IPv4 header checksum and a non-zero UDP checksum (wire::screen), so
// a mutated frame would almost never get past them and the fuzzer would no longer reach the
// parser's later checks and the handlers. repair_checksums() fills them in, unless the frame's
// IPv4 identification field has its low bit set: the project's encoders write 0 there, so the
// seed frames are repaired, and a mutation of that bit keeps the checksums as fuzzed and
// exercises their rejection.
#pragma once

#include <cstdint>
#include <span>

#include "wire.h"

namespace exo::fuzz {

inline void repair_checksums(std::span<uint8_t> f) {
  namespace w = exo::wire;
  if (f.size() < w::off::kUdp) return;  // no whole IPv4 header
  w::FrameHeader* h = w::header_of(f.data());
  if (h->ip.id.get() & 1) return;
  h->ip.checksum.set(0);
  h->ip.checksum.set(w::ipv4_checksum(f.data() + w::off::kIp));
  if (f.size() < w::off::kUdpChecksum + 2 || h->udp.checksum.get() == 0) return;
  // udp_checksum() sums the UDP length's bytes: only when they are all in the frame.
  if (h->udp.length.get() < w::kUdpLen || h->udp.length.get() > f.size() - w::off::kUdp) return;
  w::set_udp_checksum(f);
}

}  // namespace exo::fuzz
