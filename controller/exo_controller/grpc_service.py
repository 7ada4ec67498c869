"""gRPC Controller service (proto/exoproto/control.proto): a thin adapter over ExoControllerApp.

Rule changes are paced by the app's rate-limited updater, so a caller that does not set
`no_wait` may block until its rules reach the switch. It waits at most its own RPC deadline
(less a small margin, so the reply still arrives) and never more than MAX_WAIT; that is also
why the thread pool is larger than the number of concurrent callers we expect.

Security (docs/security.md): the service listens with mutual TLS as `controller`, and an
AuthzInterceptor (exo_common/authz.py) checks every call against control.proto's allowed_roles;
Add/RemoveCacheRules also check here that every rule's cache_node is the caller. Refusals are
counted as `rpc_refused` in the controller's Stats. A caller refused in the TLS handshake itself
(no certificate, another CA's, no TLS) reaches none of this: main.py counts those as
`tls_handshake_refused` (grpc_handshake_counter.py). security.insecure_dev_mode: plaintext, no
checks.
"""
from __future__ import annotations

import logging
import os
from concurrent import futures
from pathlib import Path

import grpc
from exo_common import tls
from exo_common.authz import AuthzInterceptor, Decision, caller_name, foreign_cache_nodes
from exoproto import control_pb2, control_pb2_grpc

from .flows import CacheRule

LOG = logging.getLogger("exo_controller.grpc")
MAX_WAIT = 60.0      # seconds a waiting Add/RemoveCacheRules blocks at most
DEADLINE_MARGIN = 0.2


def _rules(request) -> list[CacheRule]:
    return [CacheRule(key_hash=r.key_hash, cache_node=r.cache_node) for r in request.rules]


class ControllerServicer(control_pb2_grpc.ControllerServicer):
    """`app` needs add_cache_rules, remove_cache_rules, list_flows, stats (see app.ExoControllerApp).
    authz: the server's AuthzInterceptor, for the per-rule caller check (None: no check, as in
    insecure_dev_mode)."""

    def __init__(self, app, authz: AuthzInterceptor | None = None):
        self.app = app
        self.authz = authz

    def _check_own_rules(self, rpc: str, request, context) -> None:
        """A cache node adds and removes rules only for itself (control.proto's handler check)."""
        if self.authz is None:
            return
        caller = caller_name(context)
        foreign = foreign_cache_nodes(caller, [r.cache_node for r in request.rules])
        if foreign:
            self.authz.refuse(context, f"/exo.Controller/{rpc}", Decision(
                False, "PERMISSION_DENIED", f"{caller} may {rpc} only for itself, not for {', '.join(foreign)}",
                caller, "cache"))

    def _require_master(self, context) -> None:
        """Only the master changes rules (docs/design/replication.md, 5.4); a cache node moves on to
        the one named here (cache-node/src/peers.cc)."""
        accepts = getattr(self.app, "accepts_rule_changes", None)  # None: an app without failover
        if accepts is not None and not accepts():
            self.app.count("not_master_refusals")
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          f"not the master; the master is {self.app.master_name()}")

    def _update(self, method, request, context, **kw):
        from .app import SwitchError  # keep this module importable without a running os-ken
        self._require_master(context)
        rules = _rules(request)
        remaining = context.time_remaining() if context is not None else None
        timeout = MAX_WAIT if remaining is None else max(0.0, min(MAX_WAIT, remaining - DEADLINE_MARGIN))
        try:
            out = method(rules, wait=not request.no_wait, timeout=timeout, **kw)
        except SwitchError as err:
            return control_pb2.CacheRulesReply(accepted=0, rejected=len(rules), error=str(err))
        return control_pb2.CacheRulesReply(accepted=out.accepted, rejected=out.rejected, error=out.error,
                                           full_key_hashes=out.full_key_hashes)

    def AddCacheRules(self, request, context):
        self._check_own_rules("AddCacheRules", request, context)
        return self._update(self.app.add_cache_rules, request, context, loads=[r.load for r in request.rules])

    def RemoveCacheRules(self, request, context):
        self._check_own_rules("RemoveCacheRules", request, context)
        return self._update(self.app.remove_cache_rules, request, context)

    def Stats(self, request, context):
        return control_pb2.StatsReply(node="controller", counters=[
            control_pb2.Counter(name=name, value=max(0, int(round(value))))
            for name, value in sorted(self.app.stats().items())])

    def Ping(self, request, context):
        """Standby instances probe the master with this (failover.py); it only proves the process lives."""
        lead = self.app.leadership
        return control_pb2.PingReply(instance=lead.name, master=lead.is_master(), generation=lead.generation or 0)

    # ---- db node membership (chain_exec.py; docs/replication.md, "Membership") ----

    def _chains(self, context):
        chains = getattr(self.app, "chains", None)
        if chains is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          "replication.factor is 1: db nodes have no chains, membership is the config's")
        return chains

    def _membership(self, kind: str, request, context):
        from .chain_plan import PlanError
        chains = self._chains(context)
        self._require_master(context)
        remaining = context.time_remaining() if context is not None else None
        timeout = MAX_WAIT if remaining is None else max(0.1, min(MAX_WAIT, remaining - DEADLINE_MARGIN))
        try:
            table = chains.request(kind, request.name, timeout)
        except ValueError as err:  # PlanError too: the reason names the slot
            code = grpc.StatusCode.FAILED_PRECONDITION if isinstance(err, PlanError) else grpc.StatusCode.INVALID_ARGUMENT
            context.abort(code, str(err))
        except TimeoutError:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"{kind} {request.name}: still being carried out")
        except RuntimeError as err:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(err))
        return control_pb2.NodeReply(version=table.version)

    def AddNode(self, request, context):
        return self._membership("add", request, context)

    def RemoveNode(self, request, context):
        return self._membership("remove", request, context)

    def ListNodes(self, request, context):
        chains = self._chains(context)
        table = chains.table
        return control_pb2.ListNodesReply(version=table.version if table else 0, nodes=[
            control_pb2.DbNodeMembership(**n) for n in chains.nodes()])

    def ListRules(self, request, context):
        from .app import SwitchError, SwitchNotConnected, SwitchTimeout
        if request.ruleset not in (0, 1, 2, 3, 4):  # 4: table 0's ingress checks (flows.RULESET_INGRESS)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"ruleset must be 0..4, not {request.ruleset}")
        try:
            flows = self.app.list_flows(request.ruleset)
        except SwitchNotConnected:
            return control_pb2.ListRulesReply(switch_connected=False)
        except SwitchTimeout as err:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, str(err))
        except SwitchError as err:
            context.abort(grpc.StatusCode.INTERNAL, str(err))
        return control_pb2.ListRulesReply(switch_connected=True, flows=[
            control_pb2.FlowEntry(ruleset=f.ruleset, priority=f.priority, eth_dst=f.eth_dst,
                                  eth_dst_mask=f.eth_dst_mask, ipv4_dst=f.ipv4_dst, out_port=f.out_port or 0,
                                  packet_count=f.packet_count, byte_count=f.byte_count, cookie=f.cookie)
            for f in flows])


