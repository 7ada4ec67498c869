"""Start and stop one systemd unit instance the way systemd would, inside a machine's network
namespace: `ip netns exec <ns> setpriv <user, groups, capabilities> -- <ExecStart>` with the unit's
environment only (units.Launch), its umask, its runtime and state directories made and owned by
its user, stdout and stderr to a log file (systemd's journal here).

`ip netns exec` and setpriv both exec, so the Popen's pid is the service's own: stop() sends it
SIGTERM as `systemctl stop` does, then SIGKILL after the grace period (systemd's
TimeoutStopSec, shorter here).
"""
from __future__ import annotations

import os
import pwd
import resource
import signal
import subprocess
from pathlib import Path
from typing import Optional

from units import Launch

# Linux capability numbers (linux/capability.h) of every capability a unit here may name.
CAPABILITY_BITS = {"chown": 0, "dac_override": 1, "dac_read_search": 2, "fowner": 3, "kill": 5, "setgid": 6,
                   "setuid": 7, "net_bind_service": 10, "net_admin": 12, "net_raw": 13, "ipc_lock": 14,
                   "sys_rawio": 17, "sys_admin": 21, "sys_nice": 23, "sys_resource": 24}


def cap_names(hex_mask: str) -> list[str]:
    """"0000000000003000" -> ["net_admin", "net_raw"]; an unnamed bit shows as "cap<N>"."""
    mask = int(hex_mask.strip(), 16)
    names = {bit: name for name, bit in CAPABILITY_BITS.items()}
    return sorted(names.get(b, f"cap{b}") for b in range(64) if mask >> b & 1)


def hard_limits() -> dict[str, int]:
    """This process's hard limits for the resources units set (-1: unlimited)."""
    out = {}
    for name, res in (("nofile", resource.RLIMIT_NOFILE), ("memlock", resource.RLIMIT_MEMLOCK)):
        hard = resource.getrlimit(res)[1]
        out[name] = -1 if hard == resource.RLIM_INFINITY else hard
    return out


BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


class Service:
    def __init__(self, launch: Launch, netns: str, log_path: Path):
        self.launch, self.netns, self.log_path = launch, netns, log_path
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    @property
    def name(self) -> str:
        return self.launch.unit

    def argv(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *self.launch.setpriv_argv(hard_limits())]

    def lowered_limits(self) -> dict[str, str]:
        return self.launch.prlimit_options(hard_limits())[1]

    def start(self) -> None:
        if self.running():
            raise RuntimeError(f"{self.name} is already running (pid {self.proc.pid})")
        pw = pwd.getpwnam(self.launch.user)
        for d in self.launch.make_dirs:
            d.mkdir(parents=True, exist_ok=True)
            os.chown(d, pw.pw_uid, pw.pw_gid)
        env = dict(BASE_ENV, HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name, **self.launch.env)
        with open(self.log_path, "ab") as log:
            log.write(f"==== start {self.starts + 1}: {' '.join(self.launch.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.argv(), env=env, cwd="/", umask=self.launch.umask,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.starts += 1

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_code(self) -> Optional[int]:
        return None if self.proc is None else self.proc.poll()

    def stop(self, grace: float = 5.0, sig: int = signal.SIGTERM) -> Optional[int]:
        """`sig` (SIGTERM), then SIGKILL after `grace` seconds. Returns the exit status (None if
        never run; -9 after a SIGKILL)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode

    def identity(self) -> dict:
        """What the kernel says the running service is: uid, gid, capabilities (CapEff, CapBnd,
        CapAmb as sets of names), NoNewPrivs, its open-files limit."""
        if not self.running():
            raise RuntimeError(f"{self.name} is not running")
        status = dict(line.split(":", 1) for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines()
                      if ":" in line)
        limits = Path(f"/proc/{self.proc.pid}/limits").read_text()
        nofile = next((ln.split()[3] for ln in limits.splitlines() if ln.startswith("Max open files")), "?")
        return {"uid": int(status["Uid"].split()[1]), "gid": int(status["Gid"].split()[1]),
                "cap_eff": cap_names(status["CapEff"]), "cap_bnd": cap_names(status["CapBnd"]),
                "cap_amb": cap_names(status["CapAmb"]), "no_new_privs": status["NoNewPrivs"].strip() == "1",
                "max_open_files": nofile}

    def log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""
