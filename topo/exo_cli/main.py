"""`exo`: the Exoskeleton command line.

    exo demo                      bring up the demo cluster, run the workload, write results/demo.json
    exo config check FILE         validate a cluster config (errors name the field)
    exo config resolve FILE [-o]  write the JSON the C++ nodes read
    exo config generate ...       write an emulation config (n cache / db / client nodes)
    exo config reference          print the config reference generated from the schema
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from pathlib import Path

import yaml

from exo_common.config import ConfigError, load_config, resolve

REPO = Path(__file__).resolve().parents[2]


def _sigterm_as_interrupt(*_):
    raise KeyboardInterrupt


def cmd_demo(args) -> int:
    from .demo import run_demo
    if os.geteuid() != 0:
        print("exo demo needs root (Mininet, Open vSwitch, raw sockets)", file=sys.stderr)
        return 2
    cfg = load_config(args.config)
    run_dir = Path(args.run_dir or f"/tmp/exo/{cfg.cluster.name}")
    run_demo(Path(args.config), run_dir, Path(args.out), args.keys, args.hot, args.duration,
             args.alpha, args.get_ratio, args.value_size, args.window)
    return 0


def cmd_config(args) -> int:
    cfg = load_config(args.file)
    if args.action == "check":
        print(f"{args.file}: ok ({len(cfg.cache_nodes)} cache, {len(cfg.db_nodes)} db, "
              f"{len(cfg.clients)} clients, {1 << cfg.switch.partition_bits} partitions)")
    elif args.action == "resolve":
        text = json.dumps(resolve(cfg), indent=1) + "\n"
        if args.output:
            Path(args.output).write_text(text)
        else:
            sys.stdout.write(text)
    return 0


def cmd_reference(args) -> int:
    from exo_common.config_reference import render
    sys.stdout.write(render())
    return 0


def cmd_generate(args) -> int:
    from exo_topo.configgen import emulation_config, emulation_config_dict
    d = emulation_config_dict(args.cache, args.db, args.clients, args.run_dir)
    emulation_config(args.cache, args.db, args.clients, args.run_dir)  # validate
    text = yaml.safe_dump(d, sort_keys=False)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="exo", description="Exoskeleton key-value cluster")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("demo", help="run the demo cluster and workload")
    d.add_argument("--config", default=str(REPO / "configs" / "demo.yaml"))
    d.add_argument("--run-dir", default=None, help="logs, sockets, data (default /tmp/exo/<cluster name>)")
    d.add_argument("--out", default=str(REPO / "results" / "demo.json"))
    d.add_argument("--keys", type=int, default=100_000)
    d.add_argument("--hot", type=int, default=0, help="pre-warm: tell the cache nodes to cache the N hottest keys before the run "
                   "(default 0: caches start empty and fill themselves)")
    d.add_argument("--duration", type=float, default=30.0)
    d.add_argument("--alpha", type=float, default=0.99)
    d.add_argument("--get-ratio", type=float, default=0.95)
    d.add_argument("--value-size", type=int, default=128)
    d.add_argument("--window", type=int, default=16, help="requests in flight per client")
    d.set_defaults(func=cmd_demo)

    c = sub.add_parser("config", help="validate or resolve a cluster config")
    csub = c.add_subparsers(dest="action", required=True)
    chk = csub.add_parser("check")
    chk.add_argument("file")
    res = csub.add_parser("resolve")
    res.add_argument("file")
    res.add_argument("-o", "--output")
    ref = csub.add_parser("reference", help="print the config reference (markdown)")
    ref.set_defaults(func=cmd_reference)
    gen = csub.add_parser("generate")
    gen.add_argument("--cache", type=int, default=2)
    gen.add_argument("--db", type=int, default=4)
    gen.add_argument("--clients", type=int, default=2)
    gen.add_argument("--run-dir", default="/tmp/exo/cluster")
    gen.add_argument("-o", "--output")
    for sp in (chk, res):
        sp.set_defaults(func=cmd_config)
    gen.set_defaults(func=cmd_generate)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # Ctrl-C, kill and a closed terminal all end in the same teardown. SIGINT is set
    # explicitly because a shell starts background jobs with it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _sigterm_as_interrupt)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; everything started was torn down", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
