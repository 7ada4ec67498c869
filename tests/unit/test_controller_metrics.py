"""The controller's /metrics (exo_controller/metrics.py, stat_kinds.py): every Stats name it
produces is declared, the page parses with Prometheus' own Python parser, the RPC histogram
times real gRPC calls (a refusal too, with its code) and the health service answers, over mutual
TLS on a unix socket as the controller runs. promtool's check of the page is in
test_metrics_exposition.py."""
import ast
import re
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exo_common import tls
from exo_common.config import parse_config
from exo_common.pki import init_pki
from exo_controller import stat_kinds
from exo_controller.grpc_service import serve
from exo_controller.metrics import RPC_BUCKETS, ControllerMetrics
from exoproto import control_pb2 as pb
from exoproto import control_pb2_grpc as rpc

CONTROLLER = Path(__file__).resolve().parents[2] / "controller" / "exo_controller"
DOCS = Path(__file__).resolve().parents[2] / "docs"


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_stats_become_prometheus_names_kinds_and_labels():
    stats = {"switch_connects": 2.0, "ruleset2_installed": 7.0, "ofp_error type=5 code=1": 1.0,
             "cache_node_state cache1": 1.0, "ingress_meter_dropped": 3.0, "ingress_meter_dropped client1": 3.0,
             "withdraw_s_last": 0.25, "withdraw_ms_last": 250.0, "not_declared_yet": 4.0}
    text = generate_latest(ControllerMetrics(lambda: stats).registry).decode()
    f = families(text)
    # prometheus_client's parser names a counter's family without _total, its sample with it
    assert f["exo_controller_switch_connects"].type == "counter"
    assert f["exo_controller_switch_connects"].samples[0].name == "exo_controller_switch_connects_total"
    assert f["exo_controller_ruleset2_installed"].type == "gauge"
    assert f["exo_controller_ofp_error"].samples[0].labels == {"error": "type=5 code=1"}
    assert f["exo_controller_cache_node_state"].samples[0].labels == {"node": "cache1"}
    # a labeled name's unlabeled total is left out: sum() over the label gives it
    assert [s.labels for s in f["exo_controller_ingress_meter_dropped"].samples] == [{"client": "client1"}]
    assert f["exo_controller_withdraw_seconds_last"].samples[0].value == 0.25
    assert not any("withdraw_ms" in name for name in f), "the same figure in ms is not exposed twice"
    assert f["exo_controller_not_declared_yet"].type == "unknown", "undeclared: exposed, untyped"
    # declared names the controller has not produced yet are there with 0 (rate() has a start)
    assert f["exo_controller_rpc_refused"].samples[0].value == 0


