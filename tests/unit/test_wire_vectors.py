"""The Python wire format and key hash against proto/wire_vectors.json (the C++ side reads the
same file in proto/cpp/tests/wire_vectors_test.cc)."""
import json
import pathlib
import socket

import pytest

from exoskeleton import wire
from exoskeleton.keyhash import PREFIX_GET, PREFIX_OTHER, key_hash, mac_bytes, mac_str, request_mac

VECTORS = json.loads((pathlib.Path(__file__).parents[2] / "proto" / "wire_vectors.json").read_text())


@pytest.mark.parametrize("v", VECTORS["hash"]["vectors"], ids=lambda v: v["key_hex"][:16])
def test_key_hash_vectors(v):
    key = bytes.fromhex(v["key_hex"])
    assert key_hash(key) == v["hash40"]
    assert mac_str(request_mac(PREFIX_GET, key_hash(key))) == v["get_mac"]
    assert mac_str(request_mac(PREFIX_OTHER, key_hash(key))) == v["other_mac"]


@pytest.mark.parametrize("v", VECTORS["frames"], ids=lambda v: v["name"])
def test_frames_encode_and_decode(v):
    msg = wire.Message(v["opcode"], v["status"], v["flags"], v["client_id"], v["seq"],
                       bytes.fromhex(v["key_hex"]), bytes.fromhex(v["value_hex"]))
    raw = wire.encode_frame(mac_bytes(v["eth_dst"]), mac_bytes(v["eth_src"]),
                            socket.inet_aton(v["ip_src"]), socket.inet_aton(v["ip_dst"]),
                            v["udp_src"], v["udp_dst"], msg)
    assert raw.hex() == v["frame_hex"]
    f = wire.decode_frame(raw)
    assert f.msg == msg
    assert (f.udp_src, f.udp_dst) == (v["udp_src"], v["udp_dst"])


def test_ip_checksum_verifies_to_zero():
    raw = bytes.fromhex(VECTORS["frames"][0]["frame_hex"])
    assert wire.ip_checksum(raw[14:34]) == 0


@pytest.mark.parametrize("v", VECTORS["malformed"], ids=lambda v: v["name"])
def test_malformed_frames_rejected(v):
    with pytest.raises(wire.MalformedFrame):
        wire.decode_frame(bytes.fromhex(v["frame_hex"]))


def test_prefixes_are_locally_administered_unicast():
    for p in (PREFIX_GET, PREFIX_OTHER):
        assert p & 0x02 and not p & 0x01
    assert PREFIX_GET & 0xEF == PREFIX_OTHER & 0xEF  # one Ruleset 3 rule matches both


def test_max_kv_bytes_at_mtu_1500():
    assert wire.max_kv_bytes(1500) == 1452
