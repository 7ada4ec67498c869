"""Encode and decode Exoskeleton frames (layout: docs/wire-format.md).

Pure functions over bytes; no sockets here. The C++ twin is proto/cpp/wire.{h,cc}.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .keyhash import PREFIX_GET, PREFIX_OTHER, key_hash, request_mac

MAGIC = 0x4558
VERSION = 1

OP_GET, OP_PUT, OP_DELETE = 0x01, 0x02, 0x03
OP_REPLY = 0x80
OPCODES = (OP_GET, OP_PUT, OP_DELETE)

ST_OK, ST_NOT_FOUND, ST_ERROR, ST_BAD_REQUEST, ST_BUSY = 0, 1, 2, 3, 4

FLAG_FROM_CACHE = 0x01
FLAG_FORWARDED = 0x02

MAX_KEY_LEN = 250
ETH_LEN, IP_LEN, UDP_LEN, HDR_LEN = 14, 20, 8, 20
PAYLOAD_OFFSET = ETH_LEN + IP_LEN + UDP_LEN  # 42
MIN_FRAME = PAYLOAD_OFFSET + HDR_LEN  # 62

_HDR = struct.Struct("!HBBBBHIII")  # magic ver op status flags key_len value_len client_id seq
_UDP = struct.Struct("!HHHH")


class MalformedFrame(ValueError):
    """The bytes are not a well-formed Exoskeleton frame (reason in the message)."""


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


def ip_checksum(header: bytes) -> int:
    total = 0
    for i in range(0, len(header), 2):
        total += (header[i] << 8) | header[i + 1]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


def encode_payload(msg: Message) -> bytes:
    return _HDR.pack(MAGIC, VERSION, msg.opcode, msg.status, msg.flags, len(msg.key),
                     len(msg.value), msg.client_id, msg.seq) + msg.key + msg.value


def encode_frame(eth_dst: bytes, eth_src: bytes, ip_src: bytes, ip_dst: bytes,
                 udp_src: int, udp_dst: int, msg: Message) -> bytes:
    payload = encode_payload(msg)
    udp_len = UDP_LEN + len(payload)
    ip_total = IP_LEN + udp_len
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_total, 0, 0x4000, 64, 17, 0,
                               ip_src, ip_dst))
    struct.pack_into("!H", ip, 10, ip_checksum(bytes(ip)))
    udp = _UDP.pack(udp_src, udp_dst, udp_len, 0)
    return eth_dst + eth_src + b"\x08\x00" + bytes(ip) + udp + payload


def request_dst_mac(opcode: int, key: bytes) -> bytes:
    return request_mac(PREFIX_GET if opcode == OP_GET else PREFIX_OTHER, key_hash(key))


def decode_frame(frame: bytes) -> Frame:
    """Parse and validate a whole frame; raise MalformedFrame with the reason."""
    if len(frame) < MIN_FRAME:
        raise MalformedFrame("short frame")
    if frame[12:14] != b"\x08\x00":
        raise MalformedFrame("not IPv4")
    if frame[14] != 0x45:
        raise MalformedFrame("IPv4 IHL is not 5")
    if frame[23] != 17:
        raise MalformedFrame("not UDP")
    ip_total = struct.unpack_from("!H", frame, 16)[0]
    if ETH_LEN + ip_total > len(frame):
        raise MalformedFrame("IPv4 total length exceeds frame")
    udp_src, udp_dst, udp_len, _ = _UDP.unpack_from(frame, 34)
    if udp_len != ip_total - IP_LEN:
        raise MalformedFrame("UDP length disagrees with IPv4 length")
    msg = decode_payload(frame[PAYLOAD_OFFSET:ETH_LEN + ip_total])
    return Frame(frame[0:6], frame[6:12], frame[26:30], frame[30:34], udp_src, udp_dst, msg)


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
