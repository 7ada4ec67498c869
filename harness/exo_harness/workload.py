"""Workload worker, run inside a client host by `exo demo` and the experiments:

    python -m exo_harness.workload --iface client0-eth0 load --first 0 --count 50000 --out r.json
    python -m exo_harness.workload --iface client0-eth0 run --duration 30 --alpha 0.99 --out r.json
    python -m exo_harness.workload ... run --duration 60 --swap-at 30 --swap-count 50   # hot set moves

Prints one JSON object per line on stdout while it works ({"progress": ...}) and writes its
result to --out (JSON, plus latencies as .npy beside it), so nothing has to parse free text.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np

from exoskeleton import wire
from exoskeleton.client import Client, Request, Result

from .keyspace import HotSetSwap, ZipfRanks, key_name


def _value(tag: int, size: int) -> bytes:
    head = b"v%d:" % tag
    return (head + b"x" * size)[:size]


class Tally:
    def __init__(self):
        self.ops = self.gets = self.puts = self.errors = self.timeouts = 0
        self.from_cache = self.not_found = 0
        self.latencies_us: list[float] = []
        # GETs answered OK, by who answered (the reply's FROM_CACHE flag): a cache node or a db node
        self.get_latencies_us = {"cache": [], "db": []}
        self.series = _Series()
        self.swapped_at: list[float] = []  # seconds into a run at which the hot set was swapped

    def add(self, r: Result) -> None:
        self.series.add(r)
        self.ops += 1
        if r.request.op == wire.OP_GET:
            self.gets += 1
        else:
            self.puts += 1
        if r.status is None:
            self.timeouts += 1
            self.errors += 1
            return
        if r.status not in (wire.ST_OK, wire.ST_NOT_FOUND):
            self.errors += 1
        if r.status == wire.ST_NOT_FOUND:
            self.not_found += 1
        if r.from_cache:
            self.from_cache += 1
        self.latencies_us.append(r.latency_s * 1e6)
        if r.request.op == wire.OP_GET and r.status == wire.ST_OK:
            self.get_latencies_us["cache" if r.from_cache else "db"].append(r.latency_s * 1e6)

    def summary(self) -> dict:
        return {"ops": self.ops, "gets": self.gets, "puts": self.puts, "errors": self.errors,
                "timeouts": self.timeouts, "not_found": self.not_found,
                "gets_from_cache_flag": self.from_cache}


class _Series:
    """Per-second counts by completion time, from the first result on: the time series the
    experiments plot (share of GETs answered by cache nodes around a hot-set swap, ...)."""

    FIELDS = ("ops", "gets", "gets_from_cache", "errors")

    def __init__(self):
        self.start = time.monotonic()
        self.rows: list[dict[str, int]] = []

    def add(self, r: Result) -> None:
        sec = int(time.monotonic() - self.start)
        while len(self.rows) <= sec:
            self.rows.append(dict.fromkeys(self.FIELDS, 0))
        row = self.rows[sec]
        row["ops"] += 1
        if r.request.op == wire.OP_GET:
            row["gets"] += 1
            if r.from_cache and r.status is not None:
                row["gets_from_cache"] += 1
        if r.status is None or r.status not in (wire.ST_OK, wire.ST_NOT_FOUND):
            row["errors"] += 1


class _Every:
    """True at most once per `seconds`: paces progress lines."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.last = time.monotonic()

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self.last < self.seconds:
            return False
        self.last = now
        return True


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run_load(c: Client, args) -> Tally:
    t = Tally()
    tick = _Every(0.5)

    def reqs():
        for rank in range(args.first, args.first + args.count):
            yield Request(wire.OP_PUT, key_name(rank), _value(rank, args.value_size))

    def on(r: Result) -> None:
        t.add(r)
        if tick():
            _emit({"progress": t.ops, "total": args.count, "errors": t.errors})

    c.stream(reqs(), on)
    _emit({"progress": t.ops, "total": args.count, "errors": t.errors})
    return t


