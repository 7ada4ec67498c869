"""wrk (Debian's) against the catalogue, in a Mininet host, one segment at a time, with
examples/webapp/zipf.lua choosing Zipf-popular URLs and printing a summary line the demo reads
(demo_web_report.parse_wrk). An action can run at a given second of a segment (the cache node
kill) while wrk keeps sending."""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .demo_web_report import parse_wrk


@dataclass(frozen=True)
class Load:
    url: str                  # http://127.0.0.1:PORT
    lua: Path
    items: int
    alpha: float
    threads: int = 2
    connections: int = 16
    timeout_s: float = 5.0    # wrk counts a request with no response by then as a timeout error


def wrk_command(load: Load, seconds: float, seed: int) -> list[str]:
    return ["wrk", f"-t{load.threads}", f"-c{load.connections}", f"-d{max(1, round(seconds))}s", "--latency",
            "--timeout", f"{load.timeout_s:g}s", "-s", str(load.lua), load.url,
            "--", str(load.items), f"{load.alpha:g}", str(seed)]


def run_segment(cl, host: str, load: Load, seconds: float, seed: int, log: Path,
                action_at: Optional[float] = None, action: Optional[Callable[[], dict]] = None) -> dict:
    """Run wrk for `seconds` in `host`; if given, call action() `action_at` seconds after wrk
    started. Returns {"wrk": parsed summary, "wrk_text": wrk's own summary, "started": monotonic
    start, "action": what action() returned, "action_at_s": when it ran}."""
    cmd = wrk_command(load, seconds, seed)
    started = time.monotonic()
    proc = cl.host(host).popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acted, acted_at = None, None
    try:
        if action is not None and action_at is not None:
            time.sleep(max(0.0, started + action_at - time.monotonic()))
            acted_at = time.monotonic() - started
            acted = action()
        out, err = proc.communicate(timeout=seconds + load.timeout_s + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{out}{err}\n")
    if proc.returncode != 0:
        raise RuntimeError(f"wrk exited with {proc.returncode}: {err.strip()[-1000:]} (log: {log})")
    parsed, text = parse_wrk(out)
    return {"wrk": parsed, "wrk_text": text, "command": cmd, "started": started,
            "action": acted, "action_at_s": acted_at}
