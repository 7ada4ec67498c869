"""`python -m exo_cli.supervisor`: the detached process `exo up` starts. Mininet's objects live in
one process, so this one holds the cluster: it brings up the EmulatedCluster and an exo-proxy in
the first client host, gives the client hosts' network namespaces names (`ip netns exec`), writes
the state file (state.py) and then sleeps until SIGTERM (`exo down`), when it tears everything
down in `finally`, also after a failed start. Its stdout and stderr are <run dir>/supervisor.log.

Every process it starts carries EXO_UP_TAG in its environment, so `exo down` can find them
should this process be killed with SIGKILL (cleanup.py).
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from exo_common.config import load_config
from exo_topo import ovs
from exo_topo.cluster import EmulatedCluster

from . import state
from .cleanup import TAG_ENV, bridges, named_netns
from .up import FAILED

log = logging.getLogger("exo.supervisor")
PROXY_TCP_PORT = 11211  # inside the proxy's client host; each host has its own loopback


class Stopping:
    """SIGTERM/SIGINT: the first one ends the wait, or the start, as KeyboardInterrupt; `run`'s
    `finally` then tears down what was started. Later ones, and any once the teardown has begun
    (`requested` set), are ignored, so they cannot cut the teardown short."""

    def __init__(self):
        self.requested = False
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # no terminal; a stray hangup is not a stop

    def _handle(self, signum, _frame):
        if self.requested:
            log.info("%s again: already tearing down", signal.Signals(signum).name)
            return
        self.requested = True
        log.info("%s: stopping", signal.Signals(signum).name)
        raise KeyboardInterrupt


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


def name_namespaces(cl: EmulatedCluster, names: dict[str, str]) -> dict[str, dict]:
    """`ip netns attach NAME PID` for each client host: /run/netns/NAME then refers to the
    host's namespace, for `ip netns exec NAME ...`."""
    hosts = {}
    for host, ns in names.items():
        h = cl.host(host)
        _ip("netns", "attach", ns, str(h.pid))
        node = cl.cfg.node(host)
        hosts[host] = {"pid": h.pid, "netns": ns, "iface": str(h.defaultIntf()), "ip": node.ip, "mac": node.mac}
    return hosts


def drop_names(names) -> None:
    present = set(named_netns())
    for ns in names:
        if ns in present:
            try:
                _ip("netns", "del", ns)
            except RuntimeError as err:
                log.warning("teardown: %s", err)


def watch(cl: EmulatedCluster, proxy: subprocess.Popen, proxy_log: str) -> None:
    """Sleep until stopped; log (once) each process that exits meanwhile. The cluster stays up:
    `exo stats` shows the node down, `exo down` stops the rest."""
    reported: set[str] = set()
    while True:
        procs = {name: (p, name) for name, p in cl.node_procs.items()}
        procs["exo-proxy"] = (proxy, proxy_log)
        if cl.controller_proc is not None:
            procs["controller"] = (cl.controller_proc, "controller")
        for name, (p, log_name) in procs.items():
            if name not in reported and p.poll() is not None:
                reported.add(name)
                log.warning("%s exited with status %s (see %s); the rest stays up", name, p.returncode,
                            cl.run_dir / f"{log_name}.log")
        time.sleep(1.0)


def run(config: Path, run_dir: Path, state_file: Path, tag: str) -> int:
    stopping = Stopping()
    data = state.read(state_file).data
    ns_names: dict[str, str] = {}
    started_ovs = False
    failure = None
    # Teardown steps, registered as each piece starts; run in reverse in `finally`, after
    # `stopping.requested` is set, so a second SIGTERM cannot cut them short.
    teardown = ExitStack()

    def step(what: str) -> None:
        data["step"] = what
        state.write(state_file, data)
        log.info("%s", what)

    try:
        from exo_proxy import rig  # exo-proxy in a client host, as its tests start it

        data["supervisor"] = {"pid": os.getpid(), "start": state.proc_start(os.getpid())}
        cfg = load_config(config)
        client = cfg.clients[0].name
        ns_names = {c.name: state.netns_name(cfg.cluster.name, c.name) for c in cfg.clients}
        data["netns"] = sorted(ns_names.values())
        drop_names(n for n in named_netns() if n.startswith(f"exo-{cfg.cluster.name}-"))
        step("starting Open vSwitch")
        started_ovs = ovs.ensure_running()  # before the tag: the daemons are shared, never ours to kill
        data["started_ovs"] = started_ovs
        os.environ[TAG_ENV] = tag
        n_hosts = len(cfg.cache_nodes) + len(cfg.db_nodes) + len(cfg.clients)
        step(f"starting the controller, the switch, {n_hosts} hosts and the nodes "
             f"(logs {run_dir}/controller.log, {run_dir}/<node>.log)")
        cl = EmulatedCluster(cfg, run_dir)
        teardown.callback(cl.stop)  # before start(): a start that fails half-way leaves pieces
        cl.start()
        step(f"starting exo-proxy in {client} (log {run_dir}/proxy-{client}.log)")
        sock = run_dir / "proxy.sock"
        sock.unlink(missing_ok=True)  # left by a killed run: the proxy would not bind
        proxy = teardown.enter_context(rig.proxy(cl, client, port=PROXY_TCP_PORT, unix_path=sock))
        step("naming the client hosts' network namespaces")
        teardown.callback(drop_names, list(ns_names.values()))
        hosts = name_namespaces(cl, ns_names)
        data.update(
            phase="up", step="up", cluster_yaml=str(run_dir / "cluster.yaml"), hosts=hosts,
            proxy={"host": client, "unix": str(sock), "tcp": f"127.0.0.1:{PROXY_TCP_PORT}", "pid": proxy.pid},
            controller={"grpc": cfg.controller.grpc, "pid": cl.controller_proc.pid,
                        "openflow": f"{cfg.controller.openflow_host}:{cfg.controller.openflow_port}"},
            nodes={"cache": [n.name for n in cfg.cache_nodes], "db": [n.name for n in cfg.db_nodes]},
            up_at=time.time())
        state.write(state_file, data)
        log.info("cluster up; waiting for SIGTERM (exo down)")
        watch(cl, proxy, f"proxy-{client}")
    except KeyboardInterrupt:
        pass
    except Exception as err:  # noqa: BLE001 - the log is where `exo up` sends the operator
        log.exception("the cluster could not be brought up, or failed")
        failure = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
    finally:
        stopping.requested = True  # from here on a signal changes nothing
        if data.get("phase") == "up":
            data.update(phase="stopping", step="tearing down")
            state.write(state_file, data)
        log.info("tearing down")
        teardown.close()
        drop_names(ns_names.values())
        if started_ovs and not bridges():
            ovs.stop()
            log.info("stopped Open vSwitch (this run had started it)")
        state.remove(state_file)
        if failure:
            log.error("%s %s", FAILED, failure)
        log.info("torn down; supervisor exits")
    return 1 if failure else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="exo_cli.supervisor", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True)
    p.add_argument("--run-dir", required=True)
    p.add_argument("--state", required=True, help="the state file `exo up` claimed")
    p.add_argument("--tag", required=True, help=f"the {TAG_ENV} value every started process carries")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # Importing Mininet makes every logger created afterwards a MininetLogger, with its own
    # stderr handler at level 25: ours would drop INFO and print warnings twice. Send them
    # through the root handler above, like any logger.
    for name in ("exo.supervisor", "exo.cluster", "exo_topo"):
        lg = logging.getLogger(name)
        for h in list(lg.handlers):
            lg.removeHandler(h)
        lg.setLevel(logging.INFO)
    log.info("supervisor pid %d: config %s, run dir %s", os.getpid(), args.config, args.run_dir)
    return run(Path(args.config), Path(args.run_dir), Path(args.state), args.tag)


if __name__ == "__main__":
    sys.exit(main())
