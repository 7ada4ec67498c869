"""One load-generator run on the bench cluster, with the nodes' counters around it.

exo-loadgen runs inside the client host and writes its JSON (emulator/README.md); the nodes'
counters (DbNode.Stats of every emulated wimpy, CacheNode.Stats) are read before and after, so
each run also says where the load went: per-node arrivals (served + dropped by the node's
limit) and per-node served rates.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from exo_testbed.scale import Scale
from .throughput import Measurement

LOADGEN = "emulator/exo-loadgen"  # relative to the build dir
CACHE = "cache0"


@dataclass
class Workload:
    alpha: float                 # 0 = uniform
    keys: int
    get_ratio: float = 1.0
    swap_every_s: float = 0.0
    swap_count: int = 0
    seed: int = 1


def _arrived(c: dict) -> int:
    return c.get("rx_frames", 0) + c.get("rate_limited", 0)


def _delta(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items()}


def loadgen_cmd(cluster, rate: float, duration: float, wl: Workload, out: Path, scale: Scale,
                bin_ms: int = 1000) -> list[str]:
    return [str(cluster.build_dir / LOADGEN), "--config", str(cluster.resolved), "--client", "client0",
            "--rate", f"{rate:.1f}", "--duration", f"{duration:g}", "--keys", str(wl.keys),
            "--alpha", f"{wl.alpha:g}", "--get-ratio", f"{wl.get_ratio:g}",
            "--key-size", str(scale.key_size), "--value-size", str(scale.value_size),
            "--swap-every", f"{wl.swap_every_s:g}", "--swap-count", str(wl.swap_count),
            "--seed", str(wl.seed), "--bin-ms", str(bin_ms), "--out", str(out)]


def run_loadgen(cluster, cmd: list[str], timeout: float, log_name: str) -> dict:
    proc = cluster.popen_in("client0", cmd, log_name)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
        raise RuntimeError(f"exo-loadgen did not finish within {timeout:.0f} s")
    out = Path(cmd[cmd.index("--out") + 1])
    if rc != 0 or not out.exists():
        tail = (cluster.run_dir / f"{log_name}.log").read_text(errors="replace")[-1500:]
        raise RuntimeError(f"exo-loadgen exited with {rc}:\n{tail}")
    return json.loads(out.read_text())


def measure(cluster, scale: Scale, rate: float, duration: float, wl: Workload, out: Path,
            bin_ms: int = 1000, label: str = "") -> Measurement:
    """Runs the generator at `rate` and returns the run as a throughput-search Measurement."""
    names = [d.name for d in cluster.cfg.db_nodes]
    load_before = os.getloadavg()[0]  # the 2 cores are shared: how busy the host was is part of the result
    before = {n: cluster.stubs.stats(n) for n in [*names, CACHE]}
    report = run_loadgen(cluster, loadgen_cmd(cluster, rate, duration, wl, out, scale, bin_ms),
                         timeout=duration + 60, log_name="loadgen")
    after = {n: cluster.stubs.stats(n) for n in [*names, CACHE]}
    d = {n: _delta(after[n], before[n]) for n in after}
    tot = report["totals"]
    sent = max(1, tot["sent"])
    shares = {n: _arrived(d[n]) / sent for n in d}
    caps = {n: scale.node_rps for n in names}
    caps[CACHE] = scale.cache_rps
    served = {n: d[n].get("requests_served", 0) / duration for n in names}
    served[CACHE] = d[CACHE].get("hits", 0) / duration
    m = Measurement(offered_rps=tot["sent"] / duration, answered_rps=tot["answered"] / duration,
                    loss=tot["lost"] / sent, shares=shares, capacities=caps,
                    detail={"served_rps": served,
                            "rate_limited": {n: d[n].get("rate_limited", 0) for n in d},
                            "from_cache": tot.get("from_cache", 0) / sent,
                            "p50_us": tot.get("p50_us"), "p99_us": tot.get("p99_us"),
                            "duration_s": duration, "loadgen": str(out), "requested_rps": rate,
                            "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]})
    print(f"  {label} offered {m.offered_rps:8.0f}/s answered {m.answered_rps:8.0f}/s "
          f"loss {100 * m.loss:5.2f}% from cache {100 * m.detail['from_cache']:5.1f}% "
          f"load {m.detail['loadavg_1m'][1]:.1f}",
          file=sys.stderr, flush=True)
    return m


def served_sorted(m: Measurement, names: list[str], node_rps: float) -> list[float]:
    """Per-db-node utilisation (served / limit), highest first (Figure 4.1's x axis)."""
    return sorted((m.detail["served_rps"][n] / node_rps for n in names), reverse=True)


def ensure_dir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def maybe(v: Optional[float], nd: int = 3) -> Optional[float]:
    return None if v is None else round(v, nd)
