"""Processes the bench starts: each in a namespace, pinned to one core with taskset, its output
in a log file, and always stopped (exo_topo.process.terminate: SIGTERM, then SIGKILL) when the `Procs` block ends, also on
an exception or Ctrl-C. `ip netns exec` and `taskset` exec the program, so Popen.pid is the
program's own pid (perf attaches to it)."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Callable, Optional

from exo_topo.process import terminate

GEN_CORE = 0  # the load generator (and anything driving it)
SRV_CORE = 1  # the server under test


def pinned(netns: Optional[str], core: Optional[int], cmd: list[str]) -> list[str]:
    pre = ["ip", "netns", "exec", netns] if netns else []
    pin = ["taskset", "-c", str(core)] if core is not None else []
    return [*pre, *pin, *cmd]


class Procs:
    """The processes of one case; `with Procs(run_dir) as p: p.start(...)`."""

    def __init__(self, log_dir: Path):
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._live: list[tuple[str, subprocess.Popen]] = []

    def __enter__(self) -> "Procs":
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()

    def start(self, name: str, netns: Optional[str], core: Optional[int], cmd: list[str],
              stdin=subprocess.DEVNULL) -> subprocess.Popen:
        logf = open(self.log_dir / f"{name}.log", "wb")
        proc = subprocess.Popen(pinned(netns, core, cmd), stdout=logf, stderr=subprocess.STDOUT,
                                stdin=stdin, start_new_session=True)
        logf.close()
        self._live.append((name, proc))
        return proc

    def check_alive(self, name: str, proc: subprocess.Popen) -> None:
        if proc.poll() is not None:
            tail = (self.log_dir / f"{name}.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{name} exited with status {proc.returncode}:\n{tail}")

    def stop(self, proc: subprocess.Popen, grace: float = 5.0) -> None:
        for i, (name, p) in enumerate(self._live):
            if p is proc:
                terminate(p, name, grace)
                del self._live[i]
                return

    def stop_all(self) -> None:
        while self._live:
            name, p = self._live.pop()
            terminate(p, name, 5.0)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0,
               alive: Optional[Callable[[], None]] = None) -> None:
    """Poll `check` until it is true; `alive` raises if a process it depends on died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive:
            alive()
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
