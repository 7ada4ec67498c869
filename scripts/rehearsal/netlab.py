"""The rehearsal's stand-in for a rack: bare network namespaces (one per machine), veth cables,
an Open vSwitch bridge for the hardware switch and a Linux bridge for the management network.
No Mininet.

    lab = Lab(prefix="exo-rh")
    lab.host("db0")                                   # netns exo-rh-db0
    lab.veth("db0", "db0-eth0", "rh-db0")             # a cable: db0-eth0 inside, rh-db0 outside
    lab.ovs_bridge("exo-rh")                          # the switch
    lab.ovs_port("exo-rh", "rh-db0", 3)               # plugged into switch port 3
    ...
    lab.teardown()                                    # everything it made, newest first

Every object made is recorded with the command that removes it, and teardown runs all of them
even when some fail, so a crash or Ctrl-C leaves nothing behind (main.py calls it in finally).
"""
from __future__ import annotations

import logging
import subprocess
from typing import Callable

log = logging.getLogger("rehearsal.netlab")


def run(*cmd: str, check: bool = True, timeout: float = 15.0) -> subprocess.CompletedProcess:
    res = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {res.returncode}: {res.stderr.strip() or res.stdout.strip()}")
    return res


class Lab:
    def __init__(self, prefix: str):
        self.prefix = prefix
        self._undo: list[tuple[str, Callable[[], object]]] = []

    def netns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def _made(self, what: str, undo: Callable[[], object]) -> None:
        self._undo.append((what, undo))

    # ---- machines and cables ----
    def host(self, host: str) -> str:
        ns = self.netns(host)
        run("ip", "netns", "del", ns, check=False)  # a crashed earlier run's leftover
        run("ip", "netns", "add", ns)
        self._made(f"netns {ns}", lambda: run("ip", "netns", "del", ns, check=False))
        run("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def veth(self, host: str, inside: str, outside: str, mac: str | None = None) -> None:
        """A cable from `inside` (in host's netns) to `outside` (root namespace), both up, IPv6 off
        (router solicitations would only be table misses on a fail-secure switch)."""
        ns = self.netns(host)
        run("ip", "link", "del", outside, check=False)
        run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside, "netns", ns)
        self._made(f"veth {outside}", lambda: run("ip", "link", "del", outside, check=False))
        if mac:
            run("ip", "-n", ns, "link", "set", inside, "address", mac)
        run("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{inside}.disable_ipv6=1", check=False)
        run("sysctl", "-qw", f"net.ipv6.conf.{outside}.disable_ipv6=1", check=False)
        run("ip", "-n", ns, "link", "set", inside, "up")
        run("ip", "link", "set", outside, "up")

    def address(self, host: str | None, iface: str, cidr: str) -> None:
        prefix = ["ip"] if host is None else ["ip", "-n", self.netns(host)]
        run(*prefix, "addr", "add", cidr, "dev", iface)

    # ---- the management network: a Linux bridge ----
    def linux_bridge(self, name: str, cidr: str) -> None:
        run("ip", "link", "del", name, check=False)
        run("ip", "link", "add", name, "type", "bridge")
        self._made(f"bridge {name}", lambda: run("ip", "link", "del", name, check=False))
        run("sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1", check=False)
        run("ip", "addr", "add", cidr, "dev", name)
        run("ip", "link", "set", name, "up")

    def enslave(self, iface: str, bridge: str) -> None:
        run("ip", "link", "set", iface, "master", bridge)

    # ---- the switch: an OVS bridge ----
    def ovs_bridge(self, name: str, *settings: str) -> None:
        """ovs-vsctl add-br with `settings` as further `-- set Bridge ...` arguments."""
        run("ovs-vsctl", "--timeout=5", "--if-exists", "del-br", name)
        run("ovs-vsctl", "--timeout=5", "add-br", name, *settings)
        self._made(f"ovs bridge {name}",
                   lambda: run("ovs-vsctl", "--timeout=5", "--if-exists", "del-br", name, check=False))

    def ovs_port(self, bridge: str, iface: str, ofport: int) -> None:
        run("ovs-vsctl", "--timeout=5", "add-port", bridge, iface, "--", "set", "Interface", iface,
            f"ofport_request={ofport}")

    def on_teardown(self, what: str, fn: Callable[[], object]) -> None:
        """Anything else to undo (processes, OVS settings), in the same newest-first order."""
        self._made(what, fn)

    def teardown(self) -> list[str]:
        """Undo everything, newest first; returns what failed (each is logged too)."""
        failed = []
        while self._undo:
            what, fn = self._undo.pop()
            try:
                fn()
            except Exception as err:  # keep tearing down
                log.warning("teardown: %s: %s", what, err)
                failed.append(f"{what}: {err}")
        return failed
