"""`exo`: the Exoskeleton command line.

    exo demo                      bring up the demo cluster, run the workload, write results/demo.json
    exo demo-web                  a web app cached by the cluster, driven by wrk; results/demo_web.json
    exo config check FILE         validate a cluster config (errors name the field)
    exo config resolve FILE [-o]  write the JSON the C++ nodes read
    exo config generate ...       write an emulation config (n cache / db / client nodes)
    exo config reference          print the config reference generated from the schema
    exo config prometheus FILE    print the Prometheus scrape config of a cluster (docs/deploy.md)
    exo certs init --config FILE  a cluster CA and one certificate per component (docs/security.md)

An emulated cluster that stays up between commands (docs/operations.md, "Running an emulated
cluster by hand"):

    exo up [--config FILE]        start it in the background; prints the client hosts, their
                                  `ip netns exec` / `mnexec -a` lines and the proxy socket
    exo get KEY                   the value (exit 0) or NOT_FOUND (exit 1); errors exit 2
    exo set KEY VALUE             STORED
    exo del KEY                   DELETED (exit 0) or NOT_FOUND (exit 1)
    exo stats [--watch] [--json]  nodes, requests/s, hit ratio, rule budget, Ruleset 2 size
    exo rules [--json]            Ruleset 2 as the switch holds it
    exo node list|add|remove NAME db node membership at replication.factor > 1 (node.py)
    exo down                      stop it (also after the supervisor was killed with SIGKILL)
Commands for a running cluster take --cluster NAME when more than one is up.
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

from .state import StateError, running

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
    elif args.action == "prometheus":
        from exo_topo.prometheus import duration, scrape_config
        try:
            duration(args.interval)
        except ValueError as err:
            print(f"exo config prometheus: --interval: {err}", file=sys.stderr)
            return 2
        sys.stdout.write(yaml.safe_dump(scrape_config(cfg, args.interval), sort_keys=False))
    return 0


def cmd_reference(args) -> int:
    from exo_common.config_reference import render
    sys.stdout.write(render())
    return 0


def cmd_generate(args) -> int:
    from exo_topo.configgen import emulation_config, emulation_config_dict
    # The schema's default for a user's cluster (auto: chains of 3 from 3 db nodes), not the
    # generator's factor 1 for tests and figures.
    factor = args.replication if args.replication == "auto" else int(args.replication)
    d = emulation_config_dict(args.cache, args.db, args.clients, args.run_dir, replication={"factor": factor})
    emulation_config(args.cache, args.db, args.clients, args.run_dir, replication={"factor": factor})  # validate
    text = yaml.safe_dump(d, sort_keys=False)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _need_root(what: str) -> bool:
    if os.geteuid() != 0:
        print(f"exo {what} needs root (Mininet, Open vSwitch, the nodes' sockets)", file=sys.stderr)
        return False
    return True


def cmd_up(args) -> int:
    from .up import UpError, up
    if not _need_root("up"):
        return 2
    cfg = load_config(args.config)
    run_dir = Path(args.run_dir or f"/tmp/exo/{cfg.cluster.name}").resolve()
    try:
        return up(cfg, Path(args.config), run_dir, args.timeout, args.fresh)
    except UpError as err:
        print(f"exo up: {err}", file=sys.stderr)
        return 1
    except StateError as err:
        print(f"exo up: {err}", file=sys.stderr)
        return 2


def cmd_down(args) -> int:
    from .down import down
    if not _need_root("down"):
        return 2
    try:
        return down(args.cluster, args.timeout)
    except StateError as err:
        print(f"exo down: {err}", file=sys.stderr)
        return 2


def cmd_stats(args) -> int:
    from exo_common.tls import TlsFilesError

    from .stats import run
    if not _need_root("stats"):
        return 2
    try:
        st = running(args.cluster)
    except StateError as err:
        print(f"exo stats: {err}", file=sys.stderr)
        return 2
    try:
        return run(st, args.interval, args.watch, args.json)
    except TlsFilesError as err:  # it reads the stats with the operator certificate
        print(f"exo stats: {err}", file=sys.stderr)
        return 2


def cmd_rules(args) -> int:
    from . import rules
    if not _need_root("rules"):
        return 2
    try:
        st = running(args.cluster)
        cfg = load_config(st.data["cluster_yaml"])
        ports = {n.switch_port: n.name for n in cfg.cache_nodes}
        s = rules.summary(rules.ruleset2(rules.parse_dump(rules.dump(cfg.switch.bridge)), ports),
                          cfg.switch.cache_rule_capacity)
    except (StateError, rules.RulesError) as err:
        print(f"exo rules: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"cluster": st.cluster, "bridge": cfg.switch.bridge, **s}, indent=1))
    else:
        print("\n".join(rules.render(s, args.top)))
    return 0


def cmd_node(args) -> int:
    from .node import run
    if args.action != "list" and not args.name:
        print(f"exo node {args.action}: NAME (a db node of the config) is required", file=sys.stderr)
        return 2
    return run(args.cluster, args.action, args.name)


def cmd_kv(args) -> int:
    from . import kv
    return {"get": kv.cmd_get, "set": kv.cmd_set, "del": kv.cmd_del}[args.cmd](args)


def _positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < v <= 3600:
        raise argparse.ArgumentTypeError(f"{text} s: must be more than 0 and at most 3600")
    return v


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v}: must be at least 1")
    return v


def _add_cluster_commands(sub) -> None:
    """exo up / down / get / set / del / stats / rules (the emulated cluster left running)."""
    def cluster_opt(sp):
        sp.add_argument("--cluster", help="the cluster's name (cluster.name), when more than one is up")

    u = sub.add_parser("up", help="start an emulated cluster that keeps running (exo down stops it)")
    u.add_argument("--config", default=str(REPO / "configs" / "demo.yaml"))
    u.add_argument("--run-dir", default=None, help="logs, sockets, data (default /tmp/exo/<cluster name>)")
    u.add_argument("--timeout", type=_positive_seconds, default=180.0,
                   help="seconds to wait for the cluster to come up (default 180)")
    u.add_argument("--fresh", action="store_true", help="delete the db nodes' data dirs first "
                   "(default: keep what an earlier run stored)")
    u.set_defaults(func=cmd_up)

    dn = sub.add_parser("down", help="stop the cluster exo up started")
    cluster_opt(dn)
    dn.add_argument("--timeout", type=_positive_seconds, default=120.0,
                    help="seconds to wait for the supervisor's teardown before SIGKILL and a sweep (default 120)")
    dn.set_defaults(func=cmd_down)

    for name, helptext, value in (("get", "print a key's value", False), ("set", "store a value", True),
                                  ("del", "delete a key", False)):
        kp = sub.add_parser(name, help=f"{helptext} (through the cluster's exo-proxy; no root needed)")
        cluster_opt(kp)
        kp.add_argument("--socket", help="the exo-proxy unix socket (default: the one exo up started)")
        kp.add_argument("key")
        if value:
            kp.add_argument("value")
        kp.set_defaults(func=cmd_kv)

    st = sub.add_parser("stats", help="nodes, requests/s, hit ratio, rule budget, Ruleset 2 size")
    cluster_opt(st)
    st.add_argument("--watch", action="store_true", help="a new table every interval until Ctrl-C")
    st.add_argument("--interval", type=_positive_seconds, default=1.0,
                    help="seconds between the two samples a rate is computed from (default 1)")
    st.add_argument("--json", action="store_true", help="one JSON object (per interval with --watch)")
    st.set_defaults(func=cmd_stats)

    r = sub.add_parser("rules", help="Ruleset 2 as the switch holds it")
    cluster_opt(r)
    r.add_argument("--top", type=_positive_int, default=None, help="show only the N busiest rules")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_rules)

    nd = sub.add_parser("node", help="db node membership at replication.factor > 1: list, add NAME, remove NAME")
    cluster_opt(nd)
    nd.add_argument("action", choices=["list", "add", "remove"])
    nd.add_argument("name", nargs="?", help="a db node of the config (add, remove)")
    nd.set_defaults(func=cmd_node)


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

    # exo demo-web: a web app cached by the cluster (demo_web_cli.py, docs/web-demo.md)
    from .demo_web_cli import add_parser as add_demo_web_parser
    add_demo_web_parser(sub)

    c = sub.add_parser("config", help="validate or resolve a cluster config")
    csub = c.add_subparsers(dest="action", required=True)
    chk = csub.add_parser("check")
    chk.add_argument("file")
    res = csub.add_parser("resolve")
    res.add_argument("file")
    res.add_argument("-o", "--output")
    prom = csub.add_parser("prometheus", help="print prometheus.yml: one target per component's metrics address")
    prom.add_argument("file")
    prom.add_argument("--interval", type=_positive_seconds, default=5.0, help="scrape interval, seconds")
    ref = csub.add_parser("reference", help="print the config reference (markdown)")
    ref.set_defaults(func=cmd_reference)
    gen = csub.add_parser("generate")
    gen.add_argument("--cache", type=int, default=2)
    gen.add_argument("--db", type=int, default=4)
    gen.add_argument("--clients", type=int, default=2)
    gen.add_argument("--run-dir", default="/tmp/exo/cluster")
    gen.add_argument("--replication", default="auto", metavar="auto|N",
                     help="replication.factor (default auto: 3 with at least 3 db nodes, else 1)")
    gen.add_argument("-o", "--output")
    for sp in (chk, res, prom):
        sp.set_defaults(func=cmd_config)
    gen.set_defaults(func=cmd_generate)
    from .certs import add_parser as add_certs_parser
    add_certs_parser(sub)
    _add_cluster_commands(sub)
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
