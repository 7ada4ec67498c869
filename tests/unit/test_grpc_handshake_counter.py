"""TLS handshakes gRPC refuses, counted by the controller as tls_handshake_refused
(exo_controller/grpc_handshake_counter.py).

First the pure parts against gRPC's real lines (the refusal check must reject look-alikes),
the verbosity filter, the throttle and the relay on a real pipe. Then the real controller
process (`python -m exo_controller`, TLS on, its gRPC service on a unix socket): callers with a
certificate of another CA, with none, and without TLS, each through a raw TLS socket (exactly
one handshake each: +1 exactly) and through a real gRPC channel (+1 or more: gRPC retries),
move the counter in Stats; honest calls (fresh channels, so fresh handshakes) do not. Run once
with GRPC_VERBOSITY unset and once with ERROR, under which gRPC would not write the line at all
unless the counter lowers its level (and then hides what ERROR hides)."""
import ctypes
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from conftest_ci import missing_or_fail
from exo_common.pki import issue_leaf, new_ca, write_pair
from exo_controller.grpc_handshake_counter import (STAT, Throttle, _SEVERITY, grpc_floor, refusal_reason, relay,
                                                    shown)
from exo_topo.grpc_clients import Stubs
from exoproto import control_pb2 as pb
from exoproto import control_pb2_grpc as rpc
from tls_controller import tls_controller_config

REPO = Path(__file__).resolve().parents[2]
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# gRPC 1.85.3's lines (server side) for a rogue-CA client, a client without a certificate and a
# plaintext one; absl before InitializeLog; gRPC 1.51's (gpr, ERROR).
ROGUE = (b"I1125 07:08:55.197110   25930 ssl_transport_security.cc:2563] Handshake failed with error "
         b"SSL_ERROR_SSL: error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED: "
         b"unable to get local issuer certificate")
NOCERT = (b"I1125 07:08:57.524216   25927 ssl_transport_security.cc:2563] Handshake failed with error "
          b"SSL_ERROR_SSL: error:100000c0:SSL routines:OPENSSL_internal:PEER_DID_NOT_RETURN_A_CERTIFICATE: "
          b"Invalid certificate verification context")
PLAIN_RAW_ABSL = (b"I0000 00:00:1795590748.652416   31208 ssl_transport_security.cc:2563] Handshake failed with "
                  b"error SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER")
GRPC_151 = (b"E1125 07:08:55.197110000   25930 ssl_transport_security.cc:1519] Handshake failed with fatal "
            b"error SSL_ERROR_SSL: error:0A000086:SSL routines::certificate verify failed.")


def test_refusal_reason_takes_grpc_s_handshake_failures_only():
    for line in (ROGUE, NOCERT, PLAIN_RAW_ABSL, GRPC_151, ROGUE + b"\n"):
        assert refusal_reason(line) is not None, line
    assert b"CERTIFICATE_VERIFY_FAILED" in refusal_reason(ROGUE)
    not_ours = [
        # the peer refused us (its alert): counted on its side
        b"I1125 07:08:55.1 25930 ssl_transport_security.cc:2563] Handshake failed with error SSL_ERROR_SSL: "
        b"error:10000418:SSL routines:OPENSSL_internal:TLSV1_ALERT_UNKNOWN_CA",
        b"E1125 07:08:55.1 25930 ssl_transport_security.cc:1519] Handshake failed with fatal error SSL_ERROR_SSL: "
        b"error:0A00045C:SSL routines::tlsv13 alert certificate required.",
        # the same words from another file, from our own log, quoted in the middle of a line
        b"I1125 07:08:55.1 25930 security_handshaker.cc:300] Handshake failed with error foo",
        b"2025-11-25 07:08:55,197 WARNING exo.authz: Handshake failed with error SSL_ERROR_SSL",
        b"x " + ROGUE,
        b"I1125 07:08:55.197110   25930 ssl_transport_security.cc:2563] Handshake read failed",
        b"",
    ]
    for line in not_ours:
        assert refusal_reason(line) is None, line


def test_the_relay_hides_only_what_grpc_verbosity_would_have_hidden():
    info = b"I1125 07:08:55.1 25930 chttp2_server.cc:1] something"
    warn = b"W1125 07:08:55.1 25930 log.cc:102] Log level INFO is not suitable for production."
    err = b"E1125 07:08:55.1 25930 server.cc:9] bad"
    ours = b"2025-11-25 07:08:55,197 INFO exo_controller: gRPC Controller service on unix:/x"
    assert grpc_floor("") == grpc_floor("info") == grpc_floor("DEBUG") == grpc_floor("bogus") == _SEVERITY[b"I"]
    assert grpc_floor("ERROR") == _SEVERITY[b"E"] and grpc_floor("none") == _SEVERITY[b"F"]
    assert all(shown(line, grpc_floor("")) for line in (info, warn, err, ours))
    assert [shown(line, grpc_floor("ERROR")) for line in (info, warn, err, ours)] == [False, False, True, True]
    assert [shown(line, grpc_floor("NONE")) for line in (info, warn, err, ours)] == [False, False, False, True]


