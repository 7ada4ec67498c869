"""Start and stop the Open vSwitch daemons (userspace datapath: this kernel has no OVS module)."""
from __future__ import annotations

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


def configure_table0(bridge: str, limit: int) -> None:
    """Make table 0 as small as a hardware switch's: the (limit+1)th flow is refused with an
    OpenFlow table-full error (overflow_policy=refuse) instead of OVS's default eviction-free
    growth. Also track ip_dst in the table's prefix tries (`prefixes`), which lets OVS wildcard
    the IPv4 destination bits no rule needs: a GET that misses Ruleset 2 (it matches the key
    hash as an IPv4 /32) then shares its datapath flow with every key of its ~2^14th of the
    hash space instead of installing one per key (docs/switch-rules.md, "Why this layout").
    The Flow_Table row is owned by the bridge and goes away with it."""
    subprocess.run(["ovs-vsctl", "--timeout=5", "--", "--id=@ft", "create", "Flow_Table",
                    f"flow_limit={limit}", "overflow_policy=refuse", "name=exo_table0", "prefixes=ip_dst",
                    "--", "set", "Bridge", bridge, "flow_tables:0=@ft"],
                   check=True, stdout=subprocess.DEVNULL)
