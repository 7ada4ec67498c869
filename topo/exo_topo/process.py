"""Stopping a child process: SIGTERM, a grace period, then SIGKILL. Shared by the emulated
cluster's teardown and the benchmark's (exo_bench)."""
from __future__ import annotations

import logging
import subprocess

log = logging.getLogger("exo_topo")


def terminate(proc: subprocess.Popen, name: str, grace: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        log.warning("%s did not exit on SIGTERM; killing", name)
        proc.kill()
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass
