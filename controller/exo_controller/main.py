"""`python -m exo_controller --config cluster.yaml`: os-ken OpenFlow 1.3 app + gRPC Controller service."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from exo_common.config import ConfigError, load_config
from exo_common.tls import TlsFilesError
from .rule_updater import FAULTS

LOG = logging.getLogger("exo_controller")
# How often Stats' ingress_* counters (table 0's drops, the client meters') are read from the switch.
INGRESS_POLL_S = 1.0


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m exo_controller", description=__doc__)
    p.add_argument("--config", required=True, help="cluster YAML (see common/exo_common/config.py)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--barrier-timeout", type=float, default=2.0,
                   help="seconds to wait for the barrier after a batch of flow-mods before resending it (default 2)")
    p.add_argument("--ruleset2-journal", metavar="PATH",
                   help="append every Ruleset 2 flow-mod (with its xid) and Ruleset 2 size change, timestamped, "
                        "to PATH as JSON lines (exo_controller/rule_journal.py); default: no journal")
    p.add_argument("--fault", choices=FAULTS,
                   help="TESTS ONLY: run a known-bad controller. no-rate-limit: send every queued rule change "
                        "at once, ignoring switch.rule_update_rate (shows that the switch-side audit catches it)")
    p.add_argument("--instance", metavar="NAME",
                   help="which of controller.instances[] this process is (required when the config lists them)")
    p.add_argument("--etcd-endpoints", metavar="URL[,URL...]",
                   help="use these etcd client URLs instead of controller.etcd (the emulation's etcd picks a free port)")
    p.add_argument("--standby-writes", action="store_true",
                   help="TESTS ONLY: a standby sends one flow-mod after its SLAVE role is confirmed, which the "
                        "switch must refuse with IS_SLAVE (the known-bad of the failover test)")
    return p.parse_args(argv)


def instance_config(cfg, args):
    """(config as this instance sees it, instance name); ConfigError names the option."""
    names = [i.name for i in cfg.controller.all_instances()]
    if args.instance is None:
        if cfg.controller.instances:
            raise ConfigError(f"--instance: required; controller.instances names {', '.join(names)}")
        return cfg, "controller"
    if args.instance not in names:
        raise ConfigError(f"--instance: {args.instance!r} is not in controller.instances ({', '.join(names)})")
    if args.etcd_endpoints:
        ctl = cfg.for_instance(args.instance).controller.model_copy(
            update={"etcd": [u for u in args.etcd_endpoints.split(",") if u]})
        return cfg.for_instance(args.instance).model_copy(update={"controller": ctl}), args.instance
    return cfg.for_instance(args.instance), args.instance


def start_failover(cfg, app, name: str):
    """With controller.etcd: the election, the master probe and their etcd actions (failover.py)."""
    from exo_common.etcd import EtcdClient, EtcdTls
    from .failover import Failover
    etcd_tls = None if cfg.security.insecure_dev_mode else EtcdTls.from_dir(cfg.security.cert_dir)
    client = EtcdClient(list(cfg.controller.etcd), tls=etcd_tls)
    fo = Failover(cfg, app, client, name)
    app.failover = fo
    fo.start()
    LOG.info("instance %s: electing the master through etcd %s", name, ", ".join(cfg.controller.etcd))
    return fo


def start_os_ken(cfg, barrier_timeout: float = 2.0, journal=None, fault=None, tls_handshake_refused=None,
                 leadership=None, standby_writes: bool = False):
    """Configure os-ken, instantiate our app with the config (as a constructor kwarg) and the
    cache node monitor (heartbeats over gRPC), plus the OpenFlow handler (openflow_tls.py: TLS,
    only the switch's certificate), and start their threads. Returns (app_manager, our_app).
    tls_handshake_refused: the app's source of that Stats counter (grpc_handshake_counter.py)."""
    # app_manager imports os_ken.controller.controller, which registers the ofp-* options; they must
    # exist before CONF() parses (importing controller.controller first is a circular-import error).
    from os_ken import cfg as os_ken_cfg
    from os_ken.base import app_manager

    from .app import ExoControllerApp
    from .openflow_tls import ExoOFPHandler, configure

    conf = os_ken_cfg.CONF
    conf(args=[], project="os_ken")
    how = configure(conf, cfg)
    LOG.info("OpenFlow listener: %s", how)

    from .monitor import ClusterMonitor, GrpcPeers

    def monitor_factory(app):
        return ClusterMonitor(cfg, app, GrpcPeers(cfg))

    mgr = app_manager.AppManager.get_instance()
    app = mgr.instantiate(ExoControllerApp, exo_config=cfg, barrier_timeout=barrier_timeout,
                          monitor_factory=monitor_factory, journal=journal, fault=fault,
                          ingress_poll_s=INGRESS_POLL_S, tls_handshake_refused=tls_handshake_refused,
                          leadership=leadership, standby_writes=standby_writes)
    mgr.instantiate(ExoOFPHandler, on_refused=app.openflow_refused)  # os-ken's ofp_handler, TLS-checked
    contexts = mgr.create_contexts()
    mgr.instantiate_apps(**contexts)  # also starts our app's event loop
    if cfg.replication.factor > 1:
        # Db node heartbeats and chain reconfiguration (chain_exec.py); it acts only while this
        # instance is the master.
        from .chain_exec import ChainExecutor
        from .chain_peers import ChainPeers
        app.chains = ChainExecutor(cfg, app, ChainPeers(cfg)).start()
    return mgr, app


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.log_level != "DEBUG":
        logging.getLogger("os_ken").setLevel(logging.WARNING)
    try:
        cfg, instance = instance_config(load_config(args.config), args)
    except ConfigError as err:
        print(f"exo_controller: bad config: {err}", file=sys.stderr)
        return 2
    # Before anything imports grpc: TLS handshakes gRPC refuses are counted from its log on fd 2.
    tls_refusals = None
    if not cfg.security.insecure_dev_mode:
        from .grpc_handshake_counter import install
        tls_refusals = install()

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.set())

    from .grpc_service import serve
    from .rule_journal import Ruleset2Journal
    if args.fault:
        LOG.warning("FAULT %s: this controller is deliberately broken (a test's known-bad input)", args.fault)
    journal = Ruleset2Journal(args.ruleset2_journal) if args.ruleset2_journal else None
    from .leadership import Leadership
    leadership = Leadership(instance, single=not cfg.controller.etcd)
    try:
        mgr, app = start_os_ken(cfg, args.barrier_timeout, journal, args.fault,
                                tls_refusals.value if tls_refusals is not None else None,
                                leadership=leadership, standby_writes=args.standby_writes)
    except TlsFilesError as err:
        print(f"exo_controller: {err}", file=sys.stderr)
        return 2
    LOG.info("OpenFlow 1.3 listening on %s:%d for dpid %#x", cfg.controller.openflow_host,
             cfg.controller.openflow_port, cfg.switch.dpid)
    from .metrics import ControllerMetrics
    metrics = ControllerMetrics(app.stats)  # docs/operations.md, "Metrics"
    try:
        server = serve(app, cfg, metrics=metrics)
    except Exception as err:  # noqa: BLE001 - report and exit
        LOG.error("cannot start gRPC service on %s: %s", cfg.controller.grpc, err)
        logging.shutdown()
        os._exit(1)
    try:
        metrics.serve_http(cfg.controller.metrics)
    except (OSError, ValueError) as err:
        LOG.error("controller.metrics: cannot serve /metrics on %s: %s", cfg.controller.metrics, err)
        logging.shutdown()
        os._exit(1)

    failover = None
    if cfg.controller.etcd:
        try:
            failover = start_failover(cfg, app, instance)
        except Exception as err:  # noqa: BLE001 - report and exit: a controller without its election is no use
            LOG.error("controller.etcd: cannot start the election: %s", err)
            logging.shutdown()
            os._exit(1)

    while not stop.wait(1.0):
        pass
    LOG.info("shutting down")
    if failover is not None:
        failover.stop()
    server.stop(grace=1.0).wait(2.0)
    mgr.close()
    if cfg.controller.grpc.startswith("unix:"):
        try:
            os.unlink(cfg.controller.grpc[len("unix:"):])
        except OSError:
            pass
    LOG.info("stopped (counters: %s)", app.stats())
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # os-ken's native hub cannot stop its OpenFlow listener thread (blocked in accept(); hub.kill
    # is a no-op), so exit the process directly once everything of ours is closed.
    os._exit(0)
