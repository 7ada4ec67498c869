"""The operator CLI's pure parts (topo/exo_cli: state.py, stats.py, rules.py, cleanup.py's tag
match, the argument checks) and `exo get/set/del`'s output and exit codes against a real
memcached, which answers the commands the proxy transport sends as exo-proxy does
(tests/unit/test_client_proxy.py). tests/integration/test_exo_up.py runs the real cluster.

The `ovs-ofctl dump-flows` text below is copied from a `make demo` run (results/demo-flows.txt,
Open vSwitch 3.1) plus one Ruleset 2 line in the thesis's eth_dst form from the switch audit's
capture (tests/unit/test_switch_audit.py)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest_ci import missing_or_fail

from exo_cli import main as cli
from exo_cli import rules, state, stats
from exo_cli.cleanup import TAG_ENV, tagged
from exo_controller.flows import COOKIE_INDEX_MASK

REPO = Path(__file__).resolve().parents[2]

DUMP = """\
OFPST_FLOW reply (OF1.3) (xid=0x2): flags=[more]
 cookie=0xe2000051bb0e0a00, duration=30.527s, table=0, n_packets=12908, n_bytes=864836, priority=200,ip,dl_dst=aa:00:00:00:00:00/ff:00:00:00:00:00,nw_dst=81.187.14.10 actions=output:1
 cookie=0xe20000cf906bf000, duration=30.527s, table=0, n_packets=427, n_bytes=29036, priority=200,ip,dl_dst=aa:00:00:00:00:00/ff:00:00:00:00:00,nw_dst=207.144.107.240 actions=output:1
 cookie=0xe200002aebc92e00, duration=30.523s, table=0, n_packets=37864, n_bytes=2536888, priority=200,ip,dl_dst=aa:00:00:00:00:00/ff:00:00:00:00:00,nw_dst=42.235.201.46 actions=output:2
 cookie=0xe200006c55199d00, duration=4.611s, table=0, n_packets=0, n_bytes=0, priority=200,ip,dl_dst=aa:00:00:00:00:00/ff:00:00:00:00:00,nw_dst=108.85.25.157 actions=output:2
 cookie=0xe20000ae73eada00, duration=6.031s, table=0, n_packets=0, n_bytes=0, priority=200,dl_dst=aa:ae:73:ea:da:00 actions=output:1
 cookie=0xe300000000000000, duration=41.417s, table=0, n_packets=1431, n_bytes=158659, priority=100,dl_dst=aa:00:00:00:00:00/ef:ff:00:00:00:00 actions=output:6
 cookie=0xe100000000000000, duration=41.578s, table=0, n_packets=0, n_bytes=0, priority=50,dl_dst=02:00:00:00:01:01 actions=output:1
 cookie=0xe100000000ffffff, duration=41.438s, table=0, n_packets=0, n_bytes=0, priority=40,arp actions=FLOOD
