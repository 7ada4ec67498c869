"""One chaos client, run inside a Mininet client host by the campaign:

    python -m exo_chaos.worker --iface client0-eth0 --name client0 --keys 24 --rate 150 \
        --history run/client0.jsonl --impair-file run/impair-client0.json

GETs, PUTs (values unique per worker) and DELETEs over a small key set, so that keys are hot
(cached) and operations on one key overlap, recorded with invoke/complete times in a History
for the linearizability checker. Runs until SIGTERM/SIGINT or --duration, then saves the
history. While it runs, --impair-file (JSON fields of exoskeleton.impair.Impairment; absent =
none) is re-read every 100 ms: that is how the campaign impairs this client's link on kernels
without tc netem. Prints {"progress": {...}} lines once a second.
"""
from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
from pathlib import Path

from exoskeleton import wire
from exoskeleton.client import Client, Request
from exoskeleton.history import History
from exoskeleton.impair import ImpairedIO, Impairment
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iface", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--history", required=True, type=Path)
    ap.add_argument("--keys", type=int, default=24)
    ap.add_argument("--rate", type=float, default=150.0, help="requests/s started (at most)")
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--get-share", type=float, default=0.65)
    ap.add_argument("--delete-share", type=float, default=0.05)
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--timeout", type=float, default=0.25)
    ap.add_argument("--retries", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--impair-file", type=Path)
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--udp-port", type=int, default=7777)
    ap.add_argument("--service-ip", default="10.0.0.254")
    a = ap.parse_args(argv)

    stop = {"now": False}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.__setitem__("now", True))

    rng = random.Random(a.seed)
    io = ImpairedIO(RawIO(a.iface), Impairment(), seed=a.seed)
    switch = ImpairSwitch(io, a.impair_file)
    history = History()
    client = Client(a.iface, io=io, history=history, history_name=a.name, timeout=a.timeout,
                    retries=a.retries, mtu=a.mtu, udp_port=a.udp_port, service_ip=a.service_ip,
                    window=a.window)
    t0 = time.monotonic()
    end = t0 + a.duration
    done = {"n": 0, "ok": 0}
    last_print = [t0]

    def requests():
        n = 0
        next_at = time.monotonic()
        while not stop["now"]:
            now = time.monotonic()
            switch.poll(now)
            if now >= end:
                return
            if now < next_at:
                time.sleep(min(next_at - now, 0.01))
                continue
            next_at += 1.0 / a.rate
            n += 1
            key = chaos_key(rng.randrange(a.keys))
            r = rng.random()
            if r < a.get_share:
                yield Request(wire.OP_GET, key)
            elif r < a.get_share + a.delete_share:
                yield Request(wire.OP_DELETE, key)
            else:
                yield Request(wire.OP_PUT, key, b"%s:%d" % (a.name.encode(), n))

    def on_result(res) -> None:
        done["n"] += 1
        done["ok"] += res.outcome == "ok"
        now = time.monotonic()
        if now - last_print[0] >= 1.0:
            last_print[0] = now
            print(json.dumps({"progress": {**done, "t": round(now - t0, 1), **client.stats}}), flush=True)

    try:
        client.stream(requests(), on_result)
    finally:
        history.save(a.history)
        io.close()
    print(json.dumps({"done": {**done, **client.stats, **io.stats}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
