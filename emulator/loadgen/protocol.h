// What kind of server exo-loadgen talks to (--protocol). The generator, pacing and latency code
// are the same for all three; only the request bytes and the reply match differ:
//   exo        an Exoskeleton cluster: requests to the key-hash MAC, exo replies (wire.h)
//   reflect    a MAC-swapping reflector (dpdk-testpmd --forward-mode=macswap): exo requests
//              that come back as themselves with the Ethernet addresses swapped
//   memcached  memcached 1.6 over UDP: "get <key>\r\n" behind memcached's 8-byte UDP frame
//              header (memcached_udp.h)
// A baseline for the cluster's numbers: the same client against a bare reflector and a
// well-known key-value server over the same link.
#pragma once

#include <optional>
#include <string_view>

namespace exo::loadgen {

enum class Protocol { kExo, kReflect, kMemcached };

inline const char* protocol_name(Protocol p) {
  switch (p) {
    case Protocol::kExo: return "exo";
    case Protocol::kReflect: return "reflect";
    case Protocol::kMemcached: return "memcached";
  }
  return "?";
}

inline std::optional<Protocol> parse_protocol(std::string_view s) {
  for (Protocol p : {Protocol::kExo, Protocol::kReflect, Protocol::kMemcached})
    if (s == protocol_name(p)) return p;
  return std::nullopt;
}

}  // namespace exo::loadgen
