"""Send well-formed GETs as fast as one process can from a host's interface for a while, and
write how many went out (test_ingress_hygiene.py runs it inside a client's host, so it loads the
switch port's meter without holding the test process's interpreter).

    python tests/integration/frame_flood.py --iface client1-eth0 --seconds 1.5 --udp-port 7777 --out r.json
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

from exoskeleton import wire
from exoskeleton.rawio import interface_addresses


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iface", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--udp-port", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    mac, ip = interface_addresses(a.iface)
    frames = []
    for i in range(64):
        key = b"flood:%d" % i
        msg = wire.Message(wire.OP_GET, 0, 0, 0xF100D, i, key)
        frames.append(wire.encode_frame(wire.request_dst_mac(wire.OP_GET, key), mac, ip,
                                        wire.request_dst_ip(key), 41000, a.udp_port, msg))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((a.iface, 0))
    sent = refused = 0
    t0 = time.monotonic()
    end = t0 + a.seconds
    try:
        while time.monotonic() < end:
            for f in frames:
                try:
                    s.send(f)
                    sent += 1
                except OSError:  # the host's own queue is full: its ceiling, not the switch's
                    refused += 1
    finally:
        s.close()
    a.out.write_text(json.dumps({"sent": sent, "send_refused": refused, "seconds": time.monotonic() - t0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
