"""docs/grafana-exoskeleton.json: a Grafana dashboard whose queries name only metrics that exist.
Every exo_* name in a panel's expr must be a sample name on a real /metrics page: the C++
programs' (exo-metrics-sample, test_metrics_exposition.py) or the controller's; the check must
reject a query naming one that does not exist. Every expr must also be PromQL that Prometheus'
own parser accepts (`promtool check rules`, Grafana's $__rate_interval read as 1m)."""
import json
import re
import subprocess
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from test_metrics_exposition import controller_page, pages, promtool  # noqa: F401  (pages: the fixture)

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-exoskeleton.json"
METRIC = re.compile(r"\b(exo_[a-z0-9_]+)\b")


def exprs(dashboard: dict) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def unknown_metrics(queries: list[str], exposed: set[str]) -> set[str]:
    """exo_* names the queries use that no page exposes."""
    return {name for q in queries for name in METRIC.findall(q)} - exposed


def exposed_names(texts: list[str]) -> set[str]:
    return {s.name for t in texts for f in text_string_to_metric_families(t) for s in f.samples}


def test_every_metric_a_panel_queries_exists(pages):  # noqa: F811
    dashboard = json.loads(DASHBOARD.read_text())
    queries = exprs(dashboard)
    assert len(queries) >= 10
    exposed = exposed_names([text for _, text in pages.values()] + [controller_page()])
    assert unknown_metrics(queries, exposed) == set()
    # the checker rejects a query naming a metric that does not exist (a typo, a renamed counter)
    assert unknown_metrics(["sum(rate(exo_cache_hit_total[1m]))"], exposed) == {"exo_cache_hit_total"}


def test_the_dashboard_covers_what_operations_md_promises():
    dashboard = json.loads(DASHBOARD.read_text())
    titles = " | ".join(p["title"] for p in dashboard["panels"]).lower()
    for topic in ("hit ratio", "requests/s per node", "rule updates/s", "latency p99", "refusals"):
        assert topic in titles, topic
    for p in dashboard["panels"]:
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        assert {"x", "y", "w", "h"} <= set(p["gridPos"]), p["title"]
        assert all(t["expr"].strip() for t in p["targets"]), p["title"]
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def promql_check(queries: list[str], tmp_path) -> subprocess.CompletedProcess:
    """`promtool check rules` on one recording rule per query: Prometheus' PromQL parser."""
    rules = tmp_path / "dashboard-rules.yml"
    lines = ["groups:", "- name: dashboard", "  rules:"]
    for i, q in enumerate(queries):
        lines += [f"  - record: exo:dashboard_query_{i}", f"    expr: {json.dumps(q.replace('$__rate_interval', '1m'))}"]
    rules.write_text("\n".join(lines) + "\n")
    return subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=30)


def test_every_query_is_promql_prometheus_parses(tmp_path):
    r = promql_check(exprs(json.loads(DASHBOARD.read_text())), tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    bad = promql_check(["sum(rate(exo_cache_hits_total[1m])"], tmp_path)  # a parenthesis short
    assert bad.returncode != 0, bad.stdout
