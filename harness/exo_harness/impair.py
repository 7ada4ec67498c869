"""Link impairment at the client's NIC: loss, delay with jitter, duplication and reordering of
the frames a Client sends, and loss and duplication of the replies it receives.

Why here and not `tc qdisc ... netem`: the fault-injection campaign (experiments/exo_chaos)
uses netem on the Mininet links where the kernel has it (EmulatedCluster.set_netem). Kernels
built without sch_netem (the CI machines: "Specified qdisc kind is unknown") get the same
faults from this shim instead, wrapped around the Client's RawIO. The nodes see exactly what a
lossy link would hand them: lost, late, repeated and out-of-order request frames.

Semantics follow netem: a frame is lost with probability `loss`; otherwise it leaves after
`delay_s` +/- `jitter_s` (uniform), except that with probability `reorder` it leaves at once
(jumping the queue); with probability `duplicate` a second copy is scheduled independently.
"""
from __future__ import annotations

import heapq
import random
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Impairment:
    loss: float = 0.0
    delay_s: float = 0.0
    jitter_s: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0

    def __post_init__(self):
        for name in ("loss", "duplicate", "reorder"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], not {p}")
        if self.delay_s < 0 or self.jitter_s < 0:
            raise ValueError("delay_s and jitter_s must be >= 0")

    def describe(self) -> str:
        return (f"loss {self.loss:.0%} delay {self.delay_s * 1e3:g}ms +/- {self.jitter_s * 1e3:g}ms "
                f"duplicate {self.duplicate:.0%} reorder {self.reorder:.0%}")


class ImpairedIO:
    """Wraps an I/O object with send/recv/close and mac/ip/port (RawIO or a test fake)."""

    def __init__(self, io, imp: Impairment, seed: int | None = None, clock=time.monotonic):
        self.io = io
        self.imp = imp
        self.rng = random.Random(seed)
        self.clock = clock
        self._due: list[tuple[float, int, bytes]] = []  # (release time, tie-break, frame)
        self._n = 0
        self._rx_dups: list[bytes] = []
        self.stats = {"tx_lost": 0, "tx_duplicated": 0, "tx_reordered": 0, "tx_delayed": 0,
                      "rx_lost": 0, "rx_duplicated": 0}

    # the address fields the Client reads
    @property
    def mac(self):
        return self.io.mac

    @property
    def ip(self):
        return self.io.ip

    @property
    def port(self):
        return self.io.port

    def send(self, frame: bytes) -> None:
        copies = 1
        if self.rng.random() < self.imp.duplicate:
            copies = 2
            self.stats["tx_duplicated"] += 1
        for _ in range(copies):
            if self.rng.random() < self.imp.loss:
                self.stats["tx_lost"] += 1
                continue
            if self.rng.random() < self.imp.reorder:
                self.stats["tx_reordered"] += 1
                self.io.send(frame)
                continue
            delay = self.imp.delay_s + self.rng.uniform(-self.imp.jitter_s, self.imp.jitter_s)
            if delay <= 0:
                self.io.send(frame)
                continue
            self.stats["tx_delayed"] += 1
            self._n += 1
            heapq.heappush(self._due, (self.clock() + delay, self._n, frame))
        self._flush()

    def _flush(self) -> None:
        now = self.clock()
        while self._due and self._due[0][0] <= now:
            self.io.send(heapq.heappop(self._due)[2])

    def recv(self, timeout: float) -> bytes | None:
        deadline = self.clock() + max(0.0, timeout)
        while True:
            self._flush()
            if self._rx_dups:
                return self._rx_dups.pop(0)
            now = self.clock()
            wait = deadline - now
            if self._due:
                wait = min(wait, self._due[0][0] - now)
            data = self.io.recv(max(0.0, wait))
            if data is not None:
                if self.rng.random() < self.imp.loss:
                    self.stats["rx_lost"] += 1
                elif self.rng.random() < self.imp.duplicate:
                    self.stats["rx_duplicated"] += 1
                    self._rx_dups.append(data)
                    return data
                else:
                    return data
            if self.clock() >= deadline:
                self._flush()
                return None

    def close(self) -> None:
        # Frames still held back are lost with the link, as when a real link goes down.
        self._due.clear()
        self.io.close()