def run_mix(c: Client, args) -> Tally:
    t = Tally()
    zipf = ZipfRanks(args.keys, args.alpha, seed=args.seed)
    rng = np.random.default_rng(args.seed + 1)
    keys = HotSetSwap(args.keys, min(args.swap_count, args.keys // 2))
    swaps_due = sorted(args.swap_at)
    signalled = []  # SIGUSR1 asks for a swap now (tests swap once the cache is stable)
    signal.signal(signal.SIGUSR1, lambda *_: signalled.append(True))
    start = time.monotonic()
    t.series.start = start
    stop_at = start + args.duration
    tick = _Every(1.0)
    tag = args.seed << 20

    def reqs():
        nonlocal tag
        while True:
            # Swaps are checked every 64 requests: at the demo's rates that is well under 10 ms.
            ranks = zipf.sample(64)
            is_get = rng.random(64) < args.get_ratio
            while signalled or (swaps_due and time.monotonic() - start >= swaps_due[0]):
                if signalled:
                    signalled.pop()
                else:
                    swaps_due.pop(0)
                keys.swap()
                t.swapped_at.append(round(time.monotonic() - start, 3))
                _emit({"swap": keys.swaps, "at_s": round(time.monotonic() - start, 3)})
            for rank, g in zip(ranks, is_get):
                if g:
                    yield Request(wire.OP_GET, keys.key(int(rank)))
                else:
                    tag += 1
                    yield Request(wire.OP_PUT, keys.key(int(rank)), _value(tag, args.value_size))

    def on(r: Result) -> None:
        t.add(r)
        if tick():
            _emit({"progress": round(time.monotonic() - start, 2), "total": args.duration,
                   "ops": t.ops, "errors": t.errors})

    c.stream(reqs(), on, stop_at=stop_at)
    _emit({"progress": args.duration, "total": args.duration, "ops": t.ops, "errors": t.errors})
    return t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m exo_harness.workload")
    p.add_argument("--iface", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--timeout", type=float, default=0.25)
    p.add_argument("--retries", type=int, default=4)
    p.add_argument("--mtu", type=int, default=1500)
    p.add_argument("--udp-port", type=int, default=7777)
    p.add_argument("--service-ip", default="10.0.0.254",
                   help="accepted, unused: a request's IPv4 dst carries its key hash")
    p.add_argument("--value-size", type=int, default=128)
    p.add_argument("--seed", type=int, default=1)
    sub = p.add_subparsers(dest="mode", required=True)
    lo = sub.add_parser("load", help="PUT keys key:first .. key:first+count-1")
    lo.add_argument("--first", type=int, default=0)
    lo.add_argument("--count", type=int, required=True)
    mx = sub.add_parser("run", help="Zipf GET/PUT mix for a fixed time")
    mx.add_argument("--keys", type=int, default=100_000)
    mx.add_argument("--alpha", type=float, default=0.99)
    mx.add_argument("--get-ratio", type=float, default=0.95)
    mx.add_argument("--duration", type=float, default=30.0)
    mx.add_argument("--swap-at", type=float, action="append", default=[], metavar="SECONDS",
                    help="swap the hot set at this time into the run (repeatable); SIGUSR1 swaps at once")
    mx.add_argument("--swap-count", type=int, default=50,
                    help="keys per swap: the N hottest trade places with the N coldest")
    args = p.parse_args(argv)

    with Client(args.iface, timeout=args.timeout, retries=args.retries, mtu=args.mtu,
                udp_port=args.udp_port, service_ip=args.service_ip, window=args.window) as c:
        t0 = time.monotonic()
        tally = run_load(c, args) if args.mode == "load" else run_mix(c, args)
        elapsed = time.monotonic() - t0
        lat_path = args.out.with_suffix(".latency_us.npy")
        np.save(lat_path, np.asarray(tally.latencies_us, dtype=np.float32))
        by_source = {}
        for source, lats in tally.get_latencies_us.items():
            by_source[source] = args.out.with_suffix(f".latency_us_{source}.npy")
            np.save(by_source[source], np.asarray(lats, dtype=np.float32))
        result = {"mode": args.mode, "elapsed_s": elapsed, **tally.summary(),
                  "client_stats": c.stats, "client_native": c.native, "latency_file": str(lat_path),
                  "latency_file_cache": str(by_source["cache"]), "latency_file_db": str(by_source["db"])}
        if args.mode == "run":
            result["ops_cumulative_per_second"] = np.cumsum([r["ops"] for r in tally.series.rows]).tolist()
            result["series"] = tally.series.rows
            result["swapped_at_s"] = tally.swapped_at
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    _emit({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