def test_throttle():
    t = Throttle(10.0)
    assert t.admit(0.0) == 0
    assert t.admit(1.0) is None and t.admit(9.9) is None
    assert t.admit(10.0) == 2
    assert t.admit(25.0) == 0


def test_relay_forwards_every_line_and_counts_refusals():
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    cell = ctypes.c_uint64()
    now = [0.0]
    t = threading.Thread(target=relay, args=(src_r, dst_w, cell, grpc_floor("ERROR"), lambda: now[0]))
    t.start()
    ours = b"2025-11-25 07:08:55,197 INFO exo_controller: up"
    info = b"I1125 07:08:55.1 25930 chttp2_server.cc:1] hidden under ERROR"
    # a line split across writes, then three refusals (the last two within the throttle's window)
    os.write(src_w, ours[:10])
    os.write(src_w, ours[10:] + b"\n" + info + b"\n" + ROGUE + b"\n" + NOCERT + b"\n")
    os.write(src_w, PLAIN_RAW_ABSL + b"\n" + b"traceback without a newline")
    os.close(src_w)
    t.join(10)
    os.close(dst_w)
    out = b""
    while chunk := os.read(dst_r, 65536):
        out += chunk
    os.close(src_r)
    os.close(dst_r)
    assert cell.value == 3
    assert out == ours + b"\n" + ROGUE + b"\n" + b"traceback without a newline\n"
    # after the window the next one is shown with how many were not
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    throttle = Throttle(10.0)
    times = iter([0.0, 1.0, 2.0, 11.0])
    t = threading.Thread(target=relay, args=(src_r, dst_w, cell, 0, lambda: next(times), throttle))
    t.start()
    os.write(src_w, b"\n".join([ROGUE, NOCERT, NOCERT, ROGUE]) + b"\n")
    os.close(src_w)
    t.join(10)
    os.close(dst_w)
    out = os.read(dst_r, 65536)
    assert cell.value == 7
    assert out == ROGUE + b"\n" + ROGUE + b" (and 2 more refused TLS handshakes not shown)\n"


