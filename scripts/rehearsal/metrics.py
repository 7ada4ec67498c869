"""Step 10 of docs/deploy.md: Prometheus scrapes every component. The scrape config is the one the
guide has the operator write, printed by the installed `exo config prometheus`; Debian's
`prometheus` runs it in the root namespace (the admin host), which reaches every machine's
metrics address over the management bridge (exo_topo.prometheus.PrometheusServer). Also the
queries the later checks ask it.
"""
from __future__ import annotations

import yaml

from netlab import run
from run_state import Run

SCRAPE_INTERVAL_S = "1"  # the guide leaves the default; a short run wants every second


def step_metrics(r: Run) -> dict:
    from exo_topo.prometheus import PrometheusServer, up_by_instance
    printed = run(r.installed("/usr/bin/exo"), "config", "prometheus", r.installed("/etc/exo/cluster.yaml"),
                  "--interval", SCRAPE_INTERVAL_S).stdout
    r.prometheus = PrometheusServer(r.cfg, r.work, scrape=yaml.safe_load(printed))
    r.lab.on_teardown("prometheus", r.prometheus.stop)
    r.prometheus.start()
    up = up_by_instance(r.prometheus.wait_targets_up(timeout=20))
    r.metrics["up"] = up
    return {"targets_up": up, "scrape_config": str(r.prometheus.dir / "prometheus.yml")}


def scalar(r: Run, promql: str) -> float:
    """The value of a query with one result (0 when it has none, e.g. no series yet)."""
    res = r.prometheus.query(promql)["result"] if r.prometheus is not None else []
    return float(res[0]["value"][1]) if res else 0.0


def cache_hits(r: Run) -> int:
    return int(scalar(r, "sum(exo_cache_hits_total)"))


def targets_up_again(r: Run) -> dict:
    """After the restarts: every component scraped again, and exo_ series there."""
    from exo_topo.prometheus import up_by_instance
    up = up_by_instance(r.prometheus.wait_targets_up(timeout=20))
    series = int(scalar(r, 'count({__name__=~"exo_.+"})'))
    r.metrics["up_after_restarts"] = up
    r.metrics["exo_series"] = series
    return {"up": up, "exo_series": series}
