"""One exo-mcload run at one offered rate: memcached text-protocol GETs over many TCP
connections, open loop, in the generator's namespace pinned to the generator's core. Its JSON
has exo-loadgen's totals (emulator/mcload/README.md), so `run_of` reads it and search.py judges
it by the same loss rule; the TCP-only counters go into `Run.extra`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .loadgen import Target, run_generator, run_of
from .procs import GEN_CORE, pinned
from .search import Run

# Totals of exo-mcload beyond exo-loadgen's, kept with every run.
MCLOAD_EXTRA = ("hits", "misses", "error_replies", "wrong_key", "wrong_value_size", "malformed", "timeouts",
                "expired", "unwritten", "lost_on_dropped", "backlog_max", "connections", "connections_open_at_end",
                "syscalls_per_request", "cpu_user_s", "cpu_sys_s", "first_error", "first_error_reply")


@dataclass
class McLoad:
    binary: Path
    netns: str
    out_dir: Path
    connections: int = 128
    depth: int = 1
    duration_s: float = 3.0
    drain_ms: int = 300
    # A request that waited this long for a free connection is dropped and lost: the generator's
    # queue is bounded like a UDP server's socket buffer. Without it TCP only queues, and a run
    # well past the server's capacity would still pass the loss rule within the drain
    # (emulator/mcload/driver.h).
    max_wait_ms: int = 50
    seed: int = 12
    key_size: int = 16
    value_size: int = 512  # a hit with another size counts as an error
    count: int = 0

    def argv(self, t: Target, rate: float, out: Path) -> list[str]:
        if t.protocol != "memcached-tcp":
            raise ValueError(f"exo-mcload speaks memcached over TCP, not {t.protocol!r}")
        where = ["--unix", t.dst["unix"]] if "unix" in t.dst else ["--server", t.dst.get("server", "127.0.0.1:11211")]
        return [str(self.binary), *where, "--rate", f"{rate:.0f}", "--duration", str(self.duration_s),
                "--drain-ms", str(self.drain_ms), "--max-wait-ms", str(self.max_wait_ms),
                "--connections", str(self.connections), "--depth", str(self.depth),
                "--keys", str(t.keys), "--alpha", "0", "--key-size", str(self.key_size),
                "--expect-value-size", str(self.value_size), "--seed", str(self.seed), "--out", str(out), "--quiet"]

    def run(self, t: Target, rate: float, label: str) -> Run:
        self.count += 1
        out = self.out_dir / f"{label}-{self.count:03d}-{rate:.0f}.json"
        cmd = pinned(self.netns, GEN_CORE, self.argv(t, rate, out))
        doc = run_generator("exo-mcload", cmd, out, self.duration_s, self.drain_ms)
        run = run_of(doc, rate, str(out))
        run.extra.update({k: doc["totals"][k] for k in MCLOAD_EXTRA if k in doc["totals"]})
        return run
