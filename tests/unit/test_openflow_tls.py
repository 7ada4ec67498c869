"""OpenFlow over TLS (exo_controller/openflow_tls.py, tls_socket.py): only a peer with the
cluster's `switch` certificate gets a datapath.

The accept step against real TLS connections; then the real controller process
(`python -m exo_controller`, TLS on) with a fake switch speaking OpenFlow 1.3 over TLS: a peer
holding a cache node's valid certificate that claims the switch's dpid is refused, counted
(`openflow_refused`) and does not replace the switch's connection, while the switch itself may
reconnect (the check is not a blanket refusal)."""
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from exo_common.pki import init_pki, issue_leaf, new_ca, write_pair
from exo_controller.openflow_tls import accept_switch, server_context, switch_refusal
from exo_controller.tls_socket import SerializedTlsSocket
from exo_topo.grpc_clients import Stubs
from tls_controller import tls_controller_config

REPO = Path(__file__).resolve().parents[2]
HEADER = struct.Struct("!BBHI")
HELLO, ECHO_REQUEST, ECHO_REPLY, FEATURES_REQUEST, FEATURES_REPLY = 0, 2, 3, 5, 6


def test_switch_refusal():
    def cert(*cns):
        # ssl.SSLSocket.getpeercert(): subject is a tuple of RDNs, each a tuple of (key, value)
        return {"subject": tuple((("commonName", cn),) for cn in cns) + ((("organizationName", "exo:t"),),)}
    assert switch_refusal(cert("switch")) is None
    assert switch_refusal(cert("cache1")) == "certificate name cache1 is not 'switch'"
    assert switch_refusal(cert("switch", "cache1")) is not None
    assert switch_refusal({}) == "no client certificate" and switch_refusal(None) == "no client certificate"


@pytest.fixture
def pki(tmp_path):
    roles = {"controller": "controller", "switch": "switch", "cache1": "cache"}
    init_pki(roles, "t", tmp_path / "pki")
    return tmp_path / "pki"


def client_ctx(pki_dir, name=None, chain=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki_dir / "ca.crt")
    ctx.check_hostname = False  # OVS checks only the chain, not the controller's name
    if name is not None:
        ctx.load_cert_chain(*(chain or (pki_dir / f"{name}.crt", pki_dir / f"{name}.key")))
    return ctx


def accept_one(server_ctx, connect, timeout=2.0):
    """Run accept_switch on one real TCP connection made by connect(port)."""
    lst = socket.create_server(("127.0.0.1", 0))
    port = lst.getsockname()[1]
    out = {}

    def server():
        sock, _ = lst.accept()
        out["why"], out["conn"] = accept_switch(server_ctx, sock, timeout)
        if out["conn"] is not None:
            out["conn"].close()

    t = threading.Thread(target=server)
    t.start()
    try:
        connect(port)
    except (OSError, ssl.SSLError):
        pass
    t.join(10)
    lst.close()
    return out["why"]


def test_accept_switch_takes_only_the_switch_certificate(pki, tmp_path):
    ctx = server_context(str(pki / "controller.crt"), str(pki / "controller.key"), str(pki / "ca.crt"))

    def tls_as(name=None, chain=None):
        def connect(port):
            with client_ctx(pki, name, chain).wrap_socket(socket.create_connection(("127.0.0.1", port))) as s:
                s.sendall(HEADER.pack(4, HELLO, 8, 1))
                s.recv(8)
        return connect

    def plain(port):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(HEADER.pack(4, HELLO, 8, 1))
            s.recv(8)

    def silent(port):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.recv(8)  # never says anything: the handshake deadline closes it

    key, ca = new_ca("t")
    write_pair(tmp_path, "rogue", *issue_leaf(key, ca, "switch", "switch", "t"))
    assert accept_one(ctx, tls_as("switch")) is None
    assert accept_one(ctx, tls_as("cache1")) == "certificate name cache1 is not 'switch'"
    assert accept_one(ctx, tls_as("controller")) == "certificate name controller is not 'switch'"
    assert accept_one(ctx, tls_as(None)).startswith("TLS handshake failed")
    assert accept_one(ctx, tls_as("switch", (tmp_path / "rogue.crt", tmp_path / "rogue.key"))).startswith(
        "TLS handshake failed")
    assert accept_one(ctx, plain).startswith("TLS handshake failed")
    t0 = time.monotonic()
    assert accept_one(ctx, silent, timeout=0.3).startswith("TLS handshake failed")
    assert time.monotonic() - t0 < 3


