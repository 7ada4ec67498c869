"""Clean up after a cluster whose supervisor is gone (SIGKILL, a crash) or whose teardown did not
finish: what `exo down` does when signalling the supervisor is not enough.

Everything the supervisor starts (the controller, the Mininet host and switch shells, the nodes,
exo-proxy) inherits one environment variable, EXO_UP_TAG=<tag>, so those processes are found by
reading /proc/*/environ, whichever phase the supervisor died in, without trusting pids that may
have been reused. The Open vSwitch daemons are started before the tag is set (and are skipped by
name besides): other clusters may share them. Mininet's hosts are unnamed network namespaces held
by their processes, so killing the processes removes them with their veth pairs; what outlives
them is the OVS bridge, the names `exo up` gave the client namespaces (/run/netns), the switch
side of a veth whose peer is already gone, and the proxy socket file.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterable

from exo_topo import ovs

TAG_ENV = "EXO_UP_TAG"
SPARED = {"ovsdb-server", "ovs-vswitchd"}  # shared daemons, never killed here


def tagged(environ: bytes, tag: str) -> bool:
    """Whether a process's /proc/PID/environ (NUL-separated) carries EXO_UP_TAG=tag."""
    return f"{TAG_ENV}={tag}".encode() in environ.split(b"\0")


def tagged_pids(tag: str, exclude: Iterable[int] = ()) -> list[int]:
    skip = {os.getpid(), os.getppid(), *exclude}
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue  # exited meanwhile, or a kernel thread
        if comm not in SPARED and tagged(env, tag):
            out.append(int(entry))
    return sorted(out)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def stop_processes(pids: list[int], grace: float = 3.0) -> list[int]:
    """SIGTERM, then SIGKILL what is left after `grace` s (interactive shells ignore SIGTERM).
    Returns the pids still alive after that (none, normally)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            if not pids:
                return []
            time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)


def named_netns() -> list[str]:
    return [line.split()[0] for line in _run("ip", "netns", "list").stdout.splitlines() if line.strip()]


def bridges() -> list[str]:
    if not ovs.running():
        return []
    return _run("ovs-vsctl", "--timeout=5", "list-br").stdout.split()


def switch_ports(bridge: str) -> list[str]:
    """Root-namespace interfaces Mininet named after the switch (<bridge>-ethN)."""
    out = []
    for line in _run("ip", "-o", "link", "show").stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            name = parts[1].strip().split("@", 1)[0]
            if name.startswith(f"{bridge}-eth"):
                out.append(name)
    return out


def cleanup(data: dict, say: Callable[[str], None] = print) -> list[str]:
    """Remove what the supervisor of state `data` left. Returns what is still there afterwards
    (empty when everything went); each step runs even if an earlier one failed."""
    left: list[str] = []
    prefix = f"exo-{data['cluster']}-"
    for ns in sorted(set(data.get("netns", [])) | {n for n in named_netns() if n.startswith(prefix)}):
        if ns in named_netns():
            r = _run("ip", "netns", "del", ns)
            say(f"  deleted network namespace name {ns}" if r.returncode == 0
                else f"  ip netns del {ns}: {r.stderr.strip()}")
    pids = tagged_pids(data["tag"])  # the supervisor too, if it is still there
    if pids:
        say(f"  stopping {len(pids)} processes the supervisor started: "
            + ", ".join(_describe(p) for p in pids))
        for pid in stop_processes(pids):
            left.append(f"process {_describe(pid)}")
    if data["bridge"] in bridges():
        ovs.delete_bridge(data["bridge"])
        say(f"  deleted bridge {data['bridge']}")
        if data["bridge"] in bridges():
            left.append(f"bridge {data['bridge']}")
    mgmt = f"{data['bridge']}-m"  # the management network (exo_topo/mgmt_net.py)
    if mgmt in bridges():
        ovs.delete_bridge(mgmt)
        say(f"  deleted bridge {mgmt}")
    for intf in switch_ports(data["bridge"]):
        _run("ip", "link", "del", intf)
        say(f"  deleted interface {intf}")
    for ns in named_netns():
        if ns.startswith(prefix):
            left.append(f"network namespace name {ns}")
    proxy_sock = (data.get("proxy") or {}).get("unix") or str(Path(data["run_dir"]) / "proxy.sock")
    Path(proxy_sock).unlink(missing_ok=True)
    if data.get("started_ovs") and ovs.running() and not bridges():
        ovs.stop()
        say("  stopped Open vSwitch (the supervisor had started it; no bridge is left)")
    return left


def _describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"{pid} ({cmd[:60]})"
