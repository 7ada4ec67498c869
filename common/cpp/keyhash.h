// The one key hash of the cluster: low 40 bits of XXH64(key, seed=0).
// Python twin: client-lib/exoskeleton/keyhash.py; vectors: proto/wire_vectors.json.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include <xxhash.h>

namespace exo {

inline constexpr int kHashBits = 40;
inline constexpr uint64_t kHashMask = (uint64_t{1} << kHashBits) - 1;
inline constexpr uint8_t kPrefixGet = 0xAA;        // GETs: may match Ruleset 2 (cache)
inline constexpr uint8_t kPrefixOther = 0xBA;      // PUT/DELETE: Ruleset 3 only
inline constexpr uint8_t kPrefixForwarded = 0xAE;  // GETs a cache node forwards: Ruleset 3 only
// First-byte masks of the Ruleset 3 rules (docs/switch-rules.md, "Request prefixes and masks").
// 0xAA, 0xAE, 0xBA differ in bits 2 (0x04) and 4 (0x10) only; 0xBE is never sent.
inline constexpr uint8_t kPrefixAnyMask = 0xEB;    // rf 1: AA, AE, BA (and BE) -> the owner
inline constexpr uint8_t kPrefixReadMask = 0xFB;   // rf > 1: AA, AE -> the read server (tail)
inline constexpr uint8_t kPrefixWriteMask = 0xFF;  // rf > 1: BA -> the head

using Mac = std::array<uint8_t, 6>;

inline uint64_t key_hash(std::span<const uint8_t> key) {
  return XXH64(key.data(), key.size(), 0) & kHashMask;
}

inline Mac request_mac(uint8_t prefix, uint64_t hash40) {
  Mac m{};
  m[0] = prefix;
  for (int i = 0; i < 5; ++i) m[1 + i] = static_cast<uint8_t>(hash40 >> (8 * (4 - i)));
  return m;
}

// IPv4 destination of every request (host order; written big-endian like any address): the top
// 32 bits of the 40-bit key hash, so the IPv4 dst carries the hash too, not a fixed service
// address. Open vSwitch's classifier can wildcard IPv4 address bits with its prefix tries
// (Flow_Table prefixes=ip_dst) but never MAC bits: with the hot-key rules matching this as an
// IPv4 /32, a GET that misses the cache costs OVS one datapath flow per ~2^14 keys instead of
// one per key (docs/wire-format.md, docs/switch-rules.md). Nodes ignore it; replies go to the
// requester's IP. Python twin: keyhash.request_ip.
inline uint32_t request_ip(uint64_t hash40) { return static_cast<uint32_t>((hash40 & kHashMask) >> 8); }

// The 40-bit hash carried in bytes 1..5 of a request's destination MAC.
inline uint64_t hash_from_mac(const uint8_t* mac) {
  uint64_t h = 0;
  for (int i = 1; i < 6; ++i) h = (h << 8) | mac[i];
  return h;
}

}  // namespace exo