def test_serialized_socket_carries_both_directions_at_once(pki):
    """os-ken reads and writes one connection from two threads: a megabyte each way, at once."""
    ctx = server_context(str(pki / "controller.crt"), str(pki / "controller.key"), str(pki / "ca.crt"))
    a, b = socket.socketpair()
    box = {}
    t = threading.Thread(target=lambda: box.update(s=ctx.wrap_socket(a, server_side=True)))
    t.start()
    peer = client_ctx(pki, "switch").wrap_socket(b)
    t.join(5)
    wrapped = SerializedTlsSocket(box["s"])
    wrapped.settimeout(5)
    blob = os.urandom(1 << 20)
    got = {"server": bytearray(), "peer": bytearray()}

    def drain(recv, into):
        while len(into) < len(blob):
            chunk = recv(65536)
            if not chunk:
                break
            into += chunk

    threads = [threading.Thread(target=wrapped.sendall, args=(blob,)),
               threading.Thread(target=drain, args=(wrapped.recv, got["server"])),
               threading.Thread(target=peer.sendall, args=(blob,)),
               threading.Thread(target=drain, args=(peer.recv, got["peer"]))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert bytes(got["server"]) == blob and bytes(got["peer"]) == blob
    with pytest.raises(socket.timeout):
        wrapped.settimeout(0.1)
        wrapped.recv(10)
    peer.close()
    wrapped.settimeout(2)
    assert wrapped.recv(10) == b""  # the peer's close is an end of stream, not a spin
    wrapped.close()


# ---------------------------------------------------------------- the controller process

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeSwitch:
    """Says HELLO, answers FEATURES_REQUEST with `dpid` and echoes; records what it was sent."""

    def __init__(self, port, ctx, dpid):
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock = ctx.wrap_socket(raw) if ctx is not None else raw
        self.dpid, self.seen, self.closed = dpid, [], threading.Event()
        self.sock.sendall(HEADER.pack(4, HELLO, 8, 1))
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        buf = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 8:
                    _, mtype, length, xid = HEADER.unpack_from(buf)
                    if len(buf) < length:
                        break
                    buf = buf[length:]
                    self.seen.append(mtype)
                    if mtype == FEATURES_REQUEST:
                        body = struct.pack("!QIBB2xII", self.dpid, 0, 254, 0, 0x4F, 0)
                        self.sock.sendall(HEADER.pack(4, FEATURES_REPLY, 8 + len(body), xid) + body)
                    elif mtype == ECHO_REQUEST:
                        self.sock.sendall(HEADER.pack(4, ECHO_REPLY, 8, xid))
        except (OSError, ssl.SSLError):
            pass
        self.closed.set()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


@pytest.fixture
def controller(cluster_dict, tmp_path):
    port = free_port()
    cfg, path = tls_controller_config(cluster_dict, tmp_path, port)
    log = open(tmp_path / "controller.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "exo_controller", "--config", str(path)], cwd=REPO,
                            stdout=log, stderr=subprocess.STDOUT)
    stubs = Stubs(cfg)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "controller.log").read_text()
            try:
                stubs.controller_stats(timeout=1)
                break
            except Exception:  # noqa: BLE001 - not up yet
                assert time.monotonic() < deadline, "controller did not come up"
                time.sleep(0.2)
        yield cfg, port, stubs
    finally:
        stubs.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def wait_stats(stubs, pred, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        s = stubs.controller_stats(timeout=2)
        if pred(s):
            return s
        assert time.monotonic() < deadline, f"{what}: {s}"
        time.sleep(0.1)


def test_a_cache_node_certificate_cannot_take_the_switch_s_place(controller):
    cfg, port, stubs = controller
    pki = Path(cfg.security.cert_dir)
    s = stubs.controller_stats()
    assert s["openflow_refused"] == 0 and s["switch_connected"] == 0
    switch = FakeSwitch(port, client_ctx(pki, "switch"), cfg.switch.dpid)
    try:
        wait_stats(stubs, lambda s: s["switch_connected"] == 1 and s.get("switch_connects", 0) == 1, "switch connected")
        # a cache node's valid certificate claiming the switch's dpid
        rogue = FakeSwitch(port, client_ctx(pki, "cache1"), cfg.switch.dpid)
        assert rogue.closed.wait(5) and FEATURES_REQUEST not in rogue.seen and HELLO not in rogue.seen
        # plain TCP
        plain = FakeSwitch(port, None, cfg.switch.dpid)
        assert plain.closed.wait(10) and not plain.seen
        s = wait_stats(stubs, lambda s: s["openflow_refused"] == 2, "both refused and counted")
        assert s["switch_connects"] == 1 and s["switch_connected"] == 1
        assert not switch.closed.is_set()  # the switch's own connection is untouched
        # the switch itself may come back (and replaces its old connection)
        again = FakeSwitch(port, client_ctx(pki, "switch"), cfg.switch.dpid)
        wait_stats(stubs, lambda s: s["switch_connects"] == 2, "switch reconnected")
        assert FEATURES_REQUEST in again.seen and stubs.controller_stats()["openflow_refused"] == 2
        again.close()
    finally:
        switch.close()


def test_the_controller_names_a_missing_certificate(cluster_dict, tmp_path):
    cluster_dict["security"] = {"cert_dir": str(tmp_path / "nopki")}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cluster_dict))
    r = subprocess.run([sys.executable, "-m", "exo_controller", "--config", str(path)], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert f"{tmp_path}/nopki/ca.crt is missing: run `exo certs init" in r.stderr
