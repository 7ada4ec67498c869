#!/usr/bin/env python3
"""Regenerate proto/wire_vectors.json from the Python implementation.

The file is committed: it is the contract both implementations are tested against
(tests/unit/test_wire_vectors.py and common/cpp/tests/wire_vectors_test.cc). Only rerun this
when the wire format changes on purpose, and review the diff.

It holds: the constants (key-hash width, prefixes, Ruleset 3's first-byte masks, magic, opcodes,
flags) and the byte layout of the 62-byte header, which each language defines once and checks
against this file; key-hash vectors (hash, request MACs of the three prefixes, request IPv4
destination); good frames (requests to their key's
request_ip, replies to the client's IP) (one with a computed UDP checksum, one whose computed checksum is 0 and is
sent as 0xFFFF); malformed frames, each with the reason both parsers must give; and GETs
before and after a cache node's forward rewrite.
"""
import json
import pathlib
import struct
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "client-lib"))
from exoskeleton import keyhash, wire  # noqa: E402
from exoskeleton.keyhash import (PREFIX_FORWARDED, PREFIX_GET, PREFIX_OTHER, key_hash, mac_str,  # noqa: E402
                                 request_ip, request_mac)

KEYS = [b"a", b"key:0", b"user:12345", b"\x00\xff\x10", b"x" * 250, "ключ".encode()]

CLIENT_MAC = bytes.fromhex("020000000301")
NODE_MAC = bytes.fromhex("020000000201")
CLIENT_IP = bytes([10, 0, 3, 1])
NODE_IP = bytes([10, 0, 2, 1])
PORT = 7777
IP_AT = wire.OFFSET["ip_version_ihl"]


def frame_vector(name, eth_dst, eth_src, ip_src, ip_dst, sport, dport, msg, udp_checksum=False):
    raw = wire.encode_frame(eth_dst, eth_src, ip_src, ip_dst, sport, dport, msg,
                            with_udp_checksum=udp_checksum)
    return {
        "name": name, "eth_dst": mac_str(eth_dst), "eth_src": mac_str(eth_src),
        "ip_src": ip_str(ip_src), "ip_dst": ip_str(ip_dst),
        "udp_src": sport, "udp_dst": dport, "opcode": msg.opcode, "status": msg.status,
        "flags": msg.flags, "client_id": msg.client_id, "seq": msg.seq,
        "key_hex": msg.key.hex(), "value_hex": msg.value.hex(), "udp_checksum": udp_checksum,
        "frame_hex": raw.hex(),
    }


def with_ip_checksum(frame: bytearray) -> bytearray:
    """The frame with its IPv4 header checksum recomputed (after a patch to the header)."""
    struct.pack_into("!H", frame, wire.OFFSET["ip_checksum"], 0)
    struct.pack_into("!H", frame, wire.OFFSET["ip_checksum"],
                     wire.ip_checksum(bytes(frame[IP_AT:IP_AT + wire.IP_LEN])))
    return frame


def with_udp_checksum(frame: bytearray) -> bytearray:
    struct.pack_into("!H", frame, wire.OFFSET["udp_checksum"], 0)
    struct.pack_into("!H", frame, wire.OFFSET["udp_checksum"], wire.udp_checksum(frame))
    return frame


def forwarded(frame: bytes) -> bytes:
    """What a cache node forwards, computed the slow way: prefix 0xAE, FORWARDED set, and a
    UDP checksum recomputed over the whole datagram (the node updates it incrementally)."""
    b = bytearray(frame)
    b[wire.OFFSET["eth_dst"]] = PREFIX_FORWARDED
    b[wire.OFFSET["flags"]] |= wire.FLAG_FORWARDED
    if struct.unpack_from("!H", b, wire.OFFSET["udp_checksum"])[0] != 0:
        with_udp_checksum(b)
    return bytes(b)


