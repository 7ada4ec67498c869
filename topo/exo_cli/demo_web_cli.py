"""`exo demo-web`'s command line (the run itself: demo_web.py). main.py registers it with
add_parser(), which imports nothing heavy."""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# Durations and catalogue size: the full run, and --quick's (each still overridden by its option).
FULL = {"items": 10_000, "warmup": 20.0, "before": 10.0, "kill_segment": 15.0, "kill_at": 5.0}
QUICK = {"items": 2_000, "warmup": 10.0, "before": 4.0, "kill_segment": 8.0, "kill_at": 3.0}


def cmd_demo_web(args) -> int:
    from .demo_web import WebDemo, run_demo_web
    from .demo_web_host import WebHostError
    if os.geteuid() != 0:
        print("exo demo-web needs root (Mininet, Open vSwitch, exo-proxy's raw socket, creating the web user)",
              file=sys.stderr)
        return 2
    v = {k: getattr(args, k) if getattr(args, k) is not None else (QUICK if args.quick else FULL)[k] for k in FULL}
    d = WebDemo(run_dir=Path(args.run_dir), out=Path(args.out), config=Path(args.config) if args.config else None,
                openflow_port=args.openflow_port, items=v["items"], alpha=args.alpha, workers=args.workers,
                user=args.user, port=args.port, threads=args.threads, connections=args.connections,
                wrk_timeout_s=args.wrk_timeout, warmup_s=v["warmup"], before_s=v["before"],
                kill_s=v["kill_segment"], kill_at_s=v["kill_at"], kill=not args.no_kill,
                proxy_timeout_ms=args.proxy_timeout_ms, proxy_retries=args.proxy_retries, fault_item=args.fault_item)
    try:
        s = run_demo_web(d)
    except (ValueError, WebHostError) as err:
        print(f"exo demo-web: {err}", file=sys.stderr)
        return 2
    return 0 if s["http_errors"] == 0 and s["warmup_http_errors"] == 0 else 1


def add_parser(sub) -> None:
    d = sub.add_parser("demo-web", help="a web app cached by the cluster, driven by wrk (docs/web-demo.md)")
    d.add_argument("--run-dir", default="/tmp/exo/demo-web",
                   help="logs, sockets, data, the staged app (must be reachable by --user) (default: %(default)s)")
    d.add_argument("--out", default=str(REPO / "results" / "demo_web.json"), help="(default: %(default)s)")
    d.add_argument("--config", default=None, help="cluster config (default: 2 cache, 2 db nodes, 1 client host)")
    d.add_argument("--openflow-port", type=int, default=6676,
                   help="the controller's OpenFlow port (generated config) (default: %(default)s)")
    d.add_argument("--items", type=int, default=None,
                   help=f"catalogue items, URLs /item/1..N (default {FULL['items']}, --quick {QUICK['items']})")
    d.add_argument("--alpha", type=float, default=0.99,
                   help="Zipf exponent of the URL popularity (default: %(default)s)")
    d.add_argument("--workers", type=int, default=4, help="uvicorn worker processes (default: %(default)s)")
    d.add_argument("--user", default="exoweb",
                   help="the unprivileged user the app runs as, created if missing (default: %(default)s)")
    d.add_argument("--port", type=int, default=8000,
                   help="the app's port on 127.0.0.1 in the client host (default: %(default)s)")
    d.add_argument("--threads", type=int, default=2, help="wrk threads (default: %(default)s)")
    d.add_argument("--connections", type=int, default=16,
                   help="wrk connections (kept open, HTTP keep-alive) (default: %(default)s)")
    d.add_argument("--wrk-timeout", type=float, default=5.0,
                   help="seconds before wrk counts a request as timed out (default: %(default)s)")
    for name, what in (("warmup", "seconds of warm-up load (not in the headline figures)"),
                       ("before", "seconds of steady load before the kill segment"),
                       ("kill_segment", "seconds of the segment with the kill"),
                       ("kill_at", "seconds into the kill segment to SIGKILL a cache node")):
        d.add_argument(f"--{name.replace('_', '-')}", type=float, default=None,
                       help=f"{what} (default {FULL[name]:g}, --quick {QUICK[name]:g})")
    d.add_argument("--no-kill", action="store_true", help="no kill segment")
    d.add_argument("--proxy-timeout-ms", type=int, default=250,
                   help="exo-proxy --timeout-ms (the app waits as long) (default: %(default)s)")
    d.add_argument("--proxy-retries", type=int, default=4,
                   help="exo-proxy --retries (the app waits as long) (default: %(default)s)")
    d.add_argument("--fault-item", type=int, default=None,
                   help="test switch: the app answers 500 for /item/<this id> (shows failures are counted)")
    d.add_argument("--quick", action="store_true", help="a short run: 2,000 items, 10 + 4 + 8 s of load")
    d.set_defaults(func=cmd_demo_web)
