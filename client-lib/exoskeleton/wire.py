"""Encode and decode Exoskeleton frames (layout: docs/wire-format.md).

Pure functions over bytes; no sockets here. The C++ twin is common/cpp/wire.{h,cc} with the
layout as one struct in common/cpp/wire_layout.h; both are checked against
proto/wire_vectors.json ("layout", "constants", frames, malformed frames with their reason).
"""
from __future__ import annotations

import struct
from collections import namedtuple
from dataclasses import dataclass

from .keyhash import PREFIX_GET, PREFIX_OTHER, key_hash, request_ip, request_mac

MAGIC = 0x4558
VERSION = 1

OP_GET, OP_PUT, OP_DELETE = 0x01, 0x02, 0x03
OP_REPLY = 0x80
OPCODES = (OP_GET, OP_PUT, OP_DELETE)

ST_OK, ST_NOT_FOUND, ST_ERROR, ST_BAD_REQUEST, ST_BUSY = 0, 1, 2, 3, 4

FLAG_FROM_CACHE = 0x01
FLAG_FORWARDED = 0x02  # requests only: a GET a cache node forwarded; no reply carries it
# The DSCP the switch writes on frames with prefix 0xAE from a cache node's port; a db node
# serves a GET with prefix 0xAE (or 0xBA) or FORWARDED only with it (C++ wire::kForwardedDscp).
FORWARDED_DSCP = 0x2B

MAX_KEY_LEN = 250

ETHERTYPE_IPV4 = 0x0800
IPV4_NO_OPTIONS = 0x45
IP_PROTO_UDP = 17
IP_TTL = 64
IP_DONT_FRAGMENT = 0x4000

# The one definition of the frame layout in Python: every field of the 62-byte header in frame
# order, as (name, struct code). Offsets, sizes and the header struct are computed from it.
_FIELDS = (
    ("eth_dst", "6s"), ("eth_src", "6s"), ("ethertype", "H"),
    ("ip_version_ihl", "B"), ("ip_tos", "B"), ("ip_total_len", "H"), ("ip_id", "H"),
    ("ip_frag", "H"), ("ip_ttl", "B"), ("ip_protocol", "B"), ("ip_checksum", "H"),
    ("ip_src", "4s"), ("ip_dst", "4s"),
    ("udp_src", "H"), ("udp_dst", "H"), ("udp_length", "H"), ("udp_checksum", "H"),
    ("magic", "H"), ("version", "B"), ("opcode", "B"), ("status", "B"), ("flags", "B"),
    ("key_len", "H"), ("value_len", "I"), ("client_id", "I"), ("seq", "I"),
)
HEADER = struct.Struct("!" + "".join(code for _, code in _FIELDS))
Header = namedtuple("Header", [name for name, _ in _FIELDS])  # HEADER unpacked, by field name
# field name -> (offset in the frame, size in bytes); "key" is where the key starts.
LAYOUT: dict[str, tuple[int, int]] = {}
_at = 0
for _name, _code in _FIELDS:
    LAYOUT[_name] = (_at, struct.calcsize("!" + _code))
    _at += LAYOUT[_name][1]
LAYOUT["key"] = (_at, 0)
del _at, _name, _code
OFFSET = {name: at for name, (at, _) in LAYOUT.items()}

ETH_LEN = OFFSET["ip_version_ihl"]  # 14
IP_LEN = OFFSET["udp_src"] - ETH_LEN  # 20
UDP_LEN = OFFSET["magic"] - OFFSET["udp_src"]  # 8
PAYLOAD_OFFSET = OFFSET["magic"]  # 42
MIN_FRAME = HEADER.size  # 62
HDR_LEN = MIN_FRAME - PAYLOAD_OFFSET  # 20

_HDR = struct.Struct("!HBBBBHIII")  # the Exoskeleton header alone (a UDP payload)
assert _HDR.size == HDR_LEN and OFFSET["key"] == MIN_FRAME


class MalformedFrame(ValueError):
    """The bytes are not a well-formed Exoskeleton frame (reason in the message, the same text
    as the C++ parser's to_string(ParseError))."""


def max_kv_bytes(mtu: int) -> int:
    """Key + value bytes that fit one frame at this MTU."""
    return mtu - IP_LEN - UDP_LEN - HDR_LEN


@dataclass(frozen=True)
class Message:
    opcode: int
    status: int
    flags: int
    client_id: int
    seq: int
    key: bytes
    value: bytes = b""

    @property
    def is_reply(self) -> bool:
        return bool(self.opcode & OP_REPLY)


@dataclass(frozen=True)
class Frame:
    eth_dst: bytes
    eth_src: bytes
    ip_src: bytes
    ip_dst: bytes
    udp_src: int
    udp_dst: int
    msg: Message


def _ones_sum(data: bytes) -> int:
    """RFC 1071 one's-complement sum of big-endian 16-bit words (odd tail padded), folded."""
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def ip_checksum(header: bytes) -> int:
    """The checksum of a 20-byte IPv4 header whose checksum field is 0 (or, for a whole header,
    0 when the header is valid)."""
    return (~_ones_sum(header)) & 0xFFFF