"""
PORTS = {1: "cache0", 2: "cache1"}


# ---- rules ----
def test_dump_lines_are_parsed_with_their_counters_and_match():
    flows = rules.parse_dump(DUMP)
    assert len(flows) == 8  # the reply header is not a flow
    f = flows[0]
    assert (f.cookie, f.priority, f.packets, f.bytes, f.out_port, f.ruleset) == (
        0xE2000051BB0E0A00, 200, 12908, 864836, 1, 2)
    assert f.match["nw_dst"] == "81.187.14.10" and "ip" in f.match and "table" not in f.match
    assert flows[-1].actions == "FLOOD" and flows[-1].out_port is None


def test_ruleset2_keeps_only_hot_key_rules_busiest_first_with_their_cache_node():
    got = rules.ruleset2(rules.parse_dump(DUMP), PORTS)
    assert [r.packets for r in got] == [37864, 12908, 427, 0, 0]
    assert got[0].cache_node == "cache1" and got[0].port == 2 and got[0].priority == 200
    assert got[0].match == "nw_dst=42.235.201.46"
    # The hash is read from the match, independently of the cookie, which carries the same
    # hash as its index (flows.make_cookie): both forms must agree.
    for line in DUMP.splitlines():
        f = rules.parse_flow(line)
        if f is not None and f.ruleset == 2:
            assert f.key_hash == f.cookie & COOKIE_INDEX_MASK, line
    eth = next(r for r in got if r.match.startswith("dl_dst"))
    assert eth.key_hash == "ae73eada00" and eth.cache_node == "cache0"


def test_a_port_no_cache_node_is_on_shows_a_question_mark():
    got = rules.ruleset2(rules.parse_dump(DUMP), {1: "cache0"})
    assert {r.cache_node for r in got if r.port == 2} == {"?"}


def test_rules_summary_and_table():
    s = rules.summary(rules.ruleset2(rules.parse_dump(DUMP), PORTS), 4096)
    assert (s["count"], s["capacity"], s["by_cache_node"]) == (5, 4096, {"cache0": 3, "cache1": 2})
    json.dumps(s)  # --json prints it
    lines = rules.render(s, top=2)
    assert "2aebc92e00" in lines[1] and "cache1 (port 2)" in lines[1] and "37,864" in lines[1]
    assert lines[-2] == "... 3 more (--top shows 2)"
    assert lines[-1].startswith("Ruleset 2 on the switch: 5 rules of capacity C = 4096")
    assert rules.render(rules.summary([], 10), None)[-1].endswith("per cache node: none")


def test_a_line_that_is_not_what_ovs_ofctl_prints_is_an_error_naming_it():
    with pytest.raises(rules.RulesError, match="n_packets=many"):
        rules.parse_dump(" cookie=0xe2, n_packets=many, priority=200 actions=output:1\n")
    assert rules.parse_dump("NXST_FLOW reply (xid=0x4):\n\n") == []


# ---- stats ----
ROLES = {"cache0": "cache", "db0": "db", "db1": "db"}


def snap(t, cache0, db0, db1, controller=None, ruleset2=7, errors=None):
    return {"t": t, "nodes": {"cache0": cache0, "db0": db0, "db1": db1}, "controller": controller,
            "ruleset2_switch": ruleset2, "errors": errors or {}}


CTL = {"cache_node_state cache0": 0, "rule_updates_last_1s": 12, "rule_updates_per_s_max": 50,
       "rule_adds_queued": 3, "rule_deletes_queued": 1, "flow_mods_refused": 0, "ruleset2_installed": 7}


def test_rates_and_hit_ratio_come_from_counter_deltas_over_the_interval():
    prev = snap(10.0, {"gets": 100, "hits": 80, "entries": 5}, {"gets": 50, "puts": 10, "deletes": 0},
                {"gets": 30, "puts": 0, "deletes": 2}, CTL)
    cur = snap(12.0, {"gets": 300, "hits": 240, "entries": 9}, {"gets": 90, "puts": 20, "deletes": 0},
               {"gets": 50, "puts": 0, "deletes": 4}, CTL)
    v = stats.view(prev, cur, ROLES, 50.0, 4096)
    rows = {n["name"]: n for n in v["nodes"]}
    assert rows["cache0"]["requests_per_s"] == 100.0 and rows["cache0"]["hits_per_s"] == 80.0
    assert rows["cache0"]["hits"] == 240 and rows["cache0"]["cached_keys"] == 9
    assert rows["db0"]["requests_per_s"] == 25.0 and rows["db1"]["requests_per_s"] == 11.0
    # 160 hits against 60 GETs that reached db nodes (misses the cache forwarded included)
    assert v["hit_ratio"] == round(160 / 220, 4) and v["gets_per_s"] == 110.0
    assert v["hit_ratio_lifetime"] == round(240 / (240 + 140), 4)
    assert v["rule_budget"] == {"rule_update_rate": 50.0, "rule_updates_last_1s": 12, "rule_updates_per_s_max": 50,
                                "rule_adds_queued": 3, "rule_deletes_queued": 1, "flow_mods_refused": 0}
    assert v["ruleset2"] == {"switch": 7, "controller": 7, "capacity": 4096}
    assert v["nodes_up"] == 3 and v["interval_s"] == 2.0
    json.dumps(v)


def test_a_down_node_has_no_rates_and_a_restarted_counter_counts_from_zero():
    prev = snap(0.0, {"gets": 1000, "hits": 900}, {"gets": 5}, None)
    cur = snap(1.0, {"gets": 40, "hits": 30}, None, {"gets": 7},
               controller={**CTL, "cache_node_state cache0": 2},
               errors={"db0": "UNAVAILABLE: connect failed"})
    v = stats.view(prev, cur, ROLES, 50.0, 100)
    rows = {n["name"]: n for n in v["nodes"]}
    assert rows["cache0"]["requests_per_s"] == 40.0 and rows["cache0"]["hits_per_s"] == 30.0
    assert rows["cache0"]["state"] == "rejoining"  # it answers, but the controller has it out
    assert rows["db0"]["state"] == "down" and rows["db0"]["requests_per_s"] is None
    assert rows["db0"]["error"] == "UNAVAILABLE: connect failed"
    assert rows["db1"]["requests_per_s"] is None  # down in the first snapshot: no rate yet
    assert v["hit_ratio"] == 1.0 and v["nodes_up"] == 1


def test_no_gets_no_controller_and_snapshots_in_the_wrong_order():
    quiet = {"gets": 0, "hits": 0}
    v = stats.view(snap(0, quiet, quiet, quiet), snap(1, quiet, quiet, quiet, ruleset2=None), ROLES, 50, 10)
    assert v["hit_ratio"] is None and v["rule_budget"] is None and not v["controller_up"]
    assert v["ruleset2"] == {"switch": None, "controller": None, "capacity": 10}
    text = "\n".join(stats.render(v, "t"))
    assert "- (no GETs)" in text and "controller not answering" in text
    with pytest.raises(ValueError, match="second must be later"):
        stats.view(snap(5, quiet, quiet, quiet), snap(5, quiet, quiet, quiet), ROLES, 50, 10)


def test_the_table_shows_every_node_and_the_cluster_lines():
    prev = snap(0, {"gets": 0, "hits": 0, "entries": 0}, {"gets": 0}, {"gets": 0}, CTL)
    cur = snap(1, {"gets": 10, "hits": 9, "entries": 4}, {"gets": 1}, None, CTL,
               errors={"db1": "UNAVAILABLE: gone"})
    lines = stats.render(stats.view(prev, cur, ROLES, 50, 4096), "title")
    assert lines[0] == "title" and lines[1].split()[:3] == ["node", "role", "state"]
    assert lines[2].split() == ["cache0", "cache", "up", "10.0", "9.0", "9", "4"]
    assert lines[4].split()[:3] == ["db1", "db", "down"]
    assert "90.0% of 10.0 GETs/s" in lines[5]
    assert lines[6].startswith("rule budget: 12 of R = 50 flow-mods in the last 1 s")
    assert lines[7] == "Ruleset 2: 7 rules on the switch (controller: 7) of capacity C = 4,096"
    assert lines[8] == "  db1: UNAVAILABLE: gone"


# ---- state ----
@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EXO_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def starting(name="c1", **kw):
    d = {"version": 1, "cluster": name, "phase": "starting", "config": "/x.yaml", "run_dir": f"/tmp/exo/{name}",
         "log": f"/tmp/exo/{name}/supervisor.log", "bridge": "exo-s1", "openflow_port": 6653,
         "tag": f"{name}:/tmp/exo/{name}"}
    d.update(kw)
    return d


def up_data(name="c1", pid=None, start=None):
    return starting(name, phase="up", cluster_yaml="/tmp/exo/c1/cluster.yaml", state_file=f"/run/exo/{name}.json",
                    supervisor={"pid": pid or os.getpid(), "start": start or state.proc_start(os.getpid())},
                    proxy={"host": "client0", "unix": "/tmp/exo/c1/proxy.sock", "tcp": "127.0.0.1:11211"},
                    hosts={"client0": {"pid": 4242, "netns": "exo-c1-client0", "iface": "client0-eth0",
                                       "ip": "10.0.3.1", "mac": "02:00:00:00:03:01"}},
                    controller={"grpc": "unix:/tmp/exo/c1/controller.sock", "openflow": "127.0.0.1:6653"},
                    nodes={"cache": ["cache0"], "db": ["db0", "db1"]})


def test_state_round_trip_claim_and_choice(state_dir):
    path = state.state_path("c1")
    assert path == state_dir / "c1.json"
    assert state.claim(path, starting())
    assert not state.claim(path, starting())  # a second `exo up` of the same cluster loses
    state.write(path, up_data())
    assert oct(path.stat().st_mode & 0o777) == "0o644"  # exo get needs no root to read it
    st = state.read(path)
    assert st.phase == "up" and st.supervisor_alive()
    assert state.running(None).cluster == "c1" and state.running("c1").cluster == "c1"
    state.write(state.state_path("c2"), starting("c2"))
    with pytest.raises(state.StateError, match=r"several clusters are up \(c1, c2\): name one with --cluster"):
        state.running(None)
    with pytest.raises(state.StateError, match="cluster 'c2' is starting, not up"):
        state.running("c2")
    with pytest.raises(state.StateError, match="cluster 'c3' is not up"):
        state.running("c3")
    state.remove(path)
    state.remove(state.state_path("c2"))
    with pytest.raises(state.StateError, match="no cluster is up"):
        state.running(None)


def test_a_state_whose_supervisor_is_gone_or_whose_pid_was_reused_is_not_running(state_dir):
    p = subprocess.Popen(["true"])
    p.wait()
    state.write(state.state_path("c1"), up_data(pid=p.pid, start=12345))
    with pytest.raises(state.StateError, match=r"its supervisor \(pid \d+\) is gone; `exo down --cluster c1`"):
        state.running(None)
    # our own pid, but another start time: a reused pid is not the supervisor
    assert not state.same_process(os.getpid(), state.proc_start(os.getpid()) + 1)
    assert state.same_process(os.getpid(), state.proc_start(os.getpid()))


def test_bad_state_files_are_errors_that_name_the_field(state_dir):
    path = state.state_path("c1")
    for data, msg in ((dict(starting(), bridge=3), "field 'bridge' must be a str"),
                      ({k: v for k, v in starting().items() if k != "tag"}, "field 'tag' is missing"),
                      (dict(starting(), version=9), "version 9"),
                      (dict(starting(), phase="sleeping"), "phase 'sleeping'"),
                      (dict(starting(), openflow_port=True), "field 'openflow_port' must be a int"),
                      ({k: v for k, v in up_data().items() if k != "proxy"}, "field 'proxy' is missing")):
        with pytest.raises(state.StateError, match=msg):
            state.write(path, data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    states, problems = state.all_states()
    assert states == [] and problems and "not JSON" in problems[0]
    with pytest.raises(state.StateError, match="only letters"):
        state.state_path("../etc")


def test_parse_stat_survives_a_command_name_with_spaces_and_parentheses():
    text = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 " + " ".join(["0"] * 12) + " 987654 0"
    assert state.parse_stat(text) == ("S", 987654)


def test_conflicts_name_what_two_clusters_would_share():
    other = starting("other")
    assert state.conflicts(starting("new", run_dir="/tmp/exo/new", bridge="exo-new", openflow_port=6700), [other]) == []
    got = state.conflicts(starting("new", run_dir="/tmp/exo/new"), [other])
    assert got == ["cluster 'other' (up) uses the same bridge (switch.bridge): exo-s1",
                   "cluster 'other' (up) uses the same OpenFlow port (controller.openflow_port): 6653"]
    assert state.conflicts(starting("other"), [other]) == []  # the same cluster: "already up" instead
    assert state.conflicts(starting("new", run_dir="/n", bridge="b", openflow_port=1, cache_nodes=["cache0", "c9"]),
                           [starting("other", cache_nodes=["cache0", "cache1"])]) == [
        "cluster 'other' (up) has cache nodes of the same name (DPDK --file-prefix exo-<name>): cache0"]


def test_reach_lines_give_both_ways_into_a_client_host():
    text = "\n".join(state.reach_lines(up_data()))
    assert "ip netns exec exo-c1-client0 CMD" in text and "mnexec -a 4242 CMD" in text
    assert "unix socket /tmp/exo/c1/proxy.sock" in text and "exo set hello world" in text
    assert "--cluster c1" in "\n".join(state.reach_lines(up_data(), name_it=True))


def test_only_the_exact_tag_marks_a_process_as_ours():
    env = b"PATH=/bin\0" + f"{TAG_ENV}=c1:/tmp/exo/c1".encode() + b"\0HOME=/root\0"
    assert tagged(env, "c1:/tmp/exo/c1")
    assert not tagged(env, "c1:/tmp/exo/c")  # a prefix of another cluster's tag
    assert not tagged(b"", "c1:/tmp/exo/c1")


# ---- arguments ----
@pytest.mark.parametrize("argv, msg", [
    (["stats", "--interval", "0"], "argument --interval: 0 s: must be more than 0"),
    (["stats", "--interval", "soon"], "argument --interval: 'soon' is not a number of seconds"),
    (["rules", "--top", "0"], "argument --top: 0: must be at least 1"),
    (["set", "k"], "the following arguments are required: value"),
    (["get"], "the following arguments are required: key"),
    (["up", "--timeout", "-1"], "argument --timeout"),
    (["down", "--cluster"], "argument --cluster: expected one argument"),
])
def test_bad_arguments_are_refused_naming_the_option(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(argv)
    assert e.value.code == 2
    assert msg in capsys.readouterr().err


def test_commands_on_no_cluster_say_so(state_dir, capsys):
    assert cli.main(["down"]) == 0
    assert "nothing is up" in capsys.readouterr().out
    assert cli.main(["stats"]) == 2
    assert "no cluster is up" in capsys.readouterr().err
    assert cli.main(["get", "k"]) == 2
    assert "no cluster is up" in capsys.readouterr().err


# ---- get / set / del against a real memcached ----
MEMCACHED = shutil.which("memcached") or "/usr/bin/memcached"


def _start_memcached(sock: Path, mode: str) -> subprocess.Popen:
    if not os.access(MEMCACHED, os.X_OK):
        missing_or_fail(f"no memcached at {MEMCACHED} (make deps installs it)")
    cmd = [MEMCACHED, "-s", str(sock), "-a", mode, "-U", "0", "-m", "16", "-t", "1"]
    proc = subprocess.Popen(cmd + (["-u", "root"] if os.geteuid() == 0 else []), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(sock))
            return proc
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError(f"{' '.join(cmd)} did not start")


@pytest.fixture
def memcached_dir():
    """A directory anyone may enter (pytest's tmp_path is closed to other users), holding a
    memcached socket open to everyone ("open.sock") and one open to its owner only ("closed.sock")."""
    d = Path(tempfile.mkdtemp(prefix="exo-cli-test-"))
    os.chmod(d, 0o755)
    procs = [_start_memcached(d / "open.sock", "0666"), _start_memcached(d / "closed.sock", "0600")]
    try:
        yield d
    finally:
        for p in procs:
            p.terminate()
            p.wait(5)
        shutil.rmtree(d, ignore_errors=True)


def exo(*argv, user=None):
    pre = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if user else []
    return subprocess.run([*pre, sys.executable, "-m", "exo_cli.main", *argv], cwd="/", capture_output=True,
                          timeout=60, env=dict(os.environ, EXO_STATE_DIR="/nonexistent-exo-state"))


def test_get_set_del_print_and_exit_as_documented(memcached_dir):
    sock = str(memcached_dir / "open.sock")
    r = exo("set", "--socket", sock, "greeting", "hello world")
    assert (r.returncode, r.stdout) == (0, b"STORED\n"), r.stderr
    r = exo("get", "--socket", sock, "greeting")
    assert (r.returncode, r.stdout) == (0, b"hello world\n")
    r = exo("del", "--socket", sock, "greeting")
    assert (r.returncode, r.stdout) == (0, b"DELETED\n")
    r = exo("get", "--socket", sock, "greeting")
    assert (r.returncode, r.stdout, r.stderr) == (1, b"", b"NOT_FOUND\n")
    r = exo("del", "--socket", sock, "greeting")
    assert (r.returncode, r.stderr) == (1, b"NOT_FOUND\n")
    r = exo("get", "--socket", str(memcached_dir / "missing.sock"), "k")
    assert r.returncode == 2 and b"does not exist" in r.stderr
    r = exo("get", "--socket", "/etc/hostname", "k")
    assert r.returncode == 2 and b"is not a unix socket" in r.stderr
    r = exo("get", "--socket", sock, "k" * 300)
    assert r.returncode == 2 and b"exo get:" in r.stderr  # too long a key: refused before sending


def test_get_set_del_need_no_root_when_the_socket_permits(memcached_dir):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        missing_or_fail("needs root and setpriv to run exo as another user")
    r = exo("set", "--socket", str(memcached_dir / "open.sock"), "k", "v", user="nobody")
    assert (r.returncode, r.stdout) == (0, b"STORED\n"), r.stderr
    r = exo("get", "--socket", str(memcached_dir / "open.sock"), "k", user="nobody")
    assert (r.returncode, r.stdout) == (0, b"v\n"), r.stderr
    r = exo("get", "--socket", str(memcached_dir / "closed.sock"), "k", user="nobody")
    assert r.returncode == 2 and b"no permission to connect" in r.stderr, r.stderr
    r = exo("stats", user="nobody")
    assert r.returncode == 2 and b"exo stats needs root" in r.stderr


def test_a_write_the_proxy_could_not_confirm_says_outcome_unknown(tmp_path):
    """exo-proxy answers SERVER_ERROR outcome unknown when the cluster did not answer a write after
    every resend (docs/proxy.md); memcached never says that, so a one-line server does here."""
    sock = tmp_path / "proxy.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(sock))
    srv.listen(1)

    def answer():
        conn, _ = srv.accept()
        with conn:
            got = b""
            while got.count(b"\r\n") < 2:  # the command line and the data block
                got += conn.recv(4096)
            conn.sendall(b"SERVER_ERROR outcome unknown\r\n")
    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        r = exo("set", "--socket", str(sock), "k", "v")
    finally:
        t.join(10)
        srv.close()
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.startswith(b"exo set: ") and b"outcome unknown (it may have been applied)" in r.stderr, r.stderr
