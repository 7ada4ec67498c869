"""exo-proxy on a real cluster: a memcached client's set/get/delete through it, the proxy's
answers to what the cluster cannot do, and the conformance suites we did not write
(pymemcache's integration tests, memccapable, PHP) with every failure explained by a documented
limit (docs/proxy.md). Writes results/proxy_conformance.json like `make proxy-conformance`."""
from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from exo_proxy import conformance, rig
from exo_topo.cluster import EmulatedCluster
from exo_topo.configgen import emulation_config
from exo_topo.netns import in_netns

pytestmark = pytest.mark.mininet
RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.fixture(scope="module")
def proxied():
    run_dir = Path("/tmp/exo/test/proxy")
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = emulation_config(n_cache=1, n_db=2, n_clients=1, run_dir=run_dir,
                           controller={"openflow_port": 6672})
    with EmulatedCluster(cfg, run_dir) as cl, rig.proxy(cl, "client0", unix_path=run_dir / "proxy.sock"):
        yield cl


def talk(cl, request: bytes, until: bytes = b"\r\n", unix: Path | None = None) -> bytes:
    with in_netns(cl.host("client0").pid):
        if unix is not None:
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(unix))
        else:
            s = socket.create_connection(("127.0.0.1", rig.PORT), timeout=5)
    with s:
        s.settimeout(5)
        s.sendall(request)
        got = b""
        while not got.endswith(until):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def test_set_get_delete_round_trip_over_tcp_and_unix(proxied):
    assert talk(proxied, b"set exo:a 0 0 5\r\nhello\r\n") == b"STORED\r\n"
    assert talk(proxied, b"get exo:a exo:missing\r\n", b"END\r\n") == b"VALUE exo:a 0 5\r\nhello\r\nEND\r\n"
    unix = Path("/tmp/exo/test/proxy/proxy.sock")
    assert talk(proxied, b"mg exo:a v\r\n", unix=unix) == b"VA 5\r\nhello\r\n"
    assert talk(proxied, b"delete exo:a\r\n") == b"DELETED\r\n"
    assert talk(proxied, b"get exo:a\r\n", b"END\r\n") == b"END\r\n"


def test_unsupported_commands_name_their_limit(proxied):
    for request, answer in ((b"flush_all\r\n", b"CLIENT_ERROR flush_all not supported\r\n"),
                            (b"incr n 1\r\n", b"CLIENT_ERROR incr not supported\r\n"),
                            (b"set k 0 60 1\r\nx\r\n", b"CLIENT_ERROR expiry not supported (exptime must be 0)\r\n"),
                            (b"set k 0 0 2000\r\n" + b"x" * 2000 + b"\r\n", b"SERVER_ERROR object too large for cache\r\n")):
        assert talk(proxied, request) == answer, request[:20]
    # binary protocol: an error and a closed connection, and the proxy still serves others
    assert talk(proxied, b"\x80\x00\x00\x00", until=b"\n").startswith(b"CLIENT_ERROR")
    assert talk(proxied, b"version\r\n").startswith(b"VERSION ")


def test_conformance_suites_fail_only_on_documented_limits(proxied, tmp_path):
    suites = conformance.run_all(rig.run_in(proxied, "client0"), "127.0.0.1", rig.PORT, tmp_path)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "proxy_conformance.json").write_text(json.dumps(
        {"schema": "exo-proxy-conformance/1", "suites": suites,
         "pymemcache_version": conformance.PYMEMCACHE_VERSION, "from": __name__}, indent=1) + "\n")
    for name, s in suites.items():
        assert s["error"] is None, f"{name}: {s['error']}"
        assert s["passed"] + s["failed"] > 0, name
        unexplained = [f for f in s["failures"] if f["reason"].startswith("unexplained")]
        assert not unexplained, f"{name}: {unexplained[:5]}"
    assert suites["php-memcached"]["failed"] == 0 and suites["php-memcached"]["passed"] == 4


def test_python_client_through_the_proxy(proxied):
    """transport="proxy": the same Client API over exo-proxy's unix socket (no raw socket, so a
    web worker needs no capability), against the real proxy and cluster."""
    from exoskeleton import Client
    with Client(transport="proxy", proxy="/tmp/exo/test/proxy/proxy.sock") as c:
        assert c.set("exo:p1", b"one") is not False
        c.set_many({"exo:p2": b"two", "exo:p 3": b"three"})  # a key with a space goes as base64 (mg/ms b)
        assert c.get_many(["exo:p1", "exo:p2", "exo:p 3", "exo:none"]) == {
            "exo:p1": b"one", "exo:p2": b"two", "exo:p 3": b"three", "exo:none": None}
        assert c.delete("exo:p1") is True
        assert c.delete("exo:p1") is False  # the db node reports NOT_FOUND
        assert c.get("exo:p1") is None