def _udp_sum(frame: bytes) -> int:
    """Pseudo-header + UDP header + payload of a frame with a 20-byte IPv4 header."""
    udp_at = OFFSET["udp_src"]
    udp_len = struct.unpack_from("!H", frame, OFFSET["udp_length"])[0]
    src = OFFSET["ip_src"]
    pseudo = bytes(frame[src:src + 8]) + struct.pack("!BBH", 0, IP_PROTO_UDP, udp_len)
    return _ones_sum(pseudo + bytes(frame[udp_at:udp_at + udp_len]))


def udp_checksum(frame: bytes) -> int:
    """The UDP checksum to store in `frame` (its udp_checksum field must be 0); never 0."""
    return ((~_udp_sum(frame)) & 0xFFFF) or 0xFFFF


def encode_payload(msg: Message) -> bytes:
    return _HDR.pack(MAGIC, VERSION, msg.opcode, msg.status, msg.flags, len(msg.key),
                     len(msg.value), msg.client_id, msg.seq) + msg.key + msg.value


def encode_frame(eth_dst: bytes, eth_src: bytes, ip_src: bytes, ip_dst: bytes,
                 udp_src: int, udp_dst: int, msg: Message, *, with_udp_checksum: bool = False) -> bytes:
    """A whole frame with a valid IPv4 header checksum and UDP checksum 0 ("none", what every
    sender of the project sends), or a computed UDP checksum with with_udp_checksum=True."""
    udp_len = UDP_LEN + HDR_LEN + len(msg.key) + len(msg.value)
    frame = bytearray(HEADER.pack(
        eth_dst, eth_src, ETHERTYPE_IPV4,
        IPV4_NO_OPTIONS, 0, IP_LEN + udp_len, 0, IP_DONT_FRAGMENT, IP_TTL, IP_PROTO_UDP, 0,
        ip_src, ip_dst,
        udp_src, udp_dst, udp_len, 0,
        MAGIC, VERSION, msg.opcode, msg.status, msg.flags, len(msg.key), len(msg.value),
        msg.client_id, msg.seq) + msg.key + msg.value)
    ip_at = OFFSET["ip_version_ihl"]
    struct.pack_into("!H", frame, OFFSET["ip_checksum"], ip_checksum(bytes(frame[ip_at:ip_at + IP_LEN])))
    if with_udp_checksum:
        struct.pack_into("!H", frame, OFFSET["udp_checksum"], udp_checksum(frame))
    return bytes(frame)


def request_dst_mac(opcode: int, key: bytes) -> bytes:
    return request_mac(PREFIX_GET if opcode == OP_GET else PREFIX_OTHER, key_hash(key))


def request_dst_ip(key: bytes) -> bytes:
    """IPv4 destination of a request for `key`: keyhash.request_ip of its hash."""
    return request_ip(key_hash(key))


def decode_frame(frame: bytes) -> Frame:
    """Parse and validate a whole frame, checksums included (a UDP checksum of 0 means none);
    raise MalformedFrame with the reason. Same checks in the same order as wire::parse."""
    if len(frame) < MIN_FRAME:
        raise MalformedFrame("short frame")
    h = Header._make(HEADER.unpack_from(frame, 0))
    if h.ethertype != ETHERTYPE_IPV4:
        raise MalformedFrame("not IPv4")
    if h.ip_version_ihl != IPV4_NO_OPTIONS:
        raise MalformedFrame("IPv4 IHL is not 5")
    if h.ip_protocol != IP_PROTO_UDP:
        raise MalformedFrame("not UDP")
    ip_at = OFFSET["ip_version_ihl"]
    if _ones_sum(bytes(frame[ip_at:ip_at + IP_LEN])) != 0xFFFF:
        raise MalformedFrame("bad IPv4 header checksum")
    ip_total = h.ip_total_len
    if ip_total < IP_LEN + UDP_LEN + HDR_LEN or ETH_LEN + ip_total > len(frame):
        raise MalformedFrame("IPv4 total length disagrees with frame")
    if h.udp_length != ip_total - IP_LEN:
        raise MalformedFrame("UDP length disagrees with IPv4 length")
    if h.udp_checksum != 0 and _udp_sum(frame) != 0xFFFF:
        raise MalformedFrame("bad UDP checksum")
    msg = decode_payload(frame[PAYLOAD_OFFSET:ETH_LEN + ip_total])
    return Frame(h.eth_dst, h.eth_src, h.ip_src, h.ip_dst, h.udp_src, h.udp_dst, msg)


def decode_payload(payload: bytes) -> Message:
    if len(payload) < HDR_LEN:
        raise MalformedFrame("short header")
    magic, ver, op, status, flags, klen, vlen, cid, seq = _HDR.unpack_from(payload, 0)
    if magic != MAGIC:
        raise MalformedFrame("bad magic")
    if ver != VERSION:
        raise MalformedFrame("bad version")
    if (op & ~OP_REPLY) not in OPCODES:
        raise MalformedFrame("unknown opcode")
    if klen == 0 or klen > MAX_KEY_LEN:
        raise MalformedFrame("bad key length")
    if HDR_LEN + klen + vlen > len(payload):
        raise MalformedFrame("key/value exceed payload")
    key = bytes(payload[HDR_LEN:HDR_LEN + klen])
    value = bytes(payload[HDR_LEN + klen:HDR_LEN + klen + vlen])
    return Message(op, status, flags, cid, seq, key, value)
