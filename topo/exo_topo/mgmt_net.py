"""The emulation's management network: how Prometheus in the root namespace reaches the /metrics
listeners inside the Mininet hosts (docs/operations.md, "Metrics").

Every Mininet host is a network namespace whose only interface is on the data-plane switch,
which forwards nothing but Exoskeleton frames. So the emulation adds a second, plain L2 network:
an OVS bridge `<switch.bridge>-m` (fail mode standalone, no controller: a learning switch) with
one veth to each host that has a metrics address (in the host: `<host>-mgmt`, carrying that
address /24) and the bridge's own interface in the root namespace at .254 of the same /24. A
deployment has a real management network instead; nothing here runs there.

    plan(cfg)            -> MgmtPlan (pure: which host gets which address; errors name the field)
    MgmtNet(cfg).start(net) / .stop()    (I/O: ip, ovs-vsctl; stop is idempotent)
    assign_addresses(d)  -> metrics addresses for a generated config (exo_topo/configgen.py)
"""
from __future__ import annotations

import ipaddress
import logging
import subprocess
from dataclasses import dataclass

log = logging.getLogger("exo.mgmt_net")

METRICS_PORT = 9180
ROOT_OCTET = 254  # the root namespace's address on the management /24 (where Prometheus runs)
IFNAME_MAX = 15   # Linux interface names


@dataclass(frozen=True)
class MgmtLink:
    host: str                  # Mininet host (a node's name, an emulator's, a proxy's client)
    ifname: str                # its interface on the management network
    peer: str                  # the veth's end in the root namespace, a port of the bridge
    addresses: tuple[str, ...]  # "172.31.7.11/24", one per metrics address on that host


@dataclass(frozen=True)
class MgmtPlan:
    bridge: str                # the OVS bridge, and its interface in the root namespace
    root_address: str          # "172.31.7.254/24"
    links: tuple[MgmtLink, ...]


class MgmtNetError(ValueError):
    pass


def _ip(address: str) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(address.rpartition(":")[0])


def plan(cfg) -> MgmtPlan | None:
    """Which host gets which management address, from the config's metrics addresses; None when
    no host has one (the controller's, in the root namespace, needs no link)."""
    by_host: dict[str, list[tuple[str, ipaddress.IPv4Address]]] = {}
    for i, n in enumerate(cfg.cache_nodes):
        if n.metrics:
            by_host.setdefault(n.name, []).append((f"cache_nodes[{i}].metrics", _ip(n.metrics)))
    for i, n in enumerate(cfg.db_nodes):
        if n.metrics:
            host = n.emulator or n.name
            by_host.setdefault(host, []).append((f"db_nodes[{i}].metrics", _ip(n.metrics)))
    for i, p in enumerate(cfg.proxies):
        if p.metrics:
            by_host.setdefault(p.client, []).append((f"proxies[{i}].metrics", _ip(p.metrics)))
    if not by_host:
        return None
    first_where, first_ip = next(iter(by_host.values()))[0]
    net = ipaddress.IPv4Network(f"{first_ip}/24", strict=False)
    root = net.network_address + ROOT_OCTET
    bridge = f"{cfg.switch.bridge}-m"
    if len(bridge) > IFNAME_MAX:
        raise MgmtNetError(f"switch.bridge: {cfg.switch.bridge!r} is too long for its management bridge "
                           f"{bridge!r} (at most {IFNAME_MAX - 2} characters)")
    links = []
    for host, addrs in by_host.items():
        for where, ip in addrs:
            if ip not in net:
                raise MgmtNetError(f"{where}: {ip} is not in the management network {net} "
                                   f"(that of {first_where}); the emulation has one /24")
            if ip == root:
                raise MgmtNetError(f"{where}: {ip} is the root namespace's address on the management network")
        ifname, peer = f"{host}-mgmt", f"mg-{host}"
        if len(ifname) > IFNAME_MAX:
            raise MgmtNetError(f"{host}: name too long for the interface {ifname!r}")
        links.append(MgmtLink(host, ifname, peer, tuple(sorted({f"{ip}/24" for _, ip in addrs}))))
    return MgmtPlan(bridge, f"{root}/24", tuple(links))


def assign_addresses(cfg: dict, port: int = METRICS_PORT) -> dict:
    """Metrics addresses for a generated config dict (kept where the dict has one): cache node i
    172.31.k.(11+i), db node i 172.31.k.(101+i) (none for emulated db nodes), proxy i
    172.31.k.(201+i), the controller 127.31.k.254 (loopback: it runs in the root namespace), with
    k = controller.openflow_port % 256, so two emulated clusters up at once (they never share an
    OpenFlow port) do not share a subnet. Nodes past what a /24 holds get none."""
    k = cfg.get("controller", {}).get("openflow_port", 6653) % 256
    cfg.setdefault("controller", {}).setdefault("metrics", f"127.31.{k}.{ROOT_OCTET}:{port}")
    for base, limit, entries in ((11, 90, cfg.get("cache_nodes", [])), (101, 90, cfg.get("db_nodes", [])),
                                 (201, ROOT_OCTET - 201, cfg.get("proxies", []))):
        for i, e in enumerate(entries):
            if e.get("emulator") is None and i < limit:
                e.setdefault("metrics", f"172.31.{k}.{base + i}:{port}")
    return cfg


def _run(cmd: list[str]) -> None:
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stdout.strip()}")


class MgmtNet:
    """The management network of one emulated cluster; start after Mininet's hosts exist (and
    before the nodes, which bind their metrics addresses), stop after Mininet."""

    def __init__(self, cfg):
        self.plan = plan(cfg)

    def start(self, net) -> None:
        p = self.plan
        if p is None:
            return
        self.stop()  # what a crashed earlier run left
        _run(["ovs-vsctl", "--timeout=10", "add-br", p.bridge, "--", "set", "Bridge", p.bridge,
              "datapath_type=netdev", "fail_mode=standalone"])
        _run(["ip", "addr", "add", p.root_address, "dev", p.bridge])
        _run(["ip", "link", "set", p.bridge, "up"])
        # The userspace datapath forwards frames as the kernel handed them over, TCP checksums
        # left for a NIC to fill in (offload) included, and the receiver drops them: every
        # interface on this bridge computes its checksums itself (as exo_bench/net.py does).
        _run(["ethtool", "-K", p.bridge, "tx", "off"])
        for link in p.links:
            host = net.get(link.host)
            _run(["ip", "link", "add", link.peer, "type", "veth", "peer", "name", link.ifname,
                  "netns", str(host.pid)])
            _run(["ip", "link", "set", link.peer, "up"])
            _run(["ethtool", "-K", link.peer, "tx", "off"])
            _run(["ovs-vsctl", "--timeout=10", "add-port", p.bridge, link.peer])
            script = " && ".join([*(f"ip addr add {a} dev {link.ifname}" for a in link.addresses),
                                f"ip link set {link.ifname} up", f"ethtool -K {link.ifname} tx off >/dev/null"])
            out = host.cmd(f"{script} 2>&1; echo rc=$?")
            if not out.strip().endswith("rc=0"):
                raise RuntimeError(f"{link.host}: configuring {link.ifname}: {out.strip()}")
        log.info("management network %s: %s on the root side, %d hosts", p.bridge, p.root_address, len(p.links))

    def stop(self) -> None:
        """Idempotent. The host ends of the veths go with their namespaces; the root ends and the
        bridge are removed here."""
        p = self.plan
        if p is None:
            return
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", p.bridge],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for link in p.links:
            subprocess.run(["ip", "link", "del", link.peer], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
