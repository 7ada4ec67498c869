"""One chaos client, run inside a Mininet client host by the campaign:

    python -m exo_chaos.worker --iface client0-eth0 --name client0 --key-ids 0,1,2,7 \
        --burst 6 --tick 0.02 --history run/client0.jsonl --impair-file run/impair-client0.json

GETs, PUTs (values unique per worker) and DELETEs over a few keys, recorded with invoke and
complete times in a History for the linearizability checker. The requests go in bursts: every
`tick` seconds of CLOCK_MONOTONIC the worker sends `burst` requests at once (Client.execute,
pipelined) and waits for their outcomes. CLOCK_MONOTONIC is one clock for every Mininet host
(one kernel), so all workers' bursts start together and their operations on one key overlap
in time: that is what makes the history hard to linearize (docs/chaos.md, overlap_share). A
tick that passes while a burst is still out is skipped, not made up for later.

Runs until SIGTERM/SIGINT or --duration, then saves the history. While it runs, --impair-file
(JSON fields of exo_harness.impair.Impairment; absent = none) is re-read before every burst: that
is how the campaign impairs this client's link on kernels without tc netem. Prints
{"progress": {...}} lines once a second.
"""
from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
from pathlib import Path

from exo_harness.history import History
from exo_harness.impair import ImpairedIO, Impairment
from exoskeleton import wire
from exoskeleton.client import Client, Request
from exoskeleton.rawio import RawIO


def chaos_key(i: int) -> bytes:
    return b"chaos:%03d" % i


class ImpairSwitch:
    """Polls the impairment file and applies it to the ImpairedIO."""

    def __init__(self, io: ImpairedIO, path: Path | None):
        self.io, self.path = io, path
        self.next_check = 0.0
        self.current = None

    def poll(self, now: float) -> None:
        if self.path is None or now < self.next_check:
            return
        self.next_check = now + 0.1
        try:
            spec = json.loads(self.path.read_text()) if self.path.exists() else None
        except (OSError, ValueError):
            return  # half-written: next poll
        if spec != self.current:
            self.current = spec
            self.io.imp = Impairment(**spec) if spec else Impairment()


class Mix:
    """The next request: a key drawn uniformly, GET / DELETE / PUT by the given shares, PUT
    values unique to this worker ("<name>:<n>")."""

    def __init__(self, name: str, keys: list[bytes], get_share: float, delete_share: float, seed: int):
        self.name, self.keys = name.encode(), keys
        self.get_share, self.delete_share = get_share, delete_share
        self.rng = random.Random(seed)
        self.n = 0

    def next(self) -> Request:
        self.n += 1
        key = self.rng.choice(self.keys)
        r = self.rng.random()
        if r < self.get_share:
            return Request(wire.OP_GET, key)
        if r < self.get_share + self.delete_share:
            return Request(wire.OP_DELETE, key)
        return Request(wire.OP_PUT, key, b"%s:%d" % (self.name, self.n))


def next_tick(now_ns: int, tick_ns: int) -> int:
    """The first multiple of tick_ns after now_ns (the same instants in every worker)."""
    return (now_ns // tick_ns + 1) * tick_ns


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iface", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--history", required=True, type=Path)
    ap.add_argument("--key-ids", help="comma-separated key numbers (keys are chaos:NNN)")
    ap.add_argument("--keys", type=int, default=8, help="without --key-ids: chaos:000 .. N-1")
    ap.add_argument("--burst", "--window", type=int, default=6, dest="burst",
                    help="requests sent together each tick")
    ap.add_argument("--tick", type=float, default=0.02, help="seconds between bursts")
    ap.add_argument("--rate", type=float, help="requests/s: sets --tick to burst / rate")
    ap.add_argument("--get-share", type=float, default=0.55)
    # Rare: a committed DELETE takes the key out of the cache until it is fetched again.
    ap.add_argument("--delete-share", type=float, default=0.005)
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--timeout", type=float, default=0.1, help="resend after (s)")
    ap.add_argument("--retries", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--impair-file", type=Path)
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--udp-port", type=int, default=7777)
    ap.add_argument("--service-ip", default="10.0.0.254")
    a = ap.parse_args(argv)

    stop = {"now": False}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.__setitem__("now", True))

    ids = [int(i) for i in a.key_ids.split(",")] if a.key_ids else range(a.keys)
    keys = [chaos_key(i) for i in ids]
    if a.rate:
        a.tick = a.burst / a.rate
    mix = Mix(a.name, keys, a.get_share, a.delete_share, a.seed)
    io = ImpairedIO(RawIO(a.iface), Impairment(), seed=a.seed)
    switch = ImpairSwitch(io, a.impair_file)
    history = History()
    client = Client(a.iface, io=io, history=history, history_name=a.name, timeout=a.timeout,
                    retries=a.retries, mtu=a.mtu, udp_port=a.udp_port, service_ip=a.service_ip,
                    window=a.burst)
    tick_ns = round(a.tick * 1e9)
    t0 = time.monotonic_ns()
    end = t0 + round(a.duration * 1e9)
    done = {"n": 0, "ok": 0, "bursts": 0, "ticks_skipped": 0}
    last_print = t0
    at = next_tick(t0, tick_ns)
    try:
        while not stop["now"]:
            now = time.monotonic_ns()
            if now >= end:
                break
            if now < at:
                time.sleep((at - now) / 1e9)
                continue
            switch.poll(now / 1e9)
            results = client.execute([mix.next() for _ in range(a.burst)])
            done["bursts"] += 1
            done["n"] += len(results)
            done["ok"] += sum(r.outcome == "ok" for r in results)
            now = time.monotonic_ns()
            following = next_tick(now, tick_ns)
            done["ticks_skipped"] += (following - at) // tick_ns - 1
            at = following
            if now - last_print >= 1_000_000_000:
                last_print = now
                print(json.dumps({"progress": {**done, "t": round((now - t0) / 1e9, 1),
                                               **client.stats}}), flush=True)
    finally:
        history.save(a.history)
        io.close()
    print(json.dumps({"done": {**done, **client.stats, **io.stats}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
