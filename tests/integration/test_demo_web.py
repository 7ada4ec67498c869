"""`exo demo-web`, shortened: the catalogue app (uvicorn workers as an unprivileged user with no
capability) reads through exo-proxy on a Mininet cluster, wrk drives it, a cache node is killed
mid-run, and no HTTP request fails. Then the same code with the app's fault switch on
(/item/1, the most popular URL, answers 500): the demo must report failed requests and exit
non-zero, which shows its error count can fail. And exo-proxy as docs/proxy.md's service user."""
from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.mininet
REPO = Path(__file__).resolve().parents[2]
# Under /tmp/exo, not pytest's tmp_path (mode 700 under /tmp/pytest-of-root): the web user must
# reach the staged app and the proxy's socket.
RUN = Path("/tmp/exo/test/demo_web")
FIELDS = ("http_requests", "http_errors", "requests_per_s", "p50_ms", "p99_ms", "cache_share",
          "http_errors_during_cache_kill")


@pytest.fixture(scope="module", autouse=True)
def prerequisites():
    from exo_cli.demo_web_host import WebHostError, check_prerequisites
    try:
        check_prerequisites()
    except WebHostError as err:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and a prerequisite is missing: {err}", pytrace=False)
        pytest.skip(str(err))


def demo_web(out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([sys.executable, "-m", "exo_cli.main", "demo-web", "--run-dir", str(RUN), "--out", str(out),
                           "--openflow-port", "6677", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    if not out.exists():
        pytest.fail(f"demo-web wrote no results (exit {proc.returncode}):\n{proc.stderr[-3000:]}{proc.stdout[-3000:]}")
    return proc, json.loads(out.read_text())


def test_a_cache_node_kill_fails_no_http_request_of_an_unprivileged_app(tmp_path: Path):
    proc, s = demo_web(tmp_path / "demo_web.json", "--quick")
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    for field in FIELDS:
        assert field in s, field
    assert s["http_requests"] > 500
    assert s["http_errors"] == 0 and s["http_errors_during_cache_kill"] == 0 and s["warmup_http_errors"] == 0
    assert 0 < s["p50_ms"] <= s["p99_ms"]
    assert s["requests_per_s"] > 0
    # the cache nodes served some of the app's GETs before the kill, and the victim was one of them
    assert s["segments"]["before"]["cache_share"] > 0
    assert 0 < s["cache_share"] < 1
    assert s["kill"]["node"] in s["cluster"]["cache_nodes"] and s["kill"]["cached_keys"] > 0
    assert s["kill"]["withdrawn_after_s"] is not None
    assert s["segments"]["kill"]["served_by"].get(s["kill"]["node"]) is None  # it answered no Stats after
    # the app: several workers, all of them the web user with no capability in any set
    web = s["web"]
    assert web["unprivileged"] is True and web["user"] == "exoweb" and web["uid"] != 0
    assert len(web["worker_pids"]) == web["workers"] >= 2
    assert web["worker_cap_eff"] == ["0000000000000000"] * web["workers"]
    for p in web["processes"]:
        assert 0 not in p["Uid"] and p["CapEff"] == p["CapPrm"] == p["CapAmb"] == 0 and p["NoNewPrivs"] == "1"
    # the workers reach exo-proxy through its socket: group exoweb, mode 0660
    assert s["proxy"]["socket"]["group"] == "exoweb" and s["proxy"]["socket"]["mode"] == "0o660"
    assert s["proxy"]["process"]["Uid"][1] == 0  # the proxy holds the privilege, not the app


def test_failed_requests_are_counted_and_fail_the_demo(tmp_path: Path):
    proc, s = demo_web(tmp_path / "demo_web.json", "--fault-item", "1", "--no-kill", "--items", "500",
                       "--warmup", "2", "--before", "3")
    assert proc.returncode == 1, proc.stderr[-3000:] + proc.stdout[-3000:]
    before = s["segments"]["before"]
    assert s["http_errors"] == before["non2xx"] > 0  # every request for /item/1 answered 500
    assert s["warmup_http_errors"] > 0
    assert s["http_errors_during_cache_kill"] is None and s["kill"] is None
    assert "HTTP requests failed" in proc.stdout


CONNECT = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
           "s.sendall(b'version\\r\\n'); print(s.recv(100).decode().strip())")


def test_the_proxy_runs_as_its_documented_service_user():
    """docs/proxy.md's systemd unit, with setpriv setting the same credentials: exo-proxy as user
    nobody, member of exoweb, CAP_NET_RAW its only (ambient) capability, --listen none and
    --unix-group exoweb. The web user connects; another user may not; without the capability
    the proxy stops naming it. In a network namespace of its own with a veth carrying the
    client's address (no cluster needed to start the proxy)."""
    from exo_common.config import write_resolved
    from exo_cli.demo_web_host import ensure_user
    from exo_topo.configgen import emulation_config
    web = ensure_user("exoweb")
    d = Path("/tmp/exo/test/demo_web_service")
    shutil.rmtree(d, ignore_errors=True)
    (d / "run").mkdir(parents=True)
    os.chmod(d, 0o755)
    os.chown(d / "run", pwd.getpwnam("nobody").pw_uid, -1)  # the proxy's RuntimeDirectory
    build = Path(os.environ.get("EXO_BUILD", REPO / "build"))
    shutil.copy(build / "proxy" / "exo-proxy", d / "exo-proxy")  # the build dir may be unreadable to nobody
    os.chmod(d / "exo-proxy", 0o755)
    cfg = emulation_config(n_cache=1, n_db=1, n_clients=1, run_dir=d)
    write_resolved(cfg, d / "cluster.json")
    os.chmod(d / "cluster.json", 0o644)
    sock = d / "run" / "exo-proxy.sock"
    ns, veth = "exo-websvc", "exowsvc"
    as_nobody = ["ip", "netns", "exec", ns, "setpriv", "--reuid=nobody", "--regid=nogroup", f"--groups={web.pw_gid}"]
    proxy = [str(d / "exo-proxy"), "--config", str(d / "cluster.json"), "--client", "client0", "--iface", f"{veth}1",
             "--listen", "none", "--unix", str(sock), "--unix-group", "exoweb"]
    proc = None
    try:
        for cmd in (["ip", "netns", "add", ns],
                    ["ip", "link", "add", f"{veth}0", "type", "veth", "peer", "name", f"{veth}1"],
                    ["ip", "link", "set", f"{veth}1", "netns", ns],
                    ["ip", "netns", "exec", ns, "ip", "addr", "add", f"{cfg.clients[0].ip}/8", "dev", f"{veth}1"],
                    ["ip", "netns", "exec", ns, "ip", "link", "set", f"{veth}1", "up"]):
            subprocess.run(cmd, check=True, capture_output=True)
        no_cap = subprocess.run([*as_nobody, "--inh-caps=-all", *proxy], capture_output=True, text=True, timeout=20)
        assert no_cap.returncode == 1 and "exo-proxy needs CAP_NET_RAW" in no_cap.stderr, no_cap.stderr

        proc = subprocess.Popen([*as_nobody, "--inh-caps=+net_raw", "--ambient-caps=+net_raw", *proxy],
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "exo-proxy made no socket in 10 s"
            time.sleep(0.05)
        st = sock.stat()
        assert stat.S_ISSOCK(st.st_mode) and st.st_mode & 0o777 == 0o660
        assert pwd.getpwuid(st.st_uid).pw_name == "nobody" and grp.getgrgid(st.st_gid).gr_name == "exoweb"
        status = Path(f"/proc/{proc.pid}/status").read_text()
        assert f"CapEff:\t{1 << 13:016x}" in status and f"CapAmb:\t{1 << 13:016x}" in status  # CAP_NET_RAW
        listeners = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Hltn"], capture_output=True, text=True)
        assert listeners.stdout.strip() == "", listeners.stdout  # --listen none: no TCP port
        ok = subprocess.run(["setpriv", "--reuid=exoweb", "--regid=exoweb", "--init-groups", "/usr/bin/python3",
                             "-c", CONNECT, str(sock)], capture_output=True, text=True, timeout=10)
        assert ok.stdout.startswith("VERSION exo-proxy"), ok.stderr
        denied = subprocess.run(["setpriv", "--reuid=daemon", "--regid=daemon", "--init-groups", "/usr/bin/python3",
                                 "-c", CONNECT, str(sock)], capture_output=True, text=True, timeout=10)
        assert denied.returncode != 0 and "PermissionError" in denied.stderr, denied.stderr
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # takes the veth pair with it
        shutil.rmtree(d, ignore_errors=True)
