"""The controller's Prometheus /metrics (docs/operations.md, "Metrics") and its gRPC health service.

- StatsCollector: the Stats counters, named as the C++ programs name theirs
  (exo_controller_<name>_total for a counter, exo_controller_<name> for a gauge; the kinds and
  help are declared in stat_kinds.py).
- RpcTimer: a server interceptor timing every call into the histogram
  exo_rpc_server_seconds{method, code}, the same family, buckets and `le` labels as the C++
  servers' (common/cpp/rpc_latency.h), refusals included when it is the outermost interceptor.
- add_health: grpc.health.v1.Health answering SERVING for the server and its service.
- serve_http: the page on controller.metrics ("<IPv4>:<port>"), from a thread of its own.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Optional

import grpc
from prometheus_client import CollectorRegistry, Histogram, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from . import stat_kinds

LOG = logging.getLogger("exo_controller.metrics")
RPC_HISTOGRAM = "exo_rpc_server_seconds"
# common/cpp/rpc_latency.h kRpcBuckets: the same bounds, so histograms sum across programs.
RPC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
               1.0, 2.5, 5.0, 10.0)

try:  # `_created` series are not part of what the C++ programs expose; leave them out here too
    from prometheus_client import disable_created_metrics
    disable_created_metrics()
except ImportError:  # older prometheus_client: it has no such series in text format 0.0.4 anyway
    pass


class StatsCollector:
    """A prometheus_client collector over a Stats function (ExoControllerApp.stats)."""

    def __init__(self, stats: Callable[[], dict[str, float]]):
        self.stats = stats

    def collect(self):
        families: dict[str, Metric] = {}
        for s in stat_kinds.samples(self.stats()):
            fam = families.get(s.family)
            if fam is None:
                labels = [k for k, _ in s.labels]
                if s.kind == stat_kinds.COUNTER:
                    fam = CounterMetricFamily(s.family, s.help, labels=labels)
                elif s.kind == stat_kinds.GAUGE:
                    fam = GaugeMetricFamily(s.family, s.help, labels=labels)
                else:
                    fam = Metric(s.family, s.help, "unknown")
                families[s.family] = fam
            if isinstance(fam, (CounterMetricFamily, GaugeMetricFamily)):
                fam.add_metric([v for _, v in s.labels], s.value)
            else:
                fam.add_sample(s.family, dict(s.labels), s.value)
        yield from sorted(families.values(), key=lambda f: f.name)


class RpcTimer(grpc.ServerInterceptor):
    """Times each unary call (all of the controller's) into the RPC latency histogram."""

    def __init__(self, histogram: Histogram):
        self.histogram = histogram

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = details.method.lstrip("/")  # "exo.Controller/Stats", as the C++ servers label it
        behavior = handler.unary_unary

        def timed(request, context):
            start = time.monotonic()
            code = None
            try:
                reply = behavior(request, context)
                code = _code_name(context) or "OK"
                return reply
            except Exception:
                code = _code_name(context) or "UNKNOWN"  # context.abort sets its code, then raises
                raise
            finally:
                self.histogram.labels(method, code or "UNKNOWN").observe(time.monotonic() - start)

        return grpc.unary_unary_rpc_method_handler(timed, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)


def _code_name(context) -> Optional[str]:
    code = context.code() if hasattr(context, "code") else None
    return getattr(code, "name", None) if code is not None else None


class ControllerMetrics:
    """The controller's registry: Stats, the RPC histogram and the process's own figures."""

    def __init__(self, stats: Callable[[], dict[str, float]]):
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StatsCollector(stats))
        ProcessCollector(registry=self.registry)
        self.rpc = Histogram(RPC_HISTOGRAM, "Control RPCs served: seconds from the call's start to its status, "
                             "by method and status code", ["method", "code"], buckets=RPC_BUCKETS,
                             registry=self.registry)
        self._http = None

    def interceptor(self) -> RpcTimer:
        return RpcTimer(self.rpc)

    def serve_http(self, address: str) -> None:
        """Serve the page on "<IPv4>:<port>" ("" = nowhere). OSError when it cannot listen."""
        if not address:
            return
        host, _, port = address.rpartition(":")
        started = start_http_server(int(port), addr=host, registry=self.registry)
        self._http = started[0] if isinstance(started, tuple) else None
        LOG.info("Prometheus /metrics on http://%s/metrics", address)

    @property
    def port(self) -> int:
        """The port /metrics is served on (0: not serving)."""
        return self._http.server_port if self._http is not None else 0

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None


def add_health(server: grpc.Server, *services: str):
    """The standard health service on `server`: SERVING for "" (the server) and each service."""
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    servicer = health.HealthServicer()
    for name in ("", *services):
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    return servicer
