"""gRPC Controller service (proto/exoproto/control.proto): a thin adapter over ExoControllerApp.

Rule changes are paced by the app's rate-limited updater, so a caller that does not set
`no_wait` may block until its rules reach the switch. It waits at most its own RPC deadline
(less a small margin, so the reply still arrives) and never more than MAX_WAIT; that is also
why the thread pool is larger than the number of concurrent callers we expect.
"""
from __future__ import annotations

import logging
import os
from concurrent import futures
from pathlib import Path

import grpc
from exoproto import control_pb2, control_pb2_grpc

from .flows import CacheRule

LOG = logging.getLogger("exo_controller.grpc")
MAX_WAIT = 60.0      # seconds a waiting Add/RemoveCacheRules blocks at most
DEADLINE_MARGIN = 0.2


def _rules(request) -> list[CacheRule]:
    return [CacheRule(key_hash=r.key_hash, cache_node=r.cache_node) for r in request.rules]


class ControllerServicer(control_pb2_grpc.ControllerServicer):
    """`app` needs add_cache_rules, remove_cache_rules, list_flows, stats (see app.ExoControllerApp)."""

    def __init__(self, app):
        self.app = app

    def _update(self, method, request, context, **kw):
        from .app import SwitchError  # keep this module importable without a running os-ken
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
        return self._update(self.app.add_cache_rules, request, context, loads=[r.load for r in request.rules])

    def RemoveCacheRules(self, request, context):
        return self._update(self.app.remove_cache_rules, request, context)

    def Stats(self, request, context):
        return control_pb2.StatsReply(node="controller", counters=[
            control_pb2.Counter(name=name, value=max(0, int(round(value))))
            for name, value in sorted(self.app.stats().items())])

    def ListRules(self, request, context):
        from .app import SwitchError, SwitchNotConnected, SwitchTimeout
        if request.ruleset not in (0, 1, 2, 3):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"ruleset must be 0..3, not {request.ruleset}")
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


def serve(app, address: str, workers: int = 16) -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="exo-grpc"))
    control_pb2_grpc.add_ControllerServicer_to_server(ControllerServicer(app), server)
    if server.add_insecure_port(prepare_address(address)) == 0 and not address.startswith("unix:"):
        raise RuntimeError(f"cannot bind gRPC address {address}")
    server.start()
    LOG.info("gRPC Controller service on %s", address)
    return server
