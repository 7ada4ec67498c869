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
    return p.parse_args(argv)


def start_os_ken(cfg, barrier_timeout: float = 2.0, journal=None, fault=None, tls_handshake_refused=None):
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
                          ingress_poll_s=INGRESS_POLL_S, tls_handshake_refused=tls_handshake_refused)
    mgr.instantiate(ExoOFPHandler, on_refused=app.openflow_refused)  # os-ken's ofp_handler, TLS-checked
    contexts = mgr.create_contexts()
    mgr.instantiate_apps(**contexts)  # also starts our app's event loop
    return mgr, app


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.log_level != "DEBUG":
        logging.getLogger("os_ken").setLevel(logging.WARNING)
    try:
        cfg = load_config(args.config)
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
    try:
        mgr, app = start_os_ken(cfg, args.barrier_timeout, journal, args.fault,
                                tls_refusals.value if tls_refusals is not None else None)
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

    while not stop.wait(1.0):
        pass
    LOG.info("shutting down")
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
