"""The links the bench measures over, created for one run and always removed.

A `Link` is two network namespaces, `gen` (the load generator) and `srv` (the server under
test), joined either by a bare veth pair (what the node cases measure: nothing between the
generator and the node) or through an Open vSwitch bridge in the root namespace (userspace
datapath, for context). Deleting a namespace deletes the veth ends inside it, so teardown is
`ip netns del` plus, for OVS, `del-br`; names carry the bench's pid so `sweep_stale()` can remove
what a killed run left behind without touching a live one.
"""
from __future__ import annotations

import os
import re
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

PREFIX = "exob"  # every namespace, interface and bridge the bench creates starts with this


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


@dataclass(frozen=True)
class Endpoint:
    """One end of the measured path: a namespace and the interface the program uses in it."""
    netns: str
    iface: str
    mac: str
    ip: str


@dataclass
class Link:
    gen: Endpoint
    srv: Endpoint
    bridge: Optional[str] = None      # the OVS bridge between them, if any
    ovs_ports: tuple[str, str] = ("", "")  # (generator side, server side) port names on the bridge


def _ns_name(role: str, tag: str) -> str:
    return f"{PREFIX}-{role}-{os.getpid()}-{tag}"


def _setup_end(ns: str, iface: str, mac: str, ip: str, peer_mac: str, peer_ip: str, mtu: int) -> None:
    sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "-n", ns, "link", "set", iface, "address", mac, "mtu", str(mtu), "up")
    sh("ip", "-n", ns, "addr", "add", f"{ip}/8", "dev", iface)
    # Static neighbours: no ARP on the measured link (memcached's replies need the client's MAC).
    sh("ip", "-n", ns, "neigh", "replace", peer_ip, "lladdr", peer_mac, "dev", iface, "nud", "permanent")
    # Kernel-built replies (memcached) must carry real checksums: the generator reads raw frames.
    sh("ip", "netns", "exec", ns, "ethtool", "-K", iface, "tx", "off", check=False)


@contextmanager
def veth_link(tag: str, gen_mac: str, gen_ip: str, srv_mac: str, srv_ip: str,
              mtu: int = 1500, via_ovs: bool = False) -> Iterator[Link]:
    """gen <-> srv over a bare veth pair, or (via_ovs) gen <-> OVS bridge <-> srv."""
    gen_ns, srv_ns = _ns_name("gen", tag), _ns_name("srv", tag)
    short = f"{os.getpid() % 100000}{tag[:2]}"
    gen_if, srv_if = f"{PREFIX}g{short}", f"{PREFIX}s{short}"
    bridge = f"{PREFIX}br{short}" if via_ovs else None
    made: list[str] = []
    try:
        for ns in (gen_ns, srv_ns):
            sh("ip", "netns", "add", ns)
            made.append(ns)
        if via_ovs:
            from exo_topo import ovs
            ovs.ensure_running()
            gp, sp = f"{PREFIX}G{short}", f"{PREFIX}S{short}"
            sh("ip", "link", "add", gen_if, "type", "veth", "peer", "name", gp)
            sh("ip", "link", "add", srv_if, "type", "veth", "peer", "name", sp)
            sh("ovs-vsctl", "--timeout=10", "add-br", bridge, "--", "set", "bridge", bridge,
               "datapath_type=netdev", "protocols=OpenFlow13", "fail-mode=secure")
            for port, ofport in ((gp, 1), (sp, 2)):
                sh("ip", "link", "set", port, "mtu", str(mtu), "up")
                sh("ethtool", "-K", port, "tx", "off", check=False)
                sh("ovs-vsctl", "--timeout=10", "add-port", bridge, port, "--", "set", "Interface",
                   port, f"ofport_request={ofport}")
            ports = (gp, sp)
        else:
            sh("ip", "link", "add", gen_if, "type", "veth", "peer", "name", srv_if)
            ports = ("", "")
        sh("ip", "link", "set", gen_if, "netns", gen_ns)
        sh("ip", "link", "set", srv_if, "netns", srv_ns)
        _setup_end(gen_ns, gen_if, gen_mac, gen_ip, srv_mac, srv_ip, mtu)
        _setup_end(srv_ns, srv_if, srv_mac, srv_ip, gen_mac, gen_ip, mtu)
        yield Link(Endpoint(gen_ns, gen_if, gen_mac, gen_ip), Endpoint(srv_ns, srv_if, srv_mac, srv_ip),
                   bridge, ports)
    finally:
        if bridge:
            sh("ovs-vsctl", "--timeout=10", "--if-exists", "del-br", bridge, check=False)
            for p in (f"{PREFIX}G{short}", f"{PREFIX}S{short}"):
                sh("ip", "link", "del", p, check=False)
        for ns in made:
            sh("ip", "netns", "del", ns, check=False)


@contextmanager
def stub_netns(tag: str, name: str, mac: str, ip: str) -> Iterator[Endpoint]:
    """A namespace of its own for a process that needs an interface but no traffic on it (a
    chain's middle or tail in the replication cases: its writes come over gRPC on a unix
    socket, which crosses namespaces): a veth pair with both ends inside it (this machine's
    kernel has no dummy interfaces), the node's end up with its MAC and IP."""
    ns = _ns_name("stub", f"{tag}{name}")
    iface, peer = f"{PREFIX}d{name}"[:15], f"{PREFIX}p{name}"[:15]
    made = False
    try:
        sh("ip", "netns", "add", ns)
        made = True
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "add", iface, "type", "veth", "peer", "name", peer)
        sh("ip", "-n", ns, "link", "set", peer, "up")
        sh("ip", "-n", ns, "link", "set", iface, "address", mac, "up")
        sh("ip", "-n", ns, "addr", "add", f"{ip}/8", "dev", iface)
        yield Endpoint(ns, iface, mac, ip)
    finally:
        if made:
            sh("ip", "netns", "del", ns, check=False)


def sweep_stale() -> list[str]:
    """Remove namespaces and bridges of bench runs whose process is gone. Returns their names."""
    gone = []
    ns_list = sh("ip", "netns", "list", check=False).stdout.split()
    for name in ns_list:
        m = re.match(rf"^{PREFIX}-(gen|srv|stub)-(\d+)-", name)
        if m and not Path(f"/proc/{m.group(2)}").exists():
            sh("ip", "netns", "del", name, check=False)
            gone.append(name)
    live = {int(d) % 100000 for d in os.listdir("/proc") if d.isdigit()}
    for br in sh("ovs-vsctl", "--timeout=5", "list-br", check=False).stdout.split():
        m = re.match(rf"^{PREFIX}br(\d+)[a-z]", br)
        if m and int(m.group(1)) not in live:
            sh("ovs-vsctl", "--timeout=5", "--if-exists", "del-br", br, check=False)
            gone.append(br)
    return gone


def leftovers() -> list[str]:
    """Namespaces and bridges of this process still present (tests assert there are none)."""
    mine = f"{PREFIX}-"
    names = [n for n in sh("ip", "netns", "list", check=False).stdout.split()
             if n.startswith(mine) and f"-{os.getpid()}-" in n]
    short = f"{PREFIX}br{os.getpid() % 100000}"
    names += [b for b in sh("ovs-vsctl", "--timeout=5", "list-br", check=False).stdout.split()
              if b.startswith(short)]
    return names