def prepare_address(address: str) -> str:
    """For unix:PATH, create the parent dir and remove a stale socket file."""
    if address.startswith("unix:"):
        path = Path(address[len("unix:"):].removeprefix("//"))
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_socket():
            os.unlink(path)
        elif path.exists():
            raise RuntimeError(f"{path} exists and is not a socket; refusing to remove it")
    return address


def serve(app, cfg, workers: int = 16, metrics=None) -> grpc.Server:
    """The Controller service on cfg.controller.grpc: mutual TLS as `controller` with the caller
    checks, or plaintext without them in insecure_dev_mode. Refusals count in app's Stats.
    metrics: a metrics.ControllerMetrics whose RPC histogram times every call (refusals too: its
    interceptor is the outermost). The gRPC health service is always on."""
    from .metrics import add_health
    address = cfg.controller.grpc
    insecure = cfg.security.insecure_dev_mode
    authz = None if insecure else AuthzInterceptor(cfg.roles(), app.count)
    interceptors = ([] if metrics is None else [metrics.interceptor()]) + ([] if authz is None else [authz])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="exo-grpc"),
                         interceptors=interceptors)
    control_pb2_grpc.add_ControllerServicer_to_server(ControllerServicer(app, authz), server)
    add_health(server, "exo.Controller")
    if tls.add_port(server, cfg, "controller", prepare_address(address)) == 0 and not address.startswith("unix:"):
        raise RuntimeError(f"cannot bind gRPC address {address}")
    server.start()
    LOG.info("gRPC Controller service on %s (%s)", address,
             "PLAINTEXT, no caller checks: security.insecure_dev_mode" if insecure
             else f"mutual TLS, certificates in {cfg.security.cert_dir}")
    return server
