"""What Open vSwitch caches for one request: `ovs-appctl ofproto/trace` prints the datapath flow
("Megaflow") the slow path would install for a packet, with the bits it had to match. How many
key-hash bits that flow pins says how many keys share it: 40 pinned bits is one datapath flow,
and one upcall, per key (docs/switch-rules.md, "Why this layout"). No traffic is sent.
"""
from __future__ import annotations

import ipaddress
import re
import subprocess
from dataclasses import dataclass

from exoskeleton.keyhash import HASH_MASK, PREFIX_GET, key_hash, request_ip, request_mac
from exoskeleton.keyhash import REQUEST_IP_SHIFT as IP_SHIFT


@dataclass(frozen=True)
class Megaflow:
    line: str           # "recirc_id=0,eth,ip,in_port=1,dl_dst=aa:12:00:00:00:00/ff:ff:c0:00:00:00,..."
    actions: str        # the datapath actions, e.g. "4" (a datapath port number) or "drop"
    dl_dst_mask: int    # 48-bit mask of the destination MAC bits the flow matches
    nw_dst_mask: int    # 32-bit mask of the IPv4 destination bits it matches

    def hash_bits_pinned(self) -> int:
        """Bits of the 40-bit key hash this flow matches, through the MAC or the IP (which
        carries hash bits 39..8): 2^(40 - this) key hashes share it."""
        pinned = (self.dl_dst_mask & HASH_MASK) | (self.nw_dst_mask << IP_SHIFT)
        return bin(pinned & HASH_MASK).count("1")


def _mac_mask(text: str) -> int:
    if "/" not in text:
        return (1 << 48) - 1
    return int(text.split("/")[1].replace(":", ""), 16)


def _ip_mask(text: str) -> int:
    net = ipaddress.IPv4Network(text if "/" in text else text + "/32", strict=False)
    return int(net.netmask)


def parse_trace(output: str) -> Megaflow:
    """The Megaflow and datapath actions of an `ofproto/trace` output."""
    mega = re.search(r"^Megaflow: (\S+)", output, re.M)
    acts = re.search(r"^Datapath actions: (.*)$", output, re.M)
    if not mega or not acts:
        raise ValueError(f"no Megaflow / Datapath actions in ofproto/trace output:\n{output}")
    fields = dict(f.split("=", 1) for f in mega.group(1).split(",") if "=" in f)
    return Megaflow(line=mega.group(1), actions=acts.group(1).strip(),
                    dl_dst_mask=_mac_mask(fields["dl_dst"]) if "dl_dst" in fields else 0,
                    nw_dst_mask=_ip_mask(fields["nw_dst"]) if "nw_dst" in fields else 0)


def request_flow(in_port: int, src_mac: str, src_ip: str, prefix: int, khash: int, udp_port: int) -> str:
    """The ofproto/trace flow of a request for a key with hash `khash`, as a client sends it."""
    mac = ":".join(f"{b:02x}" for b in request_mac(prefix, khash))
    ip = str(ipaddress.IPv4Address(request_ip(khash)))
    return (f"in_port={in_port},udp,dl_src={src_mac},dl_dst={mac},nw_src={src_ip},nw_dst={ip},"
            f"udp_src=40000,udp_dst={udp_port}")


def trace(bridge: str, flow: str) -> Megaflow:
    r = subprocess.run(["ovs-appctl", "ofproto/trace", bridge, flow], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ofproto/trace {bridge} {flow}: {r.stderr.strip()}")
    return parse_trace(r.stdout)


def trace_key(bridge: str, in_port: int, src_mac: str, src_ip: str, key: bytes, udp_port: int,
              prefix: int = PREFIX_GET) -> Megaflow:
    return trace(bridge, request_flow(in_port, src_mac, src_ip, prefix, key_hash(key), udp_port))
