"""The Python wire format and key hash against proto/wire_vectors.json (the C++ side reads the
same file in common/cpp/tests/wire_vectors_test.cc): constants, the header layout (and the
tables of docs/wire-format.md), frames, malformed frames with their reason, checksums."""
import json
import pathlib
import re
import socket
import struct

import pytest

from exoskeleton import keyhash, wire
from exoskeleton.keyhash import (PREFIX_ANY_MASK, PREFIX_FORWARDED, PREFIX_GET, PREFIX_OTHER, PREFIX_READ_MASK,
                                 PREFIX_WRITE_MASK, key_hash, mac_bytes, mac_str, request_ip, request_mac)

ROOT = pathlib.Path(__file__).parents[2]
VECTORS = json.loads((ROOT / "proto" / "wire_vectors.json").read_text())


def test_constants_match_vectors():
    c = VECTORS["constants"]
    assert (keyhash.HASH_BITS, PREFIX_GET, PREFIX_OTHER, PREFIX_FORWARDED) == \
        (c["hash_bits"], c["prefix_get"], c["prefix_other"], c["prefix_forwarded"])
    assert (PREFIX_ANY_MASK, PREFIX_READ_MASK, PREFIX_WRITE_MASK) == \
        (c["prefix_any_mask"], c["prefix_read_mask"], c["prefix_write_mask"])
    assert (wire.MAGIC, wire.VERSION, wire.MAX_KEY_LEN, wire.MIN_FRAME) == \
        (c["magic"], c["version"], c["max_key_len"], c["min_frame"])
    assert (wire.OP_GET, wire.OP_PUT, wire.OP_DELETE, wire.OP_REPLY) == \
        (c["op_get"], c["op_put"], c["op_delete"], c["op_reply"])
    assert (wire.FLAG_FROM_CACHE, wire.FLAG_FORWARDED) == (c["flag_from_cache"], c["flag_forwarded"])
    assert wire.FORWARDED_DSCP == c["forwarded_dscp"]


def test_no_other_python_definition_of_the_hash_constants():
    """The controller and the partition table use the client's constants, not copies."""
    from exo_common import partitions
    from exo_controller import flows
    assert flows.HASH_BITS is keyhash.HASH_BITS and partitions.HASH_BITS is keyhash.HASH_BITS
    assert flows.PREFIX_GET is keyhash.PREFIX_GET and flows.PREFIX_OTHER is keyhash.PREFIX_OTHER
    assert flows.PREFIX_ANY_MASK is keyhash.PREFIX_ANY_MASK == 0xEB
    for path in ("controller/exo_controller/flows.py", "common/exo_common/partitions.py"):
        text = (ROOT / path).read_text()
        assert not re.search(r"^(HASH_BITS|HASH_MASK|PREFIX_\w+)\s*=", text, re.M), path


def test_layout_matches_vectors():
    assert {k: list(v) for k, v in wire.LAYOUT.items()} == VECTORS["layout"]
    assert (wire.ETH_LEN, wire.IP_LEN, wire.UDP_LEN, wire.HDR_LEN, wire.PAYLOAD_OFFSET) == (14, 20, 8, 20, 42)


def _doc_tables():
    """(offset, size, field) rows of the Frame and Exoskeleton header tables of the doc."""
    text = (ROOT / "docs" / "wire-format.md").read_text()
    frame, header = [], []
    section = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line
        m = re.match(r"\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|", line)
        if m and section == "## Frame":
            frame.append((int(m[1]), int(m[2]), m[3]))
        elif m and section and section.startswith("## Exoskeleton header"):
            header.append((int(m[1]), int(m[2]), m[3]))
    return frame, header


# Names in the doc -> the layout's names.
DOC_FRAME = {"Ethernet dst": "eth_dst", "Ethernet src": "eth_src", "EtherType": "ethertype",
             "IPv4 header": "ip_version_ihl", "(inside IPv4) header checksum": "ip_checksum",
             "(inside IPv4) src IP": "ip_src", "(inside IPv4) dst IP": "ip_dst",
             "UDP header": "udp_src", "(inside UDP) dst port": "udp_dst",
             "(inside UDP) checksum": "udp_checksum", "Exoskeleton header": "magic"}


