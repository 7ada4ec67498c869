"""One exo-loadgen run at one offered rate, in the generator's namespace, pinned to the
generator's core. The same generator, pacing and latency code serve every case; only
`--protocol` and the destination change (emulator/README.md)."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .net import Endpoint
from .procs import GEN_CORE, pinned
from .search import Run


@dataclass
class Target:
    """What the generator sends to: the protocol and, where it is not a key-hash MAC, the server."""
    protocol: str = "exo"                 # exo | reflect | memcached
    keys: int = 10_000                    # key ids 0..keys-1, uniform
    dst: dict = field(default_factory=dict)  # {"mac":..,"ip":..,"port":..} overrides


@dataclass
class Loadgen:
    binary: Path
    config: Path          # resolved cluster JSON (the client's addresses)
    client: str
    gen: Endpoint
    out_dir: Path
    duration_s: float = 3.0
    drain_ms: int = 300
    seed: int = 12
    key_size: int = 16
    value_size: int = 512
    count: int = 0
    core: int = GEN_CORE  # the proxy case's direct comparison runs it on the proxy's core
    get_ratio: float = 1.0  # share of GETs, the rest PUTs (the replication cases' write phase: 0)

    def argv(self, t: Target, rate: float, out: Path) -> list[str]:
        a = [str(self.binary), "--config", str(self.config), "--client", self.client,
             "--iface", self.gen.iface, "--rate", f"{rate:.0f}", "--duration", str(self.duration_s),
             "--drain-ms", str(self.drain_ms), "--keys", str(t.keys), "--alpha", "0",
             "--key-size", str(self.key_size), "--value-size", str(self.value_size),
             "--seed", str(self.seed), "--out", str(out), "--quiet"]
        if t.protocol != "exo":
            a += ["--protocol", t.protocol]
        if self.get_ratio != 1.0:
            a += ["--get-ratio", f"{self.get_ratio:g}"]
        for k in ("mac", "ip", "port"):
            if k in t.dst:
                a += [f"--dst-{k}", str(t.dst[k])]
        return a

    def run(self, t: Target, rate: float, label: str) -> Run:
        self.count += 1
        out = self.out_dir / f"{label}-{self.count:03d}-{rate:.0f}.json"
        cmd = pinned(self.gen.netns, self.core, self.argv(t, rate, out))
        return run_of(run_generator("exo-loadgen", cmd, out, self.duration_s, self.drain_ms), rate, str(out))


def run_generator(tool: str, cmd: list[str], out: Path, duration_s: float, drain_ms: int) -> dict:
    """Run one generator (exo-loadgen or exo-mcload) to completion and read the JSON it wrote."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + drain_ms / 1000 + 60)
    if r.returncode != 0:
        raise RuntimeError(f"{tool} exited {r.returncode}: {r.stderr.strip()[-1500:]}")
    return json.loads(out.read_text())


def run_of(doc: dict, rate: float, path: str = "") -> Run:
    t = doc["totals"]
    return Run(rate=rate, offered_rps=t["offered_rps"], answered_rps=t["answered_rps"],
               loss=t["loss"], p50_us=t.get("p50_us"), p99_us=t.get("p99_us"),
               p999_us=t.get("p999_us"), errors=t.get("errors", 0),
               extra={"sent": t["sent"], "answered": t["answered"], "not_found": t.get("not_found", 0),
                      "from_cache": t.get("from_cache", 0), "rx_malformed": t.get("rx_malformed", 0),
                      "tx_errors": t.get("tx_errors", 0), "file": path})