def test_the_relay_starts_under_the_package_s_interpreter(tmp_path):
    """As packaging/bin/exo-controller runs it: Debian's python3 -I (no PYTHONPATH, no venv) with
    the package's Python tree put on sys.path by hand, which a child process does not inherit.
    The relay must come up there too, or the installed controller never counts a refusal."""
    python = Path("/usr/bin/python3")
    if not python.exists():
        missing_or_fail("/usr/bin/python3 (Debian's python3) is missing")
    code = ("import os, sys, time; sys.path.insert(0, sys.argv.pop(1))\n"
            "from exo_controller.grpc_handshake_counter import install\n"
            "h = install()\n"
            "print('no relay' if h is None else 'relay up', flush=True)\n"
            "os.write(2, sys.argv[1].encode() + b'\\n')\n"
            "deadline = time.monotonic() + 10\n"
            "while h is not None and h.value() < 1 and time.monotonic() < deadline: time.sleep(0.05)\n"
            "print(h.value() if h else -1, flush=True)\n")
    res = subprocess.run([str(python), "-I", "-c", code, str(REPO / "controller"), NOCERT.decode()],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.stdout.split() == ["relay", "up", "1"], res.stdout + res.stderr
    assert NOCERT.decode() in res.stderr  # forwarded to the original stderr too


# ---------------------------------------------------------------- the controller process

def relay_pids(parent: int) -> list[int]:
    """The controller's relay processes (children of `parent` running this module)."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == parent and b"grpc_handshake_counter" in (d / "cmdline").read_bytes():
                out.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(params=["unset", "ERROR"])
def controller(request, cluster_dict, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg, path = tls_controller_config(cluster_dict, tmp_path, port)
    env = dict(os.environ)
    env.pop("GRPC_VERBOSITY", None)
    if request.param != "unset":
        env["GRPC_VERBOSITY"] = request.param
    log_path = tmp_path / "controller.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "exo_controller", "--config", str(path)], cwd=REPO,
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    relays = []
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log_path.read_text()
            stubs = Stubs(cfg)
            try:
                stubs.controller_stats(timeout=1)
                break
            except grpc.RpcError:
                assert time.monotonic() < deadline, "controller did not come up:\n" + log_path.read_text()
                time.sleep(0.2)
            finally:
                stubs.close()
        relays = relay_pids(proc.pid)
        assert len(relays) == 1, relays
        yield cfg, log_path, request.param, relays[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        # the relay ends with the controller (end of file on its pipe), after forwarding the
        # controller's last line, written just before it exits
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in relays):
            assert time.monotonic() < deadline, f"relay {relays} outlived the controller"
            time.sleep(0.05)
        assert "INFO exo_controller: stopped (counters:" in log_path.read_text(errors="replace")


def refused(cfg) -> int:
    """Stats' tls_handshake_refused, through a fresh operator channel (itself an honest handshake)."""
    stubs = Stubs(cfg)
    try:
        return stubs.controller_stats(timeout=5)[STAT]
    finally:
        stubs.close()


def wait_refused(cfg, want, exact=True, timeout=10.0) -> int:
    deadline = time.monotonic() + timeout
    while (n := refused(cfg)) < want:
        assert time.monotonic() < deadline, f"{STAT} is {n}, want {want}"
        time.sleep(0.05)
    if exact:
        time.sleep(0.3)  # nothing more may arrive
        assert (n := refused(cfg)) == want
    return n


def raw_attempt(path: str, ctx=None) -> None:
    """One connection to the unix socket `path`: a TLS handshake with `ctx` then the HTTP/2
    preface, or without ctx the preface in plaintext. Whatever the server answers."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(path)
        try:
            if ctx is None:
                s.sendall(H2_PREFACE)
                s.recv(100)
            else:
                with ctx.wrap_socket(s, server_hostname="controller") as t:
                    t.sendall(H2_PREFACE)  # TLS 1.3: the server's verdict on our certificate comes after
                    t.recv(100)
        except (ssl.SSLError, OSError):
            pass


def tls_ctx(pki: Path, pair=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki / "ca.crt")
    ctx.set_alpn_protocols(["h2"])
    if pair is not None:
        ctx.load_cert_chain(*pair)
    return ctx


def grpc_attempt(address: str, creds) -> None:
    """A real gRPC client's call: refused in the handshake, so UNAVAILABLE (or its deadline)."""
    channel = (grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override", "controller")])
               if creds is not None else grpc.insecure_channel(address))
    try:
        with pytest.raises(grpc.RpcError) as err:
            rpc.ControllerStub(channel).Stats(pb.StatsRequest(), timeout=2)
        assert err.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    finally:
        channel.close()


def test_refused_handshakes_are_counted_and_honest_ones_are_not(controller, tmp_path):
    cfg, log_path, verbosity, _ = controller
    pki = Path(cfg.security.cert_dir)
    sock = cfg.controller.grpc[len("unix:"):]
    key, ca = new_ca(cfg.cluster.name)  # another CA, same names
    write_pair(tmp_path, "rogue", *issue_leaf(key, ca, "cache1", "cache", cfg.cluster.name))
    rogue_pair = (tmp_path / "rogue.crt", tmp_path / "rogue.key")

    assert refused(cfg) == 0
    for _ in range(3):  # honest callers, each on a fresh channel (a fresh handshake)
        assert refused(cfg) == 0
    time.sleep(0.3)
    assert wait_refused(cfg, 0) == 0

    # one handshake each: exactly one more each
    raw_attempt(sock, tls_ctx(pki, rogue_pair))
    wait_refused(cfg, 1)
    raw_attempt(sock, tls_ctx(pki))  # no client certificate
    wait_refused(cfg, 2)
    raw_attempt(sock)  # plaintext
    wait_refused(cfg, 3)

    # real gRPC clients (which may retry: at least one more each)
    ca_pem = (pki / "ca.crt").read_bytes()
    n = 3
    for creds in (grpc.ssl_channel_credentials(ca_pem, rogue_pair[1].read_bytes(), rogue_pair[0].read_bytes()),
                  grpc.ssl_channel_credentials(ca_pem),
                  None):
        grpc_attempt(cfg.controller.grpc, creds)
        n = wait_refused(cfg, n + 1, exact=False)

    # a cluster certificate passes the handshake: its call is answered, or refused by the caller
    # checks and counted there (rpc_refused), not here
    stubs = Stubs(cfg, identity="cache1")
    try:
        stubs.controller().AddCacheRules(pb.CacheRulesRequest(no_wait=True), timeout=5)
        with pytest.raises(grpc.RpcError) as err:
            stubs.controller().Stats(pb.StatsRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        stubs.close()
    wait_refused(cfg, n)
    operator = Stubs(cfg)
    try:
        assert operator.controller_stats(timeout=5)["rpc_refused"] == 1
    finally:
        operator.close()

    # The log still gets everything: the controller's own lines and (throttled) the refusals;
    # under GRPC_VERBOSITY=ERROR none of gRPC's INFO/WARNING lines but those.
    text = log_path.read_text(errors="replace")
    assert "gRPC Controller service on" in text and "Handshake failed with error" in text
    if verbosity == "ERROR":
        grpc_lines = [ln for ln in text.splitlines() if ln[:1] in "IW" and "] " in ln and ln[1:5].isdigit()]
        assert grpc_lines and all(refusal_reason(ln.encode()) is not None for ln in grpc_lines), grpc_lines


@pytest.mark.parametrize("controller", ["unset"], indirect=True)
def test_the_controller_outlives_its_relay(controller):
    """Should the relay die, the controller keeps serving and writes to its own stderr again."""
    cfg, log_path, _, relay_pid = controller
    os.kill(relay_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while "the stderr relay" not in log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, log_path.read_text(errors="replace")
        time.sleep(0.05)
    assert refused(cfg) == 0