def _count_literals() -> set[str]:
    """Names app.py passes to self._count("...") / f"... {x}": the event counters, which exist
    in Stats only once the event happened."""
    names = set()
    tree = ast.parse((CONTROLLER / "app.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("_count", "count") and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value)
            elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
                names.add(arg.values[0].value)  # "ofp_error {text}" -> "ofp_error ", "port_{r}" -> "port_"
    return names


def test_every_stats_name_of_the_controller_is_declared(cluster_dict):
    from exo_controller.app import ExoControllerApp
    app = ExoControllerApp(exo_config=parse_config(cluster_dict))
    try:
        produced = set(app.stats())
    finally:
        app.stop()
    missing = {n for n in produced if stat_kinds.declared(n) is None}
    assert not missing, f"declare these in exo_controller/stat_kinds.py: {sorted(missing)}"
    for literal in _count_literals():
        if literal.endswith(" "):  # "<name> <value>": a labeled name
            assert stat_kinds.STATS[literal.strip()].label, literal
        elif literal.endswith("_"):  # port_{reason}: the reasons app.py names
            assert {f"{literal}{r}" for r in ("added", "deleted", "modified")} <= set(stat_kinds.STATS)
        else:
            assert literal in stat_kinds.STATS, f"declare {literal!r} in exo_controller/stat_kinds.py"


def undocumented_stats(operations_md: str) -> list[str]:
    """Declared Stats names that docs/operations.md's controller table does not name."""
    start = operations_md.find("The controller's (Python, `Controller.Stats`)")
    end = operations_md.find("\n\n", operations_md.find("\n|", start) if start >= 0 else 0)
    if start < 0 or end < 0:
        return ["docs/operations.md: no table after \"The controller's (Python, `Controller.Stats`)\""]
    table = operations_md[start:end]
    named = {m.split(" ")[0] for m in re.findall(r"`([a-z0-9_]+(?: <[^>`]+>)?)`", table)}
    return sorted(set(stat_kinds.STATS) - named)


def test_operations_doc_lists_every_stats_name_of_the_controller():
    text = (DOCS / "operations.md").read_text()
    assert undocumented_stats(text) == []
    # the check sees a row that went missing
    row = next(ln for ln in text.splitlines() if ln.startswith("| `tls_handshake_refused` | controller |"))
    assert undocumented_stats(text.replace(row + "\n", "")) == ["tls_handshake_refused"]


def test_the_declarations_are_usable_prometheus_names():
    for name, s in stat_kinds.STATS.items():
        assert s.kind in (stat_kinds.COUNTER, stat_kinds.GAUGE), name
        assert s.help and "\n" not in s.help, name
        if s.hidden:
            continue
        exposed = s.prom or name
        assert not exposed.endswith(("_total", "_count", "_sum", "_bucket")), name
        assert not {"s", "ms", "us"} & set(exposed.split("_")), f"{name}: base units (seconds) in names"


# ---------------------------------------------------------------- over real gRPC + TLS

class App:
    """What serve() needs of ExoControllerApp."""

    def __init__(self):
        self.counters = {"rpc_refused": 0}

    def count(self, name, n=1):
        self.counters[name] = self.counters.get(name, 0) + n

    def stats(self):
        return dict(self.counters)


@pytest.fixture
def served(cluster_dict, tmp_path):
    cluster_dict["controller"]["grpc"] = f"unix:{tmp_path}/controller.sock"
    cluster_dict["security"] = {"cert_dir": str(tmp_path / "pki")}
    cfg = parse_config(cluster_dict)
    init_pki(cfg.roles(), cfg.cluster.name, cfg.security.cert_dir)
    app = App()
    metrics = ControllerMetrics(app.stats)
    server = serve(app, cfg, workers=2, metrics=metrics)
    metrics.serve_http("127.0.0.1:0")  # any free port (a config's metrics address names one)
    yield cfg, app, metrics
    metrics.stop()
    server.stop(None)


def test_rpcs_are_timed_with_their_code_and_health_answers(served):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    cfg, app, metrics = served
    op = tls.secure_channel(cfg, "operator", cfg.controller.grpc, "controller")
    assert rpc.ControllerStub(op).Stats(pb.StatsRequest(), timeout=5).node == "controller"
    health = health_pb2_grpc.HealthStub(op)
    for service in ("", "exo.Controller"):
        assert health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status == \
            health_pb2.HealthCheckResponse.SERVING
    cache = tls.secure_channel(cfg, "cache1", cfg.controller.grpc, "controller")
    with pytest.raises(grpc.RpcError) as refused:  # a cache node may not ListRules
        rpc.ControllerStub(cache).ListRules(pb.ListRulesRequest(ruleset=2), timeout=5)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED

    page = urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/metrics", timeout=5).read().decode()
    counts = {(s.labels["method"], s.labels["code"]): s.value
              for s in families(page)["exo_rpc_server_seconds"].samples if s.name.endswith("_count")}
    assert counts[("exo.Controller/Stats", "OK")] == 1
    assert counts[("exo.Controller/ListRules", "PERMISSION_DENIED")] == 1, "refusals are timed too"
    assert counts[("grpc.health.v1.Health/Check", "OK")] == 2
    assert "exo_controller_rpc_refused_total 1.0" in page
    les = [s.labels["le"] for s in families(page)["exo_rpc_server_seconds"].samples
           if s.name.endswith("_bucket") and s.labels["method"] == "exo.Controller/Stats"]
    assert len(les) == len(RPC_BUCKETS) + 1 and les[-1] == "+Inf"
