"""What a server spends per request, read with perf while the generator runs at a fixed rate:
CPU time and system calls per answered request (`perf stat`: task-clock and the
raw_syscalls:sys_enter tracepoint) and where the CPU time goes (`perf record`, top symbols).
This VM exposes no hardware counters (`cycles` is <not supported>), so cycles per request is
CPU time x the nominal clock from /proc/cpuinfo, labelled as an estimate. A busy-polling DPDK
loop is billed for its empty polls too, so its CPU time per request is only meaningful near its
ceiling: the bench measures evidence at 0.9 x each server's ceiling. Over the same window it
also reads how busy each core was (/proc/stat) and, for other processes it is given (the proxy
case's cache node, which shares the generator's core), their CPU time (/proc/<pid>/stat), so a
ceiling set by a full core elsewhere shows as such."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Callable, Optional

from .search import Run


def socket_drops(netns: str) -> Optional[int]:
    """Frames the server's sockets in `netns` dropped so far (packet and UDP sockets: `ss`'s
    skmem d field, summed): where a run's loss happened if the server fell behind."""
    r = subprocess.run(["ip", "netns", "exec", netns, "ss", "-0", "-u", "-a", "-m", "-n"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return sum(int(d) for d in re.findall(r"skmem:\([^)]*\bd(\d+)\)", r.stdout))


def cpu_mhz() -> Optional[float]:
    try:
        vals = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", Path("/proc/cpuinfo").read_text(), re.M)]
        return sum(vals) / len(vals) if vals else None
    except OSError:
        return None


def _parse_stat_csv(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) >= 3 and parts[0] and parts[0][0].isdigit():
            try:
                out[parts[2]] = float(parts[0])
            except ValueError:
                pass
    return out


def _top_symbols(report: str, n: int = 12) -> list[dict]:
    rows = []
    for line in report.splitlines():
        m = re.match(r"^\s+([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.+)$", line)
        if m:
            # perf pads the line with empty sort columns ("  -  -"): keep the symbol only.
            sym = re.sub(r"(\s+-)+\s*$", "", m.group(3)).strip()
            rows.append({"percent": float(m.group(1)), "object": m.group(2), "symbol": sym})
        if len(rows) >= n:
            break
    return rows


def core_ticks(stat_text: str) -> dict[str, tuple[int, int]]:
    """/proc/stat -> {cpu number: (busy jiffies, all jiffies)}; idle and iowait are not busy."""
    out = {}
    for line in stat_text.splitlines():
        m = re.match(r"^cpu(\d+)\s+(.*)$", line)
        if m:
            v = [int(x) for x in m.group(2).split()]
            idle = v[3] + (v[4] if len(v) > 4 else 0)
            out[m.group(1)] = (sum(v[:8]) - idle, sum(v[:8]))
    return out


def busy_share(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> dict[str, float]:
    """Share of each core's time spent busy between two core_ticks readings."""
    out = {}
    for cpu, (b1, t1) in after.items():
        b0, t0 = before.get(cpu, (0, 0))
        out[cpu] = round((b1 - b0) / (t1 - t0), 3) if t1 > t0 else 0.0
    return out


def process_ticks(pid: int) -> Optional[int]:
    """utime + stime of every thread of `pid`, in clock ticks (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)
    except (OSError, IndexError, ValueError):
        return None


class CpuWindow:
    """Core busy shares and other processes' CPU over `seconds` from start()."""

    def __init__(self, seconds: float, pids: dict[str, int]):
        self.seconds, self.pids = seconds, pids
        self.result: dict = {}
        self._thread = threading.Thread(target=self._measure, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _measure(self) -> None:
        c0 = core_ticks(Path("/proc/stat").read_text())
        p0 = {n: process_ticks(p) for n, p in self.pids.items()}
        threading.Event().wait(self.seconds)
        c1 = core_ticks(Path("/proc/stat").read_text())
        p1 = {n: process_ticks(p) for n, p in self.pids.items()}
        hz = os.sysconf("SC_CLK_TCK")
        self.result = {"cores_busy": busy_share(c0, c1),
                       "cpu_utilisation_of": {n: None if p0[n] is None or p1[n] is None
                                              else round((p1[n] - p0[n]) / hz / self.seconds, 3) for n in self.pids}}

    def join(self) -> dict:
        self._thread.join(timeout=self.seconds + 10)
        return self.result


def measure(pid: int, seconds: float, run: Callable[[], Run], out_dir: Path, label: str,
            others: Optional[dict[str, int]] = None) -> dict:
    """Runs `run()` (a generator run of about `seconds`) while perf watches `pid`; `others`:
    name -> pid of further processes whose CPU share over the window is recorded."""
    if not shutil.which("perf"):
        return {"error": "perf not installed (Debian package linux-perf)"}
    out_dir.mkdir(parents=True, exist_ok=True)
    data = out_dir / f"{label}.perf.data"
    window = max(0.5, seconds - 0.3)  # inside the send phase
    stat = subprocess.Popen(["perf", "stat", "-x,", "-e", "task-clock,raw_syscalls:sys_enter,context-switches",
                             "-p", str(pid), "--", "sleep", f"{window:.2f}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rec = subprocess.Popen(["perf", "record", "-F", "999", "-g", "-o", str(data), "-p", str(pid), "--",
                            "sleep", f"{window:.2f}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = CpuWindow(window, others or {})
    cpu.start()
    r = run()
    shares = cpu.join()
    _, err = stat.communicate(timeout=60)
    rec.wait(timeout=60)
    counts = _parse_stat_csv(err)
    answered_in_window = r.answered_rps * window
    ev: dict = {"rate": r.rate, "answered_rps": r.answered_rps, "loss": r.loss, "window_s": round(window, 2),
                **shares}
    if "task-clock" not in counts or answered_in_window <= 0:
        ev["error"] = f"perf stat gave nothing usable: {err.strip()[-300:]}"
        return ev
    task_ms = counts["task-clock"]  # perf reports msec
    ev["cpu_utilisation"] = round(task_ms / 1000 / window, 3)
    ev["cpu_ns_per_request"] = round(task_ms * 1e6 / answered_in_window, 1)
    mhz = cpu_mhz()
    if mhz:
        ev["cycles_per_request_estimate"] = round(ev["cpu_ns_per_request"] * mhz / 1000)
        ev["cpu_mhz_nominal"] = round(mhz)
    if "raw_syscalls:sys_enter" in counts:
        ev["syscalls_per_request"] = round(counts["raw_syscalls:sys_enter"] / answered_in_window, 2)
    if "context-switches" in counts:
        ev["context_switches_per_s"] = round(counts["context-switches"] / window)
    rep = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso,symbol",
                          "-g", "none", "--percent-limit", "1"], capture_output=True, text=True, timeout=120)
    ev["profile_top"] = _top_symbols(rep.stdout)
    ev["profile_file"] = str(data)
    return ev
