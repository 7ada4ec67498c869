"""The /metrics pages of the C++ programs (common/cpp/metrics_http.h) and of the controller,
checked by parsers we did not write: Prometheus' Python parser
(prometheus_client.parser.text_string_to_metric_families) and `promtool check metrics` (Debian's
prometheus package). The C++ pages come from exo-metrics-sample, which serves the same code the
programs link, over real HTTP on 127.0.0.1. Every counter of common/cpp/counter_list.h must be on
its program's page with the kind and help the list gives it; each checker must also reject a
known-bad page."""
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest_ci import missing_or_fail
from exo_controller import stat_kinds
from exo_controller.metrics import ControllerMetrics

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "build" / "common" / "cpp" / "exo-metrics-sample"
COUNTER_LIST = REPO / "common" / "cpp" / "counter_list.h"
LISTS = {"cache": ("EXO_CACHE_DP_COUNTERS", "EXO_CACHE_CP_COUNTERS", "EXO_CACHE_GAUGES"),
         "db": ("EXO_DB_COUNTERS", "EXO_DB_GAUGES"),
         "proxy": ("EXO_PROXY_COUNTERS",)}


def counter_list() -> dict[str, list[tuple[str, str]]]:
    """counter_list.h read as text: macro name -> [(counter, COUNTER|GAUGE)]."""
    out: dict[str, list[tuple[str, str]]] = {}
    macro = None
    for line in COUNTER_LIST.read_text().splitlines():
        m = re.match(r"#define (EXO_\w+)\(X\)", line)
        if m:
            macro = m.group(1)
            out[macro] = []
        for name, kind in re.findall(r"\bX\((\w+),\s*(COUNTER|GAUGE)\b", line):
            out[macro].append((name, kind))
        if macro and not line.rstrip().endswith("\\"):
            macro = None
    return out


def fetch(port: int, path: str = "/metrics") -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        return r.read().decode()


@pytest.fixture(scope="module")
def pages():
    """program -> (port, page text) of exo-metrics-sample's three listeners."""
    if not SAMPLE.exists():
        missing_or_fail(f"{SAMPLE} is missing: run `make build`")
    proc = subprocess.Popen([str(SAMPLE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ports = {}
        for _ in LISTS:
            program, port = proc.stdout.readline().split()
            ports[program] = int(port)
        yield {p: (port, fetch(port)) for p, port in ports.items()}
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing_or_fail("promtool is missing (Debian package prometheus: scripts/install-deps.sh)")
    return path


def promtool_check(text: str) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)


def controller_page() -> str:
    stats = {name: 1.0 for name, s in stat_kinds.STATS.items() if not s.label}
    stats.update({"ofp_error type=5 code=1": 1.0, "cache_node_state cache0": 0.0,
                  "ingress_meter_dropped client0": 2.0, "ingress_client_source_dropped client0": 1.0,
                  "ingress_client_forwarded_dropped client0": 1.0})
    m = ControllerMetrics(lambda: stats)
    m.rpc.labels("exo.Controller/AddCacheRules", "OK").observe(0.02)
    return generate_latest(m.registry).decode()


def test_every_listed_counter_is_on_its_page_with_its_kind_and_help(pages):
    lists = counter_list()
    for program, macros in LISTS.items():
        fams = {f.name: f for f in text_string_to_metric_families(pages[program][1])}
        for macro in macros:
            assert lists[macro], f"{macro}: nothing read from {COUNTER_LIST}"
            for name, kind in lists[macro]:
                fam = fams.get(f"exo_{program}_{name}")  # the parser drops a counter's _total
                assert fam is not None, f"exo_{program}_{name} missing from the {program} page"
                assert fam.type == kind.lower(), (fam.name, fam.type)
                assert fam.documentation, fam.name
                want = f"exo_{program}_{name}_total" if kind == "COUNTER" else f"exo_{program}_{name}"
                assert [s.name for s in fam.samples] == [want]
        assert fams[f"exo_{program}_metrics_bad_requests"].type == "counter"
        hist = fams["exo_rpc_server_seconds"]
        assert hist.type == "histogram"
        assert {s.labels["code"] for s in hist.samples} == {"OK", "PERMISSION_DENIED"}


def test_promtool_accepts_every_page_and_rejects_a_bad_one(pages):
    for program, (_, text) in pages.items():
        r = promtool_check(text)
        assert r.returncode == 0, f"{program}: {r.stdout}{r.stderr}"
    r = promtool_check(controller_page())
    assert r.returncode == 0, f"controller: {r.stdout}{r.stderr}"
    # the known-bad input: a counter without _total, and a gauge in milliseconds
    bad = "# HELP exo_x_hits hits\n# TYPE exo_x_hits counter\nexo_x_hits 1\n" \
          "# HELP exo_x_wait_ms wait\n# TYPE exo_x_wait_ms gauge\nexo_x_wait_ms 3\n"
    r = promtool_check(bad)
    assert r.returncode != 0 and "_total" in r.stdout + r.stderr, r.stdout + r.stderr


def test_the_python_parser_rejects_a_malformed_page():
    with pytest.raises(ValueError):
        list(text_string_to_metric_families('exo_cache_hits_total{method="x 1\n'))


def test_cpp_and_controller_histograms_share_their_le_labels(pages):
    """Prometheus keeps `le` as a string: a p99 summed over every program needs the same text."""
    def les(text):
        fam = next(f for f in text_string_to_metric_families(text) if f.name == "exo_rpc_server_seconds")
        first = fam.samples[0].labels["method"], fam.samples[0].labels["code"]
        return [s.labels["le"] for s in fam.samples
                if s.name.endswith("_bucket") and (s.labels["method"], s.labels["code"]) == first]
    assert les(pages["cache"][1]) == les(controller_page())


def raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        return got


def test_the_listener_refuses_and_counts_what_is_not_get_metrics(pages):
    port = pages["db"][0]
    with pytest.raises(urllib.error.HTTPError) as e:
        fetch(port, "/")
    assert e.value.code == 404
    assert raw(port, b"\x16\x03\x01\x00\xa5\x01\x00").startswith(b"HTTP/1.1 400 ")  # TLS on the HTTP port
    assert raw(port, b"GET /metrics HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 10000 + b"\r\n\r\n").startswith(
        b"HTTP/1.1 400 ")
    fams = {f.name: f for f in text_string_to_metric_families(fetch(port))}
    assert fams["exo_db_metrics_bad_requests"].samples[0].value == 2
    assert fams["exo_db_metrics_not_found"].samples[0].value == 1
