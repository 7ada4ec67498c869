"""`make bench`'s data-plane benchmark, as a smoke run (a second or so per generator run): the
harness creates and removes its namespaces and processes, every case reports a ceiling found by
the loss rule with each run's loss beside it, the ratios carry their targets, the replication
cost cases write bench_replication.json, and Ctrl-C leaves nothing behind. Speeds are never asserted."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.mininet
ROOT = Path(__file__).resolve().parents[2]
CASES = ("raw", "cache_node", "memcached", "db_node", "proxy", "ovs_forward", "ovs_cache_node", "ovs_miss",
         "ovs_miss_thesis")


def bench_leftovers() -> list[str]:
    found = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
             if n.startswith("exob-")]
    found += [b for b in subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                                        text=True).stdout.split() if b.startswith("exobbr")]
    for pattern in ("dpdk-testpmd", "memcached -u root", "exo-cache-node", "exo-db-node", "exo-loadgen",
                    "exo-proxy", "exo-mcload"):
        if subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0:
            found.append(pattern)
    return found


def _bench(out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "exo_bench", "--smoke", "--out", str(out),
                             "--run-dir", "/tmp/exo/bench-smoke", *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_smoke_run_writes_every_case_ratio_and_client_figure(tmp_path: Path):
    p = _bench(tmp_path)
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err[-3000:]
    doc = json.loads((tmp_path / "bench_dataplane.json").read_text())
    assert (tmp_path / "bench_dataplane.png").stat().st_size > 0
    assert doc["schema"] == "exo-bench-dataplane/1" and doc["smoke"] is True
    for name in CASES:
        c = doc["cases"][name]
        runs = c["ceiling"]["runs"]
        assert runs, name
        for r in runs:  # every run's offered rate and loss are kept beside the result
            assert {"rate", "offered_rps", "answered_rps", "loss", "generator_limited"} <= set(r), name
        assert c["ceiling"]["rps"] is None or c["ceiling"]["rps"] > 0
        assert c["latency_at_common"]["rate"] == doc["common_rate"]
    # The servers really answered: hits from the cache node, values from memcached and the db node.
    assert doc["cases"]["cache_node"]["server"]["fill"]["keys"] == doc["params"]["hot_keys"]
    hit_runs = [r for r in doc["cases"]["cache_node"]["ceiling"]["runs"] if r["answered_rps"] > 0]
    assert hit_runs and all(r["extra"]["from_cache"] == r["extra"]["answered"] for r in hit_runs)
    for name in ("memcached", "db_node"):
        assert any(r["extra"]["answered"] > 0 and r["extra"]["not_found"] == 0
                   for r in doc["cases"][name]["ceiling"]["runs"]), name
    assert doc["rocksdb_in_process"]["gets_per_s"] > 0
    for name in ("cache_vs_raw", "cache_vs_memcached", "db_vs_rocksdb", "db_p99_vs_cache_p99"):
        r = doc["ratios"][name]
        assert {"value", "target", "met"} <= set(r), name
    for name in ("ovs_cache_node", "ovs_miss", "ovs_miss_thesis"):
        assert "upcalls_per_request" in doc["cases"][name]["ovs"], name
    assert doc["cases"]["ovs_miss"]["server"]["layout"] == "exo"
    assert doc["cases"]["ovs_miss_thesis"]["server"]["layout"] == "thesis"
    for name in ("ovs_miss_vs_ovs_forward", "ovs_miss_thesis_vs_ovs_forward"):
        assert "upcalls_per_request" in doc["ratios"][name], name
    for k in ("pipelined_gets_per_s", "sync_gets_per_s", "sync_gets_per_s_pure_python"):
        assert doc["client"][k] is not None and doc["client"][k] > 0, k
    assert "cpu_ns_per_request" in doc["cases"]["db_node"]["evidence"]
    check_proxy_fields(doc)
    check_replication_fields(json.loads((tmp_path / "bench_replication.json").read_text()))
    assert bench_leftovers() == []


def check_replication_fields(doc: dict) -> None:
    """The replication cost cases (issue 15): chain_rf1 and chain_rf3 on the same three db nodes,
    PUTs answered by the head db0 and GETs by the read server, each figure with its spread, and
    the ratios labelled measured. Never the speed."""
    assert doc["schema"] == "exo-bench-replication/1" and doc["smoke"] is True
    assert doc["params"]["db_nodes"] == ["db0", "db1", "db2"]
    for name, chain in (("chain_rf1", ["db0"]), ("chain_rf3", ["db0", "db1", "db2"])):
        c = doc["cases"][name]
        assert c["chain"] == chain and c["read_server"] == chain[-1]
        for phase in ("put", "get"):
            runs = c[phase]["ceiling"]["runs"]
            assert any(r["extra"]["answered"] > 0 and r["errors"] == 0 for r in runs), (name, phase)
            assert all({"rate", "offered_rps", "answered_rps", "loss"} <= set(r) for r in runs)
        # GETs of loaded keys at the read server: found, never from a cache.
        assert all(r["extra"]["not_found"] == 0 and r["extra"]["from_cache"] == 0
                   for r in c["get"]["ceiling"]["runs"])
        assert c["put_latency"]["rate"] == doc["put_common_rate"] and c["put_latency"]["runs"]
    for rf in ("rf1", "rf3"):
        f = doc["replication"][rf]
        for k in ("put_ceiling", "get_ceiling"):
            assert {"rps", "repeats_answered_rps", "best_run_per_second_answered"} <= set(f[k]), (rf, k)
        for k in ("put_p50_us_at", "put_p99_us_at"):
            assert f[k]["offered_rate"] == doc["put_common_rate"] and "repeats_us" in f[k], (rf, k)
    for k in ("put_rf3_vs_rf1", "put_p99_rf3_vs_rf1", "get_rf3_vs_rf1"):
        assert doc["ratios"][k]["kind"] == "measured", k


def check_proxy_fields(doc: dict) -> None:
    """The proxy case's JSON (issue 13): hits of the right size through exo-proxy from
    exo-mcload's many connections, the target, the latency added over exo-loadgen at the same
    rate, and what shares which core. Never the speed."""
    case = doc["cases"]["proxy"]
    assert case["generator"]["program"] == "exo-mcload" and case["generator"]["connections"] >= 64
    # The cache node behind the proxy shares the generator's core with back-off; the proxy has core 1.
    assert case["server"]["cores"]["1"] == ["exo-proxy"]
    assert case["server"]["cache_node"]["core"] == 0 and case["server"]["cache_node"]["idle_sleep_us"] > 0
    answered = [r for r in case["ceiling"]["runs"] if r["extra"]["answered"] > 0]
    assert answered, "no GET was answered through the proxy"
    for r in answered:  # every answer but the proxy's error lines a hit of the value's size for the key asked
        x = r["extra"]
        assert x["hits"] == x["answered"] - x["error_replies"]
        assert x["wrong_key"] == 0 and x["wrong_value_size"] == 0 and x["malformed"] == 0 and x["misses"] == 0
    assert "cluster_sent" in case["proxy_stats"]
    lat = case["latency_at_common"]
    assert lat["rate"] == doc["common_rate"] and lat["direct_same_setup"]["rate"] == doc["common_rate"]
    px = doc["proxy"]
    for k in ("gets_per_s", "target_gets_per_s", "met", "passed_at_target_rate", "connections", "depth", "cores",
              "p50_us", "p99_us",
              "direct_p50_us", "direct_p99_us", "p50_added_us", "p99_added_us"):
        assert k in px, k
    assert px["target_gets_per_s"] == 100_000
    if px["met"] is False:
        assert px["short_by"] > 0 and px["limits"]
    r = doc["ratios"]["proxy_gets_per_s_vs_target"]
    assert {"value", "target", "met"} <= set(r)
    if case["ceiling"]["rps"]:
        ev = case["evidence"]
        assert "cpu_ns_per_request" in ev and set(ev["cores_busy"]) == {"0", "1"}
        assert "cache_node" in ev["cpu_utilisation_of"]


def test_ctrl_c_removes_everything(tmp_path: Path):
    p = _bench(tmp_path, "--only", "cache_node")
    # Wait until the cache node's case is under way (its namespace exists), then interrupt.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(n.startswith("exob-") for n in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True).stdout.split()):
        time.sleep(0.2)
    time.sleep(2)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=120)
    assert p.returncode == 130
    time.sleep(0.5)
    assert bench_leftovers() == []
