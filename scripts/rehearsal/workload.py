"""The rehearsal's client: a memcached client (pymemcache) against exo-proxy, run inside the client
machine's network namespace (`ip netns exec <ns> python workload.py ...`), as a web tier would.

    workload.py run --server 127.0.0.1:11211 --state S.json [--duration 30] [--rate 200] [--keys 200]
                    [--hot 10 --hot-share 0.8]
        sets and gets until --duration or SIGTERM; every write with its outcome goes to S.json
    workload.py verify --server ... --state S.json
        reads every key once and counts acknowledged writes that are gone (acked.py)

Each prints one JSON line: ops, errors, acked (writes acknowledged), bad_reads (reads that lost
an acknowledged write), for verify lost_acked_writes and the first few lost keys.
Errors (the proxy restarting, a node down) are counted and the client reconnects; they are
expected while services restart and never count as lost writes unless a later read proves one.
"""
from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
from pathlib import Path

from pymemcache.client.base import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from acked import AckedWrites  # noqa: E402


def connect(server: str) -> Client:
    host, _, port = server.rpartition(":")
    return Client((host, int(port)), connect_timeout=1.0, timeout=3.0)


def load_state(path: Path) -> AckedWrites:
    return AckedWrites(json.loads(path.read_text()) if path.exists() else None)


def run(args) -> dict:
    state = load_state(args.state)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    rng = random.Random(args.seed)
    c = connect(args.server)
    ops = errors = acked = bad = 0
    seq = int(time.time() * 1000) % 10**9  # values stay unique across runs
    deadline = time.monotonic() + args.duration
    period = 1.0 / args.rate
    next_at = time.monotonic()
    while not stop["now"] and time.monotonic() < deadline:
        # Skewed like a web tier's keys: most requests go to a few hot ones, which the cluster
        # then caches (so writes to them take the cache node's Prepare/Commit path).
        key = f"rh:{rng.randrange(args.hot) if rng.random() < args.hot_share else rng.randrange(args.keys)}"
        ops += 1
        if rng.random() < 0.5:
            seq += 1
            value = f"{key}:{seq}"
            try:
                ok = bool(c.set(key, value.encode(), noreply=False))
            except Exception:  # noqa: BLE001 - outcome unknown: it may have been applied
                ok = None
            state.wrote(key, value, acked=ok is True)
            acked += ok is True
        else:
            try:
                raw = c.get(key)
                got = None if raw is None else raw.decode()
                ok = True
                if not state.read_ok(key, got):
                    bad += 1
                state.saw(key, got)
            except Exception:  # noqa: BLE001
                ok = None
        if ok is not True:
            errors += 1
            if ok is None:  # the proxy restarting, a node down: reconnect and go on
                c.close()
                time.sleep(0.05)
        next_at += period
        time.sleep(max(0.0, next_at - time.monotonic()))
    args.state.write_text(json.dumps(state.to_json()))
    return {"ops": ops, "errors": errors, "acked": acked, "bad_reads": bad}


def verify(args) -> dict:
    state = load_state(args.state)
    c = connect(args.server)
    lost, errors = [], 0
    for key in state.acked_keys():
        for attempt in range(5):
            try:
                raw = c.get(key)
                break
            except Exception:  # noqa: BLE001 - retried; a key that never answers counts as an error
                c.close()
                time.sleep(0.2)
        else:
            errors += 1
            continue
        got = None if raw is None else raw.decode()
        if not state.read_ok(key, got):
            lost.append({"key": key, "got": got, "allowed": sorted(v for v in state.allowed(key) if v)})
    return {"ops": len(state.acked_keys()), "errors": errors, "lost_acked_writes": len(lost),
            "lost": lost[:5]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "verify"):
        p = sub.add_parser(name)
        p.add_argument("--server", default="127.0.0.1:11211")
        p.add_argument("--state", type=Path, required=True)
    r = sub.choices["run"]
    r.add_argument("--duration", type=float, default=30.0)
    r.add_argument("--rate", type=float, default=200.0, help="operations per second at most")
    r.add_argument("--keys", type=int, default=200)
    r.add_argument("--hot", type=int, default=10, help="keys rh:0 .. rh:<hot-1> are the hot ones")
    r.add_argument("--hot-share", type=float, default=0.8, help="share of operations on the hot keys")
    r.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    out = run(args) if args.cmd == "run" else verify(args)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
