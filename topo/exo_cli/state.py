"""What `exo up` leaves behind for the other commands: one JSON state file per running cluster.

    /run/exo/<cluster>.json        (EXO_STATE_DIR overrides /run/exo)

The supervisor (supervisor.py) writes it in phases: "starting" (its pid, the run dir, the bridge),
then "up" (the client hosts and their pids, the named network namespaces, the proxy socket, the
controller's addresses), then "stopping"; it removes the file once its teardown has run. So a
state file whose supervisor is gone means a cluster that was not shut down (a SIGKILL): `exo
down` cleans up after it (cleanup.py). The file is world-readable so that `exo get/set/del` can
find the proxy socket without root.

A pid alone does not name a process for long (pids are reused), so a process is recorded as
(pid, start time in clock ticks since boot, field 22 of /proc/PID/stat) and counts as alive only
while both match.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

STATE_VERSION = 1
DEFAULT_STATE_DIR = "/run/exo"
PHASES = ("starting", "up", "stopping")


class StateError(RuntimeError):
    """A state file is missing, unreadable or not what `exo up` writes; the message names it."""


def state_dir() -> Path:
    return Path(os.environ.get("EXO_STATE_DIR") or DEFAULT_STATE_DIR)


def state_path(cluster: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", cluster) or cluster.startswith("."):
        raise StateError(f"cluster name {cluster!r}: only letters, digits, '.', '_' and '-' can name a state file")
    return state_dir() / f"{cluster}.json"


# ---- processes ----
def parse_stat(text: str) -> tuple[str, int]:
    """(state letter, start time in ticks) from the text of /proc/PID/stat. The command name
    (field 2) is in parentheses and may itself hold spaces and parentheses: split after the last ')'."""
    rest = text[text.rindex(")") + 2:].split()
    return rest[0], int(rest[19])


def proc_start(pid: int) -> Optional[int]:
    """The start time of live process `pid` (None if there is none, or only a zombie)."""
    try:
        state, start = parse_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None
    return None if state in ("Z", "X") else start


def same_process(pid: Optional[int], start: Optional[int]) -> bool:
    """Whether (pid, start) still names a live process."""
    return bool(pid) and start is not None and proc_start(pid) == start


# ---- the file ----
@dataclass
class ClusterState:
    data: dict
    path: Path

    @property
    def cluster(self) -> str:
        return self.data["cluster"]

    @property
    def phase(self) -> str:
        return self.data["phase"]

    @property
    def run_dir(self) -> Path:
        return Path(self.data["run_dir"])

    @property
    def log(self) -> Path:
        return Path(self.data["log"])

    @property
    def supervisor_pid(self) -> Optional[int]:
        return self.data.get("supervisor", {}).get("pid")

    def supervisor_alive(self) -> bool:
        sup = self.data.get("supervisor") or {}
        return same_process(sup.get("pid"), sup.get("start"))


REQUIRED = {"version": int, "cluster": str, "phase": str, "config": str, "run_dir": str, "log": str,
            "bridge": str, "openflow_port": int, "tag": str}
REQUIRED_UP = {"cluster_yaml": str, "proxy": dict, "hosts": dict, "controller": dict, "nodes": dict}


def validate(data: object, where: str) -> dict:
    """The state as exo up writes it, or StateError naming the file and the field."""
    if not isinstance(data, dict):
        raise StateError(f"{where}: not a JSON object")
    fields = dict(REQUIRED, **(REQUIRED_UP if data.get("phase") == "up" else {}))
    for key, kind in fields.items():
        if key not in data:
            raise StateError(f"{where}: field {key!r} is missing")
        if not isinstance(data[key], kind) or (kind is int and isinstance(data[key], bool)):
            raise StateError(f"{where}: field {key!r} must be a {kind.__name__}, not {data[key]!r}")
    if data["version"] != STATE_VERSION:
        raise StateError(f"{where}: version {data['version']} (this exo reads version {STATE_VERSION})")
    if data["phase"] not in PHASES:
        raise StateError(f"{where}: phase {data['phase']!r} is not one of {', '.join(PHASES)}")
    return data


def read(path: Path) -> ClusterState:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise StateError(f"{path}: no such state file") from None
    except OSError as err:
        raise StateError(f"{path}: {err.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise StateError(f"{path}: not JSON ({err})") from None
    return ClusterState(validate(data, str(path)), path)


def write(path: Path, data: dict) -> None:
    """Replace the file in one step (readers never see half a file); mode 0644."""
    validate(data, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "w") as f:
        f.write(json.dumps(data, indent=1) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def claim(path: Path, data: dict) -> bool:
    """Create the state file only if there is none (two `exo up` of one cluster cannot both
    win). False if it exists already."""
    validate(data, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o755)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with open(fd, "w") as f:
        f.write(json.dumps(data, indent=1) + "\n")
    return True


def remove(path: Path) -> None:
    path.unlink(missing_ok=True)


def all_states() -> tuple[list[ClusterState], list[str]]:
    """Every state file in the state dir, and the problems of those that cannot be read."""
    states, problems = [], []
    d = state_dir()
    try:
        paths = sorted(d.glob("*.json")) if d.is_dir() else []
    except PermissionError:
        raise StateError(f"{d}: no permission to read the state dir") from None
    for p in paths:
        try:
            states.append(read(p))
        except StateError as err:
            problems.append(str(err))
    return states, problems


def choose(states: list[ClusterState], cluster: Optional[str]) -> Optional[ClusterState]:
    """The state `--cluster NAME` names, or the only one there is. None: nothing is up (or not
    that cluster). StateError when several are up and none was named."""
    if cluster is not None:
        return next((s for s in states if s.cluster == cluster), None)
    if len(states) > 1:
        names = ", ".join(s.cluster for s in states)
        raise StateError(f"several clusters are up ({names}): name one with --cluster")
    return states[0] if states else None


def running(cluster: Optional[str]) -> ClusterState:
    """The state of the cluster a command is for (--cluster NAME, or the only one up), which
    must be up with its supervisor alive; StateError saying what to do otherwise."""
    states, _ = all_states()
    st = choose(states, cluster)
    if st is None:
        raise StateError(f"cluster {cluster!r} is not up" if cluster
                         else f"no cluster is up (no state file in {state_dir()}): `exo up` first")
    if st.phase != "up":
        raise StateError(f"cluster {st.cluster!r} is {st.phase}, not up")
    if not st.supervisor_alive():
        raise StateError(f"cluster {st.cluster!r}: its supervisor (pid {st.supervisor_pid}) is gone; "
                         f"`exo down --cluster {st.cluster}` cleans up")
    return st


def conflicts(new: dict, others: Iterable[dict]) -> list[str]:
    """Why a new cluster cannot start beside these others (their state data): the same run dir,
    bridge or OpenFlow port (the cluster's start would delete the other's bridge, or the
    switches would reach the wrong controller), or a cache node name (a cache node's DPDK runtime
    directory is /var/run/dpdk/exo-<name>: a second one of that name cannot start)."""
    out = []
    for o in others:
        if o["cluster"] == new["cluster"]:
            continue  # the same cluster: the caller says "already up" instead
        for field, what in (("run_dir", "run dir"), ("bridge", "bridge (switch.bridge)"),
                            ("openflow_port", "OpenFlow port (controller.openflow_port)")):
            if o[field] == new[field]:
                out.append(f"cluster {o['cluster']!r} (up) uses the same {what}: {new[field]}")
        shared = sorted(set(o.get("cache_nodes", [])) & set(new.get("cache_nodes", [])))
        if shared:
            out.append(f"cluster {o['cluster']!r} (up) has cache nodes of the same name (DPDK --file-prefix "
                       f"exo-<name>): {', '.join(shared)}")
    return out


# ---- how to reach a running cluster ----
def netns_name(cluster: str, host: str) -> str:
    """The name `exo up` gives a client host's network namespace (`ip netns exec NAME ...`)."""
    return f"exo-{cluster}-{host}"


