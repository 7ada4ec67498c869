"""Start and stop the Open vSwitch daemons (userspace datapath: this kernel has no OVS module)."""
from __future__ import annotations

import re
import subprocess

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"


def _ok(cmd: list[str]) -> bool:
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def running() -> bool:
    return _ok(["ovs-vsctl", "--timeout=3", "show"]) and _ok(["ovs-appctl", "-t", "ovs-vswitchd", "version"])


def ensure_running() -> bool:
    """Start ovsdb-server and ovs-vswitchd if needed. Returns True if this call started them."""
    if running():
        return False
    if not _ok(["ovs-vsctl", "--timeout=3", "show"]):
        subprocess.run([OVS_CTL, "--no-ovs-vswitchd", "--system-id=random", "start"], check=True,
                       stdout=subprocess.DEVNULL)
    if not _ok(["ovs-appctl", "-t", "ovs-vswitchd", "version"]):
        subprocess.run(["ovs-vswitchd", "--pidfile", "--detach", "--log-file"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not running():
        raise RuntimeError("Open vSwitch did not start (see /var/log/openvswitch/)")
    return True


def stop() -> None:
    subprocess.run([OVS_CTL, "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def delete_bridge(name: str) -> None:
    subprocess.run(["ovs-vsctl", "--timeout=5", "--if-exists", "del-br", name],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def configure_table0(bridge: str, limit: int, table: int = 0) -> None:
    """Make `table` as small as a hardware switch's: the (limit+1)th flow is refused with an
    OpenFlow table-full error (overflow_policy=refuse) instead of OVS's default eviction-free
    growth. The cluster's forwarding rules are in table 1 (exo_controller.flows.FORWARD_TABLE,
    behind table 0's ingress checks); the bench's one-table layouts use table 0. Also track ip_dst in the table's prefix tries (`prefixes`), which lets OVS wildcard
    the IPv4 destination bits no rule needs: a GET that misses Ruleset 2 (it matches the key
    hash as an IPv4 /32) then shares its datapath flow with every key of its ~2^14th of the
    hash space instead of installing one per key (docs/switch-rules.md, "Why this layout").
    The Flow_Table row is owned by the bridge and goes away with it."""
    subprocess.run(["ovs-vsctl", "--timeout=5", "--", "--id=@ft", "create", "Flow_Table",
                    f"flow_limit={limit}", "overflow_policy=refuse", f"name=exo_table{table}", "prefixes=ip_dst",
                    "--", "set", "Bridge", bridge, f"flow_tables:{table}=@ft"],
                   check=True, stdout=subprocess.DEVNULL)


def dump_flows(bridge: str, cookies: list[int]) -> list[str]:
    """The switch's own lines (`ovs-ofctl dump-flows`) for the flows with these exact cookies:
    what the switch holds, as an operator would read it (the closing note's rule dump)."""
    out: list[str] = []
    for cookie in cookies:
        r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge,
                            f"cookie={cookie:#x}/-1"], capture_output=True, text=True, timeout=10,
                           check=True)
        out += [line.strip() for line in r.stdout.splitlines() if "cookie=" in line]
    return out


def meter_stats(bridge: str, meter: int) -> tuple[int, int]:
    """(frames that reached OpenFlow meter `meter`, frames its first band dropped), read from the
    switch itself with `ovs-ofctl meter-stats` (the controller reports only the drops)."""
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "meter-stats", bridge, f"meter={meter}"],
                       capture_output=True, text=True, check=True)
    m = re.search(rf"meter:{meter} .*?packet_in_count:(\d+).*?\n\s*0: packet_count:(\d+)", r.stdout, re.S)
    if m is None:
        raise RuntimeError(f"ovs-ofctl meter-stats {bridge} meter={meter}: no such meter in {r.stdout!r}")
    return int(m.group(1)), int(m.group(2))
