"""How fast one Python process reads through the client (issue 12, item 3), run where the
client's interface is (a bench's generator namespace, a Mininet client host):

    python -m exo_harness.client_bench --iface veth0 --keys-file keys.hex --seconds 3 --out c.json

Three measurements on the same keys (one hex-encoded key per line; every GET should hit):
  pipelined_gets_per_s            native path, execute() of `--chunk` GETs with `--window` in flight
  sync_gets_per_s                 native path, get() one at a time
  sync_gets_per_s_pure_python     the pure-Python path (Client(native=False)), get() one at a time
Each is GETs answered / wall time over `--seconds`, with its errors and timeouts beside it; the
result also says whether the native path was there (`native`) and why not. Writes JSON to --out
and prints it.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

from exoskeleton import Client, Request, native, wire


def _pipelined(c: Client, keys: list[bytes], seconds: float, chunk: int) -> dict:
    ok = err = lost = 0
    cyc = itertools.cycle(keys)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for r in c.execute([Request(wire.OP_GET, next(cyc)) for _ in range(chunk)]):
            if r.status == wire.ST_OK:
                ok += 1
            elif r.status is None:
                lost += 1
            else:
                err += 1
    el = time.monotonic() - t0
    return {"gets_per_s": round(ok / el, 1), "answered": ok, "errors": err, "timeouts": lost, "seconds": round(el, 3)}


def _sync(c: Client, keys: list[bytes], seconds: float) -> dict:
    ok = miss = 0
    cyc = itertools.cycle(keys)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(64):
            if c.get(next(cyc)) is not None:
                ok += 1
            else:
                miss += 1
    el = time.monotonic() - t0
    return {"gets_per_s": round(ok / el, 1), "answered": ok, "not_found": miss, "seconds": round(el, 3)}


def measure(iface: str, keys: list[bytes], seconds: float, window: int, chunk: int, **client_kw) -> dict:
    mod, why = native.load()
    out: dict = {"native": mod is not None, "native_unavailable": why or None, "keys": len(keys),
                 "window": window, "chunk": chunk, "seconds_each": seconds}
    if mod is not None:
        with Client(iface, window=window, native=True, **client_kw) as c:
            out["pipelined"] = _pipelined(c, keys, seconds, chunk)
            out["pipelined"]["client_stats"] = c.native_stats()
            out["sync"] = _sync(c, keys, seconds)
    with Client(iface, window=window, native=False, **client_kw) as c:
        out["sync_pure_python"] = _sync(c, keys, seconds)
        out["pipelined_pure_python"] = _pipelined(c, keys, seconds, chunk)
    # the names issue 12 gives them (bench_dataplane.json "client")
    out["pipelined_gets_per_s"] = out.get("pipelined", {}).get("gets_per_s")
    out["sync_gets_per_s"] = out.get("sync", {}).get("gets_per_s")
    out["sync_gets_per_s_pure_python"] = out["sync_pure_python"]["gets_per_s"]
    out["pipelined_gets_per_s_pure_python"] = out["pipelined_pure_python"]["gets_per_s"]
    st = out.get("pipelined", {}).get("client_stats")
    if st and st.get("send_calls"):
        out["pipelined_requests_per_send_call"] = round(st["sent"] / st["send_calls"], 1)
        out["pipelined_replies_per_recv_call"] = round(st["replies"] / max(1, st["recv_calls"]), 1)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m exo_harness.client_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--iface", required=True)
    ap.add_argument("--keys-file", type=Path, required=True, help="one hex-encoded key per line")
    ap.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=4096, help="GETs per execute() call, pipelined")
    ap.add_argument("--timeout", type=float, default=0.25)
    ap.add_argument("--udp-port", type=int, default=7777)
    ap.add_argument("--service-ip", default="10.0.0.254",
                    help="accepted, unused: a request's IPv4 dst carries its key hash")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        keys = [bytes.fromhex(line.strip()) for line in a.keys_file.read_text().split() if line.strip()]
    except ValueError as e:
        print(f"client_bench: --keys-file {a.keys_file}: not one hex key per line ({e})", file=sys.stderr)
        return 2
    if not keys:
        print(f"client_bench: --keys-file {a.keys_file} holds no keys", file=sys.stderr)
        return 2
    res = measure(a.iface, keys, a.seconds, a.window, a.chunk, timeout=a.timeout, udp_port=a.udp_port,
                  service_ip=a.service_ip)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if not isinstance(v, dict)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