def test_doc_tables_match_layout():
    frame, header = _doc_tables()
    seen = set()
    for at, size, name in frame:
        if name in DOC_FRAME:
            seen.add(name)
            assert wire.OFFSET[DOC_FRAME[name]] == at, name
    assert seen == set(DOC_FRAME), seen
    assert len(header) == 9  # the key and value rows have no fixed size
    for at, size, name in header:
        if name in wire.OFFSET:
            assert wire.OFFSET[name] == wire.PAYLOAD_OFFSET + at and wire.LAYOUT[name][1] == size, name
    assert {n for _, _, n in header} >= {"magic", "version", "opcode", "status", "flags", "key_len",
                                          "value_len", "client_id", "seq"}


@pytest.mark.parametrize("v", VECTORS["hash"]["vectors"], ids=lambda v: v["key_hex"][:16])
def test_key_hash_vectors(v):
    key = bytes.fromhex(v["key_hex"])
    assert key_hash(key) == v["hash40"]
    assert mac_str(request_mac(PREFIX_GET, key_hash(key))) == v["get_mac"]
    assert mac_str(request_mac(PREFIX_OTHER, key_hash(key))) == v["other_mac"]
    assert mac_str(request_mac(PREFIX_FORWARDED, key_hash(key))) == v["forwarded_mac"]
    assert socket.inet_ntoa(request_ip(key_hash(key))) == v["request_ip"]
    assert int.from_bytes(request_ip(key_hash(key)), "big") == v["hash40"] >> 8  # the top 32 bits
    assert wire.request_dst_ip(key) == request_ip(key_hash(key))


@pytest.mark.parametrize("v", VECTORS["frames"], ids=lambda v: v["name"])
def test_frames_encode_and_decode(v):
    msg = wire.Message(v["opcode"], v["status"], v["flags"], v["client_id"], v["seq"],
                       bytes.fromhex(v["key_hex"]), bytes.fromhex(v["value_hex"]))
    raw = wire.encode_frame(mac_bytes(v["eth_dst"]), mac_bytes(v["eth_src"]),
                            socket.inet_aton(v["ip_src"]), socket.inet_aton(v["ip_dst"]),
                            v["udp_src"], v["udp_dst"], msg, with_udp_checksum=v["udp_checksum"])
    assert raw.hex() == v["frame_hex"]
    f = wire.decode_frame(raw)
    assert f.msg == msg
    assert (f.udp_src, f.udp_dst) == (v["udp_src"], v["udp_dst"])
    udp_ck = struct.unpack_from("!H", raw, wire.OFFSET["udp_checksum"])[0]
    assert (udp_ck != 0) == v["udp_checksum"]


@pytest.mark.parametrize("v", [v for v in VECTORS["frames"] if not v["opcode"] & wire.OP_REPLY],
                         ids=lambda v: v["name"])
def test_request_frames_carry_the_key_hash_in_ip_dst(v):
    """A request's IPv4 dst is request_ip(key hash), the MAC's hash less its low byte."""
    f = wire.decode_frame(bytes.fromhex(v["frame_hex"]))
    assert f.ip_dst == request_ip(key_hash(f.msg.key)) == socket.inet_aton(v["ip_dst"])
    assert f.ip_dst == f.eth_dst[1:5]


def test_ip_checksum_verifies_to_zero():
    raw = bytes.fromhex(VECTORS["frames"][0]["frame_hex"])
    at = wire.OFFSET["ip_version_ihl"]
    assert wire.ip_checksum(raw[at:at + wire.IP_LEN]) == 0


@pytest.mark.parametrize("v", VECTORS["malformed"], ids=lambda v: v["name"])
def test_malformed_frames_rejected_with_the_shared_reason(v):
    with pytest.raises(wire.MalformedFrame) as e:
        wire.decode_frame(bytes.fromhex(v["frame_hex"]))
    assert str(e.value) == v["error"]


def test_checksum_vectors_cover_both_checksums():
    errors = {v["error"] for v in VECTORS["malformed"]}
    assert {"bad IPv4 header checksum", "bad UDP checksum"} <= errors
    names = {v["name"] for v in VECTORS["frames"] if v["udp_checksum"]}
    assert "get_udp_checksum_ffff" in names  # a computed 0 is sent as 0xFFFF


