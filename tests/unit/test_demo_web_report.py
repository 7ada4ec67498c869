"""`exo demo-web`'s figures (topo/exo_cli/demo_web_report.py) from known wrk output, proxy stats
and /proc status text, and the web app's pure parts (examples/webapp/catalogue_web): settings
errors name the variable, pages escape what they show, read-through goes to the source of truth
only on a miss and lets cluster errors through."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from exo_cli.demo_web_report import (WrkOutputError, cache_share, headline, merge_histograms, numeric_delta,
                                     parse_proc_status, parse_wrk, percentile, segment_figures, unprivileged)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "webapp"))
from catalogue_web import pages, read_through, settings  # noqa: E402

WRK_OUT = """Running 10s test @ http://127.0.0.1:8000
  2 threads and 16 connections
Requests/sec:   1000.00
EXO_WRK_JSON {"duration_us":10000000,"requests":10000,"bytes":1,\
"errors":{"connect":0,"read":2,"write":0,"status":3,"timeout":1},"non2xx":4,\
"status_classes":{"1xx":0,"2xx":9996,"3xx":0,"4xx":1,"5xx":3},"latency_us":{"min":100,"max":900,"mean":200.0},\
"histogram_us":[[100,50],[200,40],[900,10]]}
"""


def test_parse_wrk_reads_the_json_line_and_keeps_the_summary():
    parsed, text = parse_wrk(WRK_OUT)
    assert parsed["requests"] == 10000 and parsed["non2xx"] == 4
    assert "Requests/sec" in text and "EXO_WRK_JSON" not in text


def test_parse_wrk_rejects_output_without_the_line():
    with pytest.raises(WrkOutputError, match="no EXO_WRK_JSON line"):
        parse_wrk("Running 10s test\nRequests/sec: 5\n")
    with pytest.raises(WrkOutputError, match="not JSON"):
        parse_wrk("EXO_WRK_JSON {broken\n")
    with pytest.raises(WrkOutputError, match="'histogram_us'"):
        parse_wrk('EXO_WRK_JSON {"duration_us":1,"requests":1,"errors":{},"non2xx":0}\n')


def test_percentiles_follow_wrks_definition():
    hist = [[100, 50], [200, 40], [900, 10]]
    assert percentile(hist, 50) == 100
    assert percentile(hist, 50.1) == 200
    assert percentile(hist, 90) == 200
    assert percentile(hist, 99) == 900
    assert percentile([], 50) is None
    assert merge_histograms([[[200, 1], [100, 2]], [[100, 3]]]) == [[100, 5], [200, 1]]


def test_errors_count_non_2xx_and_socket_errors_once_each():
    parsed, _ = parse_wrk(WRK_OUT)
    f = segment_figures(parsed, {"cmd_get": 200, "get_hits_from_cache": 150})
    # 4 non-2xx responses (wrk's errors.status, 3, misses the 404) + read 2 + timeout 1
    assert f["http_errors"] == 7
    assert f["http_requests"] == 10000 + 3
    assert f["requests_per_s"] == 1000.0
    assert f["p50_ms"] == 0.1 and f["p99_ms"] == 0.9
    assert f["cache_share"] == 0.75


def test_headline_merges_the_measured_segments_only():
    parsed, _ = parse_wrk(WRK_OUT)
    clean = dict(parsed, errors={"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}, non2xx=0,
                 histogram_us=[[300, 100]])
    segs = {"warmup": {"wrk": parsed, "proxy_delta": {"cmd_get": 1000, "get_hits_from_cache": 0}},
            "before": {"wrk": clean, "proxy_delta": {"cmd_get": 100, "get_hits_from_cache": 80}},
            "kill": {"wrk": clean, "proxy_delta": {"cmd_get": 100, "get_hits_from_cache": 40}}}
    h = headline(segs, ["before", "kill"])
    assert h["http_errors"] == 0 and h["http_requests"] == 20000
    assert h["cache_share"] == 0.6
    assert h["p50_ms"] == h["p99_ms"] == 0.3
    assert headline(segs, ["warmup", "before"])["http_errors"] == 7


def test_proxy_stats_deltas():
    d = numeric_delta({"cmd_get": 10, "version": "exo-proxy 0.1.0", "get_hits_from_cache": 4},
                      {"cmd_get": 4, "version": "exo-proxy 0.1.0", "get_hits_from_cache": 1})
    assert d == {"cmd_get": 6, "get_hits_from_cache": 3}
    assert cache_share({"cmd_get": 0}) == 0.0


STATUS = """Name:\tpython3
Uid:\t998\t998\t998\t998
Gid:\t998\t998\t998\t998
Groups:\t998
NoNewPrivs:\t1
CapInh:\t0000000000000000
CapPrm:\t0000000000000000
CapEff:\t0000000000000000
CapBnd:\t0000000000000000
CapAmb:\t0000000000000000
"""


def test_proc_status_identity():
    st = parse_proc_status(STATUS)
    assert st["Uid"] == [998] * 4 and st["CapEff"] == 0 and st["NoNewPrivs"] == "1"
    assert unprivileged(st)
    assert not unprivileged(parse_proc_status(STATUS.replace("CapEff:\t0000000000000000", "CapEff:\t0000000000002000")))
    assert not unprivileged(parse_proc_status(STATUS.replace("Uid:\t998\t998\t998\t998", "Uid:\t998\t0\t998\t998")))
    assert not unprivileged({})  # nothing read: not shown to be unprivileged


def test_app_settings_name_the_variable():
    base = {"EXO_WEB_PROXY": "/run/p.sock", "EXO_WEB_DB": "/srv/items.sqlite"}
    s = settings.from_env(base)
    assert (s.timeout_ms, s.retries, s.mtu, s.fault_item) == (250, 4, 1500, None)
    with pytest.raises(settings.SettingsError, match="EXO_WEB_PROXY: not set"):
        settings.from_env({"EXO_WEB_DB": "x"})
    with pytest.raises(settings.SettingsError, match="EXO_WEB_RETRIES: want an integer"):
        settings.from_env({**base, "EXO_WEB_RETRIES": "four"})
    with pytest.raises(settings.SettingsError, match="EXO_WEB_TIMEOUT_MS: must be in 1..60000"):
        settings.from_env({**base, "EXO_WEB_TIMEOUT_MS": "0"})


def test_pages_escape_item_text():
    item = {"id": 7, "name": "<script>x</script>", "category": "a&b", "price_cents": 1205, "stock": 0,
            "description": "\"quoted\""}
    html = pages.item_page(item, "cluster")
    assert "<script>" not in html and "&lt;script&gt;" in html and "a&amp;b" in html
    assert "12.05" in html and "out of stock" in html


class FakeCache:
    def __init__(self, data=None, fail=None):
        self.data, self.fail, self.sets = dict(data or {}), fail, []

    async def get(self, key):
        if self.fail:
            raise self.fail
        return self.data.get(key)

    async def set(self, key, value):
        self.sets.append(key)
        self.data[key] = value


class Source:
    def __init__(self):
        self.reads = 0

    def item(self, item_id):
        self.reads += 1
        return {"id": item_id, "name": f"n{item_id}"} if item_id < 100 else None


def test_read_through_hits_misses_and_errors():
    cache, src = FakeCache(), Source()
    assert asyncio.run(read_through.read_item(cache, src, 5)) == ({"id": 5, "name": "n5"}, read_through.FROM_STORE)
    assert cache.sets == ["item:5"]
    assert asyncio.run(read_through.read_item(cache, src, 5)) == ({"id": 5, "name": "n5"}, read_through.FROM_CLUSTER)
    assert src.reads == 1  # the second read came from the cluster
    assert asyncio.run(read_through.read_item(cache, src, 500)) == (None, read_through.FROM_STORE)
    from exoskeleton import Timeout
    with pytest.raises(Timeout):  # a cluster failure is not replaced by a read of the source
        asyncio.run(read_through.read_item(FakeCache(fail=Timeout("no answer")), src, 5))
