"""Who may call which RPC (docs/security.md): the Python side of the caller checks.

The allowed roles of every rpc are declared once, as `option (allowed_roles) = "..."` in
proto/exoproto/control.proto, and read here from the generated descriptors. A caller's role is
what the cluster config makes of its certificate name (ClusterConfig.roles()). `decide` is the
pure decision; `AuthzInterceptor` applies it to every call of a grpc.Server and counts each
refusal; handlers that must also check that the caller acts only for itself ("Handler check"
in control.proto) use `caller_name` and `refuse`.

Methods outside control.proto: the gRPC health service (grpc.health.v1.Health) answers any
cluster identity; anything else is refused.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Optional

import grpc

from .tls import peer_name

LOG = logging.getLogger("exo.authz")
ANY_ROLE_SERVICES = ("grpc.health.v1.Health",)  # liveness probes: any certificate of the cluster
REFUSED_COUNTER = "rpc_refused"
LOG_EVERY_S = 10.0  # refusals are all counted, but logged at most once per this many seconds


@dataclass(frozen=True)
class Decision:
    ok: bool
    code: str = "OK"  # grpc.StatusCode name: OK | UNAUTHENTICATED | PERMISSION_DENIED
    why: str = ""
    caller: Optional[str] = None
    role: Optional[str] = None


def split_method(full_method: str) -> tuple[str, str]:
    """"/exo.CacheNode/Prepare" -> ("exo.CacheNode", "Prepare")."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    return service, method


@lru_cache(maxsize=256)  # only registered methods reach it (see intercept_service)
def allowed_roles(full_method: str) -> Optional[frozenset[str]]:
    """The roles control.proto allows to call `full_method` ("/exo.Controller/AddCacheRules"),
    None if it is not an rpc of control.proto."""
    from exoproto import control_pb2
    service, method = split_method(full_method)
    package = control_pb2.DESCRIPTOR.package
    if not service.startswith(package + "."):
        return None
    svc = control_pb2.DESCRIPTOR.services_by_name.get(service[len(package) + 1:])
    m = svc.methods_by_name.get(method) if svc is not None else None
    if m is None:
        return None
    return frozenset(m.GetOptions().Extensions[control_pb2.allowed_roles])


def decide(full_method: str, caller: Optional[str], roles: dict[str, str]) -> Decision:
    """May `caller` (a verified certificate name, None: none) call `full_method`?"""
    if caller is None:
        return Decision(False, "UNAUTHENTICATED", "no verified client certificate")
    role = roles.get(caller)
    if role is None:  # signed by the cluster CA, but for no component of this config
        return Decision(False, "PERMISSION_DENIED", f"{caller!r} is not a name of this cluster's config", caller)
    service, _ = split_method(full_method)
    if service in ANY_ROLE_SERVICES:
        return Decision(True, caller=caller, role=role)
    allowed = allowed_roles(full_method)
    if allowed is None:
        return Decision(False, "PERMISSION_DENIED", f"{full_method} has no allowed_roles in control.proto",
                        caller, role)
    if role not in allowed:
        return Decision(False, "PERMISSION_DENIED",
                        f"{caller} (role {role}) may not call {full_method} (allowed: {', '.join(sorted(allowed))})",
                        caller, role)
    return Decision(True, caller=caller, role=role)


def foreign_cache_nodes(caller: str, cache_nodes: list[str]) -> list[str]:
    """The cache nodes of a rule request that are not the caller (Add/RemoveCacheRules: a cache
    node adds and removes rules only for itself)."""
    return sorted({n for n in cache_nodes if n != caller})


def caller_name(context) -> Optional[str]:
    """The verified certificate name of a handler's caller (None: none), for the handler checks."""
    return peer_name(context)


class AuthzInterceptor(grpc.ServerInterceptor):
    """Checks every call against control.proto's allowed_roles before its handler runs; a
    refusal is counted (count(REFUSED_COUNTER), e.g. the controller's Stats), logged and answered
    with UNAUTHENTICATED or PERMISSION_DENIED. roles: ClusterConfig.roles()."""

    _KINDS = {
        (False, False): ("unary_unary", grpc.unary_unary_rpc_method_handler),
        (False, True): ("unary_stream", grpc.unary_stream_rpc_method_handler),
        (True, False): ("stream_unary", grpc.stream_unary_rpc_method_handler),
        (True, True): ("stream_stream", grpc.stream_stream_rpc_method_handler),
    }

    def __init__(self, roles: dict[str, str], count: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic):
        self.roles = dict(roles)
        self.count = count
        self.clock = clock
        self._log_lock = threading.Lock()
        self._last_log: Optional[float] = None
        self._unlogged = 0

    def refuse(self, context, full_method: str, decision: Decision):
        """Count, log (at most one line per LOG_EVERY_S: an attacker must not fill the disk) and
        abort the call (context.abort raises)."""
        self.count(REFUSED_COUNTER)
        with self._log_lock:
            now = self.clock()
            if self._last_log is not None and now - self._last_log < LOG_EVERY_S:
                self._unlogged += 1
                log_it, more = False, 0
            else:
                log_it, more, self._last_log, self._unlogged = True, self._unlogged, now, 0
        if log_it:
            LOG.warning("refused %s from %s: %s%s", full_method, decision.caller or "a caller without a certificate",
                        decision.why, f" (and {more} more refusals not logged)" if more else "")
        context.abort(getattr(grpc.StatusCode, decision.code), decision.why)

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None:
            return None
        method = details.method
        attr, make = self._KINDS[(handler.request_streaming, handler.response_streaming)]
        behavior = getattr(handler, attr)

        def checked(request_or_iterator, context):
            d = decide(method, caller_name(context), self.roles)
            if not d.ok:
                self.refuse(context, method, d)
            return behavior(request_or_iterator, context)

        return make(checked, request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer)