def main():
    hashes = [{"key_hex": k.hex(), "hash40": key_hash(k),
               "get_mac": mac_str(request_mac(PREFIX_GET, key_hash(k))),
               "other_mac": mac_str(request_mac(PREFIX_OTHER, key_hash(k))),
               "forwarded_mac": mac_str(request_mac(PREFIX_FORWARDED, key_hash(k))),
               "request_ip": ip_str(request_ip(key_hash(k)))} for k in KEYS]
    M = wire.Message
    get = M(wire.OP_GET, 0, 0, 0xC0FFEE, 1, b"user:12345")
    put = M(wire.OP_PUT, 0, 0, 0xC0FFEE, 2, b"user:12345", b"hello world")
    dele = M(wire.OP_DELETE, 0, 0, 7, 0xFFFFFFFF, b"k")
    rep = M(wire.OP_GET | wire.OP_REPLY, wire.ST_OK, wire.FLAG_FROM_CACHE, 0xC0FFEE, 1,
            b"user:12345", b"v" * 100)
    nf = M(wire.OP_GET | wire.OP_REPLY, wire.ST_NOT_FOUND, 0, 1, 9, b"missing")
    odd = M(wire.OP_PUT, 0, 0, 0xC0FFEE, 3, b"user:12345", b"odd")  # odd UDP length
    # A GET whose computed UDP checksum is 0, so it is sent as 0xFFFF (RFC 768): the first
    # seq that gives it.
    seq0 = next(s for s in range(1, 1 << 20) if _udp_sum_is_ffff(M(wire.OP_GET, 0, 0, 5, s, b"zero")))
    zero = M(wire.OP_GET, 0, 0, 5, seq0, b"zero")

    def request(name, msg, udp_checksum=False, sport=40000):
        return frame_vector(name, wire.request_dst_mac(msg.opcode, msg.key), CLIENT_MAC, CLIENT_IP,
                            wire.request_dst_ip(msg.key), sport, PORT, msg, udp_checksum)

    frames = [
        request("get", get),
        request("put", put),
        request("delete", dele, sport=40001),
        frame_vector("get_reply_from_cache", CLIENT_MAC, NODE_MAC, NODE_IP, CLIENT_IP, PORT,
                     40000, rep),
        frame_vector("get_reply_not_found", CLIENT_MAC, NODE_MAC, NODE_IP, CLIENT_IP, PORT,
                     40000, nf),
        request("put_with_udp_checksum", put, udp_checksum=True),
        request("put_odd_length_with_udp_checksum", odd, udp_checksum=True),
        request("get_udp_checksum_ffff", zero, udp_checksum=True),
    ]
    assert frames[-1]["frame_hex"][wire.OFFSET["udp_checksum"] * 2:][:4] == "ffff"
    good = bytes.fromhex(frames[1]["frame_hex"])
    good_ck = bytes.fromhex(frames[5]["frame_hex"])

    def patched(offset, data, base=good, fix_ip=False):
        b = bytearray(base)
        b[offset:offset + len(data)] = data
        return (with_ip_checksum(b) if fix_ip else b).hex()

    O = wire.OFFSET
    ip_ck = struct.unpack_from("!H", good, O["ip_checksum"])[0]
    udp_ck = struct.unpack_from("!H", good_ck, O["udp_checksum"])[0]
    # Each bad frame breaks one rule (the IPv4 checksum is fixed after a header patch, so the
    # intended check is the one that fails); "error" is the reason both parsers must report.
    malformed = [
        ("empty", "", "short frame"),
        ("truncated_header", good[:50].hex(), "short frame"),
        ("truncated_key", good[:65].hex(), "IPv4 total length disagrees with frame"),
        ("bad_magic", patched(O["magic"], b"\x00\x00"), "bad magic"),
        ("bad_version", patched(O["version"], b"\x09"), "bad version"),
        ("bad_opcode", patched(O["opcode"], b"\x7f"), "unknown opcode"),
        ("zero_key_len", patched(O["key_len"], b"\x00\x00"), "bad key length"),
        ("key_len_over_250", patched(O["key_len"], b"\x01\x00"), "bad key length"),
        ("value_len_exceeds_frame", patched(O["value_len"], b"\x00\x00\x10\x00"),
         "key/value exceed payload"),
        ("not_ipv4", patched(O["ethertype"], b"\x86\xdd"), "not IPv4"),
        ("not_udp", patched(O["ip_protocol"], b"\x06", fix_ip=True), "not UDP"),
        ("ip_options", patched(O["ip_version_ihl"], b"\x46", fix_ip=True), "IPv4 IHL is not 5"),
        ("udp_len_mismatch", patched(O["udp_length"], b"\x00\x09"),
         "UDP length disagrees with IPv4 length"),
        ("ip_len_exceeds_frame", patched(O["ip_total_len"], b"\x40\x00", fix_ip=True),
         "IPv4 total length disagrees with frame"),
        ("ip_len_below_headers", patched(O["ip_total_len"], b"\x00\x2f", fix_ip=True),
         "IPv4 total length disagrees with frame"),
        ("bad_ip_checksum", patched(O["ip_checksum"], struct.pack("!H", ip_ck ^ 0x0100)),
         "bad IPv4 header checksum"),
        ("ip_header_changed_checksum_not", patched(O["ip_ttl"], b"\x3f"),
         "bad IPv4 header checksum"),
        ("bad_udp_checksum", patched(O["udp_checksum"], struct.pack("!H", udp_ck ^ 0x0001), good_ck),
         "bad UDP checksum"),
        ("payload_changed_udp_checksum_not", patched(len(good_ck) - 1, b"X", good_ck),
         "bad UDP checksum"),
    ]
    get_frame = bytes.fromhex(frames[0]["frame_hex"])
    get_ck = wire.encode_frame(wire.request_dst_mac(wire.OP_GET, get.key), *req_args(get.key), get,
                               with_udp_checksum=True)
    zero_frame = bytes.fromhex(frames[-1]["frame_hex"])
    forwards = [{"name": n, "request_hex": f.hex(), "forwarded_hex": forwarded(f).hex()}
                for n, f in (("get", get_frame), ("get_with_udp_checksum", get_ck),
                             ("get_udp_checksum_ffff", zero_frame))]
    out = {
        "comment": "Generated by scripts/gen_wire_vectors.py; layout in docs/wire-format.md. "
                   "Read by tests/unit/test_wire_vectors.py and common/cpp/tests/wire_vectors_test.cc.",
        "constants": {
            "hash_bits": keyhash.HASH_BITS, "prefix_get": PREFIX_GET, "prefix_other": PREFIX_OTHER,
            "prefix_forwarded": PREFIX_FORWARDED, "prefix_any_mask": keyhash.PREFIX_ANY_MASK,
            "prefix_read_mask": keyhash.PREFIX_READ_MASK, "prefix_write_mask": keyhash.PREFIX_WRITE_MASK,
            "magic": wire.MAGIC,
            "version": wire.VERSION, "max_key_len": wire.MAX_KEY_LEN,
            "op_get": wire.OP_GET, "op_put": wire.OP_PUT, "op_delete": wire.OP_DELETE,
            "op_reply": wire.OP_REPLY, "flag_from_cache": wire.FLAG_FROM_CACHE,
            "flag_forwarded": wire.FLAG_FORWARDED, "min_frame": wire.MIN_FRAME,
            "forwarded_dscp": wire.FORWARDED_DSCP,
        },
        "layout": {name: list(at_size) for name, at_size in wire.LAYOUT.items()},
        "hash": {"function": "xxh64(key, seed=0) & 0xffffffffff", "vectors": hashes},
        "frames": frames,
        "malformed": [{"name": n, "frame_hex": h, "error": e} for n, h, e in malformed],
        "forwarded": forwards,
    }
    path = pathlib.Path(__file__).resolve().parents[1] / "proto" / "wire_vectors.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


def req_args(key: bytes):
    """Source MAC, source IP, destination IP (the key's request_ip), ports of a request."""
    return CLIENT_MAC, CLIENT_IP, wire.request_dst_ip(key), 40000, PORT


def ip_str(ip: bytes) -> str:
    return ".".join(map(str, ip))


def _udp_sum_is_ffff(msg) -> bool:
    """Would this GET's UDP checksum compute to 0 (sum 0xFFFF with the field 0)?"""
    f = wire.encode_frame(wire.request_dst_mac(msg.opcode, msg.key), *req_args(msg.key), msg)
    return wire._udp_sum(f) == 0xFFFF


if __name__ == "__main__":
    main()
