"""`exo up` leaves a real cluster running between commands; `exo set/get/del`, `exo stats` and
`exo rules` use it; `exo down` leaves nothing behind: no bridge, no named namespace, no process,
also after the supervisor was killed with SIGKILL. Run as the operator would: the `exo` command
in subprocesses, on a config from `exo config generate`."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from exo_cli import state
from exo_cli.cleanup import tagged_pids
from exo_controller.flows import RULE_HASH_MASK
from exoskeleton import Client
from exoskeleton.keyhash import key_hash

pytestmark = pytest.mark.mininet
REPO = Path(__file__).resolve().parents[2]
RUN_DIR = Path("/tmp/exo/test/exo-up")
NAME = RUN_DIR.name  # exo config generate names the cluster after its run dir
BRIDGE = "exo-upt"
TAG = f"{NAME}:{RUN_DIR}"


@pytest.fixture
def env():
    """A state dir of the test's own, so an operator's running clusters are not in the way; open
    to other users like /run/exo (pytest's tmp_path is not)."""
    d = Path(tempfile.mkdtemp(prefix="exo-up-state-"))
    os.chmod(d, 0o755)
    try:
        yield dict(os.environ, EXO_STATE_DIR=str(d))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def config(tmp_path, env) -> Path:
    path = tmp_path / "cluster.yaml"
    r = exo(env, "config", "generate", "--cache", "1", "--db", "3", "--clients", "1", "--run-dir", str(RUN_DIR),
            "-o", str(path))
    assert r.returncode == 0, r.stderr
    d = yaml.safe_load(path.read_text())
    d.setdefault("switch", {})["bridge"] = BRIDGE
    # 16 slots, as docs/replication.md advises for a small replicated cluster: `exo node add`
    # hands a node its reads in groups the switch moves in 0.5 s (chain_plan.handover_group), and
    # 256 slots at R = 50 would make that part of the test take about 20 s.
    d["switch"]["partition_bits"] = 4
    d["controller"]["openflow_port"] = 6677
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def exo(env, *argv, user=None, timeout=240) -> subprocess.CompletedProcess:
    pre = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if user else []
    return subprocess.run([*pre, sys.executable, "-m", "exo_cli.main", *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def leftovers() -> list[str]:
    """What exo down must remove, found the way an operator would look (and by our tag)."""
    found = []
    if subprocess.run(["ovs-vsctl", "--timeout=5", "br-exists", BRIDGE], capture_output=True).returncode == 0:
        found.append(f"bridge {BRIDGE}")
    for pattern in (str(RUN_DIR), "exo_cli.supervisor"):  # nodes, controller, proxy; the supervisor
        pg = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
        found += [f"process {line}" for line in pg.stdout.splitlines() if str(RUN_DIR) in line]
    found += [f"tagged process {p}" for p in tagged_pids(TAG)]  # the Mininet host shells too
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"netns {line}" for line in netns.splitlines() if line.startswith(f"exo-{NAME}-")]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found += [f"interface {line.split(':')[1].strip()}" for line in links.splitlines() if f" {BRIDGE}-eth" in line]
    return found


@pytest.fixture
def downed(env):
    """Whatever happens in the test, the cluster is stopped at its end."""
    yield
    if Path(env["EXO_STATE_DIR"], f"{NAME}.json").exists():
        exo(env, "down")


def up(env, config) -> dict:
    r = exo(env, "up", "--config", str(config), "--fresh")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"cluster '{NAME}' is up: 1 cache (cache0), 3 db (db0, db1, db2), 1 client hosts" in r.stdout
    return json.loads(Path(env["EXO_STATE_DIR"], f"{NAME}.json").read_text())


def test_up_use_and_down(env, config, downed):
    t0 = time.monotonic()
    s = up(env, config)
    ns, pid = s["hosts"]["client0"]["netns"], s["hosts"]["client0"]["pid"]
    sock = s["proxy"]["unix"]
    r = exo(env, "up", "--config", str(config))
    assert r.returncode == 1 and "is already up" in r.stderr

    # get / set / del through the proxy socket
    assert exo(env, "set", "colour", "green").stdout == "STORED\n"
    r = exo(env, "get", "colour")
    assert (r.returncode, r.stdout) == (0, "green\n")
    r = exo(env, "del", "colour")
    assert (r.returncode, r.stdout) == (0, "DELETED\n")
    r = exo(env, "get", "colour")
    assert (r.returncode, r.stderr) == (1, "NOT_FOUND\n")
    # ... without root, once the socket lets another user connect
    os.chmod(sock, 0o666)
    r = exo(env, "set", "shape", "round", user="nobody")
    assert (r.returncode, r.stdout) == (0, "STORED\n"), r.stderr

    # the printed ways into the client host work: a raw-frame client in `ip netns exec`, `mnexec -a`
    code = "from exoskeleton import Client; print(Client('client0-eth0').get(b'shape'))"
    r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=30, cwd=REPO)
    assert r.stdout.strip() == "b'round'", r.stderr
    r = subprocess.run(["mnexec", "-a", str(pid), "ip", "-o", "addr", "show", "client0-eth0"], capture_output=True,
                       text=True, timeout=30)
    assert s["hosts"]["client0"]["ip"] in r.stdout, r.stderr

    # A hot key gets a Ruleset 2 rule (the cluster fills its cache itself, docs/cache-fill.md):
    # `exo rules` finds it on the switch, pointing at cache0, and `exo stats` counts the hits.
    hot = b"hot-key"
    want = f"{key_hash(hot) & RULE_HASH_MASK:010x}"
    with Client(transport="proxy", proxy=sock) as c:
        c.set(hot, b"x" * 32)
        deadline = time.monotonic() + 20
        while True:
            for _ in range(50):
                assert c.get(hot) == b"x" * 32
            r = exo(env, "rules", "--json")
            assert r.returncode == 0, r.stderr
            rules = json.loads(r.stdout)
            if any(x["key_hash"] == want for x in rules["rules"]) or time.monotonic() > deadline:
                break
        hit = next(x for x in rules["rules"] if x["key_hash"] == want)
        assert hit["cache_node"] == "cache0" and hit["priority"] == 200
        assert rules["count"] >= 1 and rules["capacity"] == 4096 and rules["by_cache_node"]["cache0"] >= 1
        for _ in range(50):
            c.get(hot)
    r = exo(env, "rules")
    assert r.returncode == 0 and want in r.stdout
    assert r.stdout.splitlines()[-1].startswith(f"Ruleset 2 on the switch: {rules['count']}")

    r = exo(env, "stats", "--json", "--interval", "0.5")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert [(n["name"], n["role"], n["state"]) for n in v["nodes"]] == [
        ("cache0", "cache", "up"), ("db0", "db", "up"), ("db1", "db", "up"), ("db2", "db", "up")]
    for field in ("requests_per_s", "hits_per_s", "hits", "cached_keys"):
        assert field in v["nodes"][0]
    assert v["nodes"][0]["hits"] > 0 and v["nodes"][0]["cached_keys"] >= 1
    assert 0 < v["hit_ratio_lifetime"] < 1 and "hit_ratio" in v
    assert v["rule_budget"]["rule_update_rate"] == 50.0 and v["rule_budget"]["flow_mods_refused"] == 0
    assert v["ruleset2"]["switch"] >= 1 and v["ruleset2"]["capacity"] == 4096 and v["controller_up"]
    r = exo(env, "stats", "--interval", "0.3")
    assert r.returncode == 0 and "cache0" in r.stdout and "Ruleset 2:" in r.stdout

    # Membership of the running cluster (docs/replication.md, `exo node`): three db nodes, so
    # replication.factor auto made every slot a chain of all three.
    def members() -> dict[str, tuple[str, str]]:
        r = exo(env, "node", "list")
        assert r.returncode == 0, r.stderr
        rows = [line.split() for line in r.stdout.splitlines()[2:]]
        return {row[0]: (row[1], row[6]) for row in rows}  # name -> (member, learning slots)
    assert {n: m for n, (m, _) in members().items()} == {"db0": "yes", "db1": "yes", "db2": "yes"}
    r = exo(env, "node", "remove", "db2")
    assert r.returncode == 0 and r.stdout.startswith("remove db2: done"), r.stdout + r.stderr
    assert members()["db2"][0] == "no"
    assert exo(env, "set", "colour", "blue").stdout == "STORED\n"  # chains of two still write
    r = exo(env, "node", "add", "db2")
    assert r.returncode == 0 and r.stdout.startswith("add db2: done"), r.stdout + r.stderr
    deadline = time.monotonic() + 30
    while members()["db2"] != ("yes", "-") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert members()["db2"] == ("yes", "-"), "db2 did not catch up as a member"
    r = exo(env, "get", "colour")
    assert (r.returncode, r.stdout) == (0, "blue\n"), r.stderr + exo(env, "node", "list").stdout
    r = exo(env, "node", "remove", "db9")
    assert r.returncode == 2 and "db9" in r.stderr

    r = exo(env, "down")
    assert r.returncode == 0 and f"cluster '{NAME}' is down" in r.stdout, r.stdout + r.stderr
    assert leftovers() == []
    assert not Path(env["EXO_STATE_DIR"], f"{NAME}.json").exists()
    r = exo(env, "down")
    assert r.returncode == 0 and "nothing is up" in r.stdout
    print(f"up, use and down in {time.monotonic() - t0:.1f} s")


def test_down_cleans_up_after_a_killed_supervisor(env, config, downed):
    s = up(env, config)
    pid, start = s["supervisor"]["pid"], s["supervisor"]["start"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while state.same_process(pid, start) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() != []  # the cluster's processes and bridge outlive their supervisor
    r = exo(env, "get", "k")
    assert r.returncode == 2 and "is gone" in r.stderr
    r = exo(env, "up", "--config", str(config))
    assert r.returncode == 1 and "was not shut down" in r.stderr
    r = exo(env, "down")
    assert r.returncode == 0 and "is gone: cleaning up" in r.stdout and f"deleted bridge {BRIDGE}" in r.stdout, \
        r.stdout + r.stderr
    assert leftovers() == []