@pytest.mark.parametrize("v", VECTORS["forwarded"], ids=lambda v: v["name"])
def test_forwarded_frames_still_verify(v):
    """The cache node's rewrite (C++ wire::mark_forwarded, checked against the same vectors)
    keeps a UDP checksum valid; a db node would drop the forwarded GET otherwise."""
    f = wire.decode_frame(bytes.fromhex(v["forwarded_hex"]))
    assert f.eth_dst[0] == PREFIX_FORWARDED and f.msg.flags & wire.FLAG_FORWARDED
    # nothing else changes but the flags byte and the UDP checksum (the same hash, addresses, key)
    req = wire.decode_frame(bytes.fromhex(v["request_hex"]))
    assert f.eth_dst[1:] == req.eth_dst[1:] and f.msg.key == req.msg.key


def test_prefixes_are_locally_administered_unicast():
    for p in (PREFIX_GET, PREFIX_FORWARDED, PREFIX_OTHER, 0xBE):  # 0xBE: never sent, reserved
        assert p & 0x02 and not p & 0x01
    assert keyhash.REQUEST_PREFIXES == (PREFIX_GET, PREFIX_FORWARDED, PREFIX_OTHER)


def _first_bytes(mask: int, prefix: int) -> set[int]:
    """Every first byte a Ruleset 3 rule with this first-byte value and mask matches."""
    return {b for b in range(256) if b & mask == prefix & mask}


def test_ruleset3_masks_match_exactly_the_design_table():
    """All 256 first bytes against each mask (docs/switch-rules.md, "Request prefixes and
    masks"): the rf-1 rule takes every request (and the unused 0xBE), the rf > 1 read rule GETs
    and forwarded GETs, the write rule writes only."""
    assert _first_bytes(PREFIX_ANY_MASK, PREFIX_GET) == {0xAA, 0xAE, 0xBA, 0xBE}
    assert _first_bytes(PREFIX_READ_MASK, PREFIX_GET) == {0xAA, 0xAE}
    assert _first_bytes(PREFIX_WRITE_MASK, PREFIX_OTHER) == {0xBA}
    # the read and write rules of one slot are disjoint; together they are the rf-1 rule minus 0xBE
    assert _first_bytes(PREFIX_READ_MASK, PREFIX_GET) | _first_bytes(PREFIX_WRITE_MASK, PREFIX_OTHER) == \
        _first_bytes(PREFIX_ANY_MASK, PREFIX_GET) - {0xBE}
    # Ruleset 2 matches 0xAA exactly: a forwarded GET never loops back to a cache node
    assert PREFIX_FORWARDED != PREFIX_GET
    # the checker can fail: the old rf-1 mask 0xEF misses forwarded GETs
    assert PREFIX_FORWARDED not in _first_bytes(0xEF, PREFIX_GET)


def test_rf1_rule_uses_the_any_mask_and_no_node_mac_matches_it():
    """flows.partition_match's first byte is 0xAA under PREFIX_ANY_MASK; the config validator
    refuses a node MAC with exactly the first bytes that rule matches, so Rulesets 1 and 3 stay
    disjoint."""
    from pydantic import ValidationError

    from exo_common.config import REQUEST_PREFIXES, _Node
    from exo_controller import flows
    for bits in (1, 8, 12):
        value, mask = flows.partition_match(0, bits)
        assert (value >> 40, mask >> 40) == (PREFIX_GET, PREFIX_ANY_MASK)
    assert {int(p, 16) for p in REQUEST_PREFIXES} == _first_bytes(PREFIX_ANY_MASK, PREFIX_GET)
    refused = set()
    for b in range(0, 256, 2):  # unicast first bytes (a multicast one is refused for that)
        try:
            _Node._mac(f"{b:02x}:00:00:00:00:01")
        except (ValueError, ValidationError):
            refused.add(b)
    assert refused == _first_bytes(PREFIX_ANY_MASK, PREFIX_GET)


def test_max_kv_bytes_at_mtu_1500():
    assert wire.max_kv_bytes(1500) == 1452