def reach_lines(data: dict, name_it: bool = False) -> list[str]:
    """What `exo up` prints once the cluster is up: where everything is and how to get in.
    name_it: other clusters are up too, so the suggested commands say --cluster."""
    n = data["nodes"]
    ctl = data["controller"]
    proxy = data["proxy"]
    lines = [
        f"cluster {data['cluster']!r} is up: {len(n['cache'])} cache ({', '.join(n['cache'])}), "
        f"{len(n['db'])} db ({', '.join(n['db'])}), {len(data['hosts'])} client hosts",
        f"  supervisor  pid {data['supervisor']['pid']}, log {data['log']}, state {data['state_file']}",
        f"  controller  gRPC {ctl['grpc']}, OpenFlow {ctl['openflow']}, log {data['run_dir']}/controller.log",
        f"  switch      Open vSwitch bridge {data['bridge']}: "
        f"ovs-ofctl -O OpenFlow13 dump-flows {data['bridge']}",
        f"  proxy       exo-proxy in {proxy['host']}: unix socket {proxy['unix']} "
        f"(and {proxy['tcp']} inside {proxy['host']})",
        "client hosts (raw frames need root; run a command inside one with either line):",
    ]
    for name, h in data["hosts"].items():
        lines.append(f"  {name}  {h['iface']} {h['ip']} {h['mac']}")
        lines.append(f"      ip netns exec {h['netns']} CMD")
        lines.append(f"      mnexec -a {h['pid']} CMD")
    sel = f" --cluster {data['cluster']}" if name_it else ""
    lines += [
        "next:",
        f"  exo set{sel} hello world; exo get{sel} hello; exo del{sel} hello",
        f"  exo stats{sel} --watch        exo rules{sel}        exo down{sel}",
    ]
    return lines
