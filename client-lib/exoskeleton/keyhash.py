"""The one key hash of the cluster: low 40 bits of XXH64(key, seed=0), the request MAC
prefixes, and the request IPv4 destination derived from the hash (request_ip). The one
definition of these in Python: the controller's switch rules (exo_controller.flows) and the
partition table (exo_common.partitions) import them from here.

The C++ twin is common/cpp/keyhash.h; both are checked against proto/wire_vectors.json.
"""
from __future__ import annotations

import xxhash

HASH_BITS = 40
HASH_MASK = (1 << HASH_BITS) - 1

PREFIX_GET = 0xAA    # GETs: may match Ruleset 2 (a cache node)
PREFIX_OTHER = 0xBA  # PUT/DELETE: Ruleset 3 only

# GETs a cache node forwards get their own prefix (docs/design/replication.md, 2.3), so the
# switch can send them to a slot's read server (tail) and writes to its head. 0xAE differs from
# 0xAA only in bit 2 (0x04), 0xBA only in bit 4 (0x10); 0xBE is never sent. The first-byte
# masks of Ruleset 3 (docs/switch-rules.md, "Request prefixes and masks"):
PREFIX_FORWARDED = 0xAE
PREFIX_ANY_MASK = 0xEB    # rf 1: one rule per slot matches AA, AE, BA (and the unused BE)
PREFIX_READ_MASK = 0xFB   # rf > 1 read rule: AA and AE -> the read server
PREFIX_WRITE_MASK = 0xFF  # rf > 1 write rule: BA only -> the head
# Every first byte a request of the cluster carries (C++ wire::is_request_mac).
REQUEST_PREFIXES = (PREFIX_GET, PREFIX_FORWARDED, PREFIX_OTHER)


def key_hash(key: bytes) -> int:
    """40-bit hash carried in the low 5 bytes of the destination MAC."""
    return xxhash.xxh64_intdigest(key, seed=0) & HASH_MASK


def request_mac(prefix: int, khash: int) -> bytes:
    """Destination MAC of a request: prefix byte + 40-bit hash, big-endian."""
    return bytes([prefix]) + (khash & HASH_MASK).to_bytes(5, "big")


# A request's IPv4 destination is the hash shifted right by this: its top 32 bits.
REQUEST_IP_SHIFT = HASH_BITS - 32


def request_ip(khash: int) -> bytes:
    """IPv4 destination of a request (4 bytes, network order): the top 32 bits of the 40-bit
    hash, so the IPv4 dst carries the hash too. Open vSwitch's classifier can wildcard IPv4
    address bits with its prefix tries (Flow_Table prefixes=ip_dst) but never MAC bits: with the
    hot-key rules matching this as an IPv4 /32, a GET that misses the cache costs OVS one
    datapath flow per ~2^14 keys instead of one per key (docs/wire-format.md). Nodes ignore it;
    replies go to the requester's IP. C++ twin: exo::request_ip in common/cpp/keyhash.h."""
    return ((khash & HASH_MASK) >> REQUEST_IP_SHIFT).to_bytes(4, "big")


def mac_str(mac: bytes) -> str:
    return ":".join(f"{b:02x}" for b in mac)


def mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return bytes(int(p, 16) for p in parts)
