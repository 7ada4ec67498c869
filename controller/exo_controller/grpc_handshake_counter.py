"""TLS handshakes the controller's gRPC refused, counted as `tls_handshake_refused` (Stats, /metrics).

A caller with no client certificate, a certificate of another CA, or no TLS at all fails inside
gRPC core's TLS handshake and never reaches the AuthzInterceptor (exo_common/authz.py), so
`rpc_refused` cannot see it. Why it is counted by reading gRPC core's log, as the C++ nodes do
(common/cpp/grpc_log_hook.h), and not otherwise (checked against grpcio 1.85.3):
  - grpcio offers no handshake callback, and its server credentials either REQUIRE a client
    certificate or do not ask for one (grpc.ssl_server_credentials(require_client_auth=)): the C++
    nodes' "request, verify if given, refuse a missing one in the handler" is not available, and
    gRPC core's own log hooks (gpr_set_log_function, absl::AddLogSink) are not exported by
    cygrpc (its only dynamic symbol is PyInit_cygrpc).
  - grpc.dynamic_ssl_server_credentials' certificate_configuration_fetcher runs once per
    incoming connection, but nothing reports the handshakes that succeeded: one connection may
    carry many calls or none (a probe, a channel that only connects), and the interceptor cannot
    tell connections apart (context.peer() is "unix:" for every caller of a unix socket), so
    "started minus reached the interceptor" is not exact.
  - terminating TLS ourselves (Python's ssl, then a relay to a private plaintext gRPC socket)
    would have to carry the caller's name to the checks: rewriting HTTP/2 headers (HPACK) in the
    relay, or a plaintext socket that trusts whoever connects to it. More code on the security
    path, and a new way around it, to count a number.
  - what remains is the line gRPC core writes for every failed TLS handshake, on the server and
    the client side alike (src/core/tsi/ssl_transport_security.cc, ssl_handshaker_do_handshake):
      I1125 07:08:55.197110   25930 ssl_transport_security.cc:2563] Handshake failed with error
        SSL_ERROR_SSL: error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED: ...
    (PEER_DID_NOT_RETURN_A_CERTIFICATE without a certificate, WRONG_VERSION_NUMBER for plaintext;
    gRPC 1.51 wrote "Handshake failed with fatal error ..." at ERROR). In 1.85 it is an absl
    LOG(INFO) to fd 2, shown unless GRPC_VERBOSITY is ERROR or NONE; one line per handshake at
    every verbosity (security_handshaker.cc adds nothing at INFO or DEBUG).

So `install()` puts a relay process between the controller and its stderr: fd 2 becomes a pipe;
the relay (this module run with --relay) copies every line to the original stderr and counts the
refusal lines in a shared memory cell that Stats reads (`HandshakeRefusals.value`). A process
rather than a thread: the relay holds the pipe's read end, so what the controller writes just
before it dies (an abort's message, a traceback) still reaches the log, and a busy interpreter
cannot stall gRPC's writers. The relay ignores SIGINT/SIGTERM/SIGHUP and ends at end of file,
i.e. when the controller (and anything that inherited its stderr) has exited.

What counts, like the C++ hook: TLS handshakes this process refused, as a server (a caller with
no certificate, one of another CA, no TLS) and as a client (a server whose certificate is not
the cluster CA's, or one not speaking TLS). Not counted: a handshake the PEER aborted with an
alert (it refused us and counts it on its side), a peer that connects and closes or never
speaks (gRPC drops it without this line), a wrong server name (checked after the handshake).
tests/unit/test_grpc_handshake_counter.py pins the line's format: it fails if a gRPC upgrade
changes it.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import logging
import mmap
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Optional

LOG = logging.getLogger("exo_controller.tls")
STAT = "tls_handshake_refused"
LOG_EVERY_S = 10.0          # refusal lines shown at most once per this many seconds (all counted)
READY_TIMEOUT_S = 10.0      # how long install() waits for the relay to start
MAX_LINE = 64 * 1024        # a longer run without a newline is forwarded as it is
PIPE_SIZE = 1 << 20         # room for bursts while the relay catches up (F_SETPIPE_SZ)
_READY = 0x6578_6f5f_7265_6c79  # the relay's "running" mark in the shared cell's second word

# gRPC core's line for a failed TLS handshake: absl's prefix (initialized or not: "I1125 07:08:55.1
# 25930" or "I0000 00:00:1795590748.6 31208") or gpr's (1.51), then the file, then the text.
_REFUSAL = re.compile(rb"^[IWEF]\S*\s+\S+\s+\d+\s+(?:\S*/)?ssl_transport_security\.cc:\d+\]\s+"
                      rb"Handshake failed with (?:fatal )?error (?P<why>.*)$")
# Any line of gRPC core's log (absl or gpr format), and its severity letter.
_GRPC_LINE = re.compile(rb"^(?P<sev>[IWEF])\d{4}\s+\S+\s+\d+\s+\S+:\d+\]\s")
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


# ---------------------------------------------------------------- pure decisions

def refusal_reason(line: bytes) -> Optional[bytes]:
    """The reason of a TLS handshake this process refused, if `line` (one line of fd 2) is gRPC
    core's report of one; None otherwise. A failure whose reason is an alert the peer sent
    ("...TLSV1_ALERT_UNKNOWN_CA", "...SSLV3_ALERT_BAD_CERTIFICATE") is the peer's refusal, not ours."""
    m = _REFUSAL.match(line.rstrip(b"\r\n"))
    if m is None:
        return None
    why = m.group("why")
    return None if b"alert" in why.lower() else why


def grpc_floor(verbosity: str) -> int:
    """The lowest severity (_SEVERITY) gRPC prints under GRPC_VERBOSITY=`verbosity`: ERROR -> E,
    NONE -> F (a crash's message still is), anything else (unset, INFO, DEBUG) -> I."""
    v = verbosity.strip().upper()
    return _SEVERITY[b"E"] if v == "ERROR" else _SEVERITY[b"F"] if v == "NONE" else _SEVERITY[b"I"]


def shown(line: bytes, floor: int) -> bool:
    """Whether the relay forwards a line that is not a refusal: gRPC core's lines below `floor`
    are dropped (install() may have lowered gRPC's own level to see the refusals); everything
    else (the controller's own log, tracebacks) always passes."""
    m = _GRPC_LINE.match(line)
    return m is None or _SEVERITY[m.group("sev")] >= floor


class Throttle:
    """At most one refusal line per `every_s`: an attacker must not fill the disk. admit(now) ->
    None (do not show it) or how many were not shown since the last one that was."""

    def __init__(self, every_s: float = LOG_EVERY_S):
        self.every_s = every_s
        self._last: Optional[float] = None
        self._hidden = 0

    def admit(self, now: float) -> Optional[int]:
        if self._last is not None and now - self._last < self.every_s:
            self._hidden += 1
            return None
        hidden, self._hidden, self._last = self._hidden, 0, now
        return hidden


# ---------------------------------------------------------------- the relay (its own process)

def _write_all(fd: int, data: bytes) -> bool:
    """Write everything; False once the destination is gone (EPIPE, EIO): keep counting then."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except InterruptedError:
            continue
        except OSError:
            return False
    return True


def relay(src: int, dst: int, cell, floor: int, clock: Callable[[], float] = time.monotonic,
          throttle: Optional[Throttle] = None) -> None:
    """Copy `src` to `dst` line by line until end of file, adding each refused handshake to
    cell.value (a ctypes.c_uint64, shared with the controller). Refusal lines are throttled,
    gRPC lines below `floor` dropped (shown())."""
    throttle = throttle or Throttle()
    out_ok, buf = True, b""
    while True:
        try:
            chunk = os.read(src, 65536)
        except InterruptedError:
            continue
        lines = (buf + chunk).split(b"\n") if chunk else [buf, b""] if buf else []
        buf = lines.pop() if lines else b""
        if len(buf) > MAX_LINE:
            lines.append(buf)
            buf = b""
        out = []
        for line in lines:
            if refusal_reason(line) is not None:
                cell.value += 1
                hidden = throttle.admit(clock())
                if hidden is not None:
                    more = f" (and {hidden} more refused TLS handshakes not shown)" if hidden else ""
                    out.append(line + more.encode() + b"\n")
            elif shown(line, floor):
                out.append(line + b"\n")
        if out and out_ok:
            out_ok = _write_all(dst, b"".join(out))
        if not chunk:
            return


def _relay_main(argv) -> int:
    p = argparse.ArgumentParser(prog="python -m exo_controller.grpc_handshake_counter",
                                description="(internal) the controller's stderr relay; see the module's doc")
    p.add_argument("--relay", action="store_true", required=True)
    p.add_argument("--counter-fd", type=int, required=True, help="a 16-byte shared file: count, ready mark")
    p.add_argument("--grpc-verbosity", default="", help="GRPC_VERBOSITY as the operator set it")
    args = p.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # outlive the controller long enough to drain its last words
    mm = mmap.mmap(args.counter_fd, 16)
    os.close(args.counter_fd)
    count = ctypes.c_uint64.from_buffer(mm, 0)
    ctypes.c_uint64.from_buffer(mm, 8).value = _READY
    relay(0, 2, count, grpc_floor(args.grpc_verbosity))
    return 0


# ---------------------------------------------------------------- the controller's side

class HandshakeRefusals:
    """The relay's count: value() is what Stats reports as tls_handshake_refused. Should the relay
    die, a watcher gives the controller its original stderr back at once (and says so)."""

    def __init__(self, proc: subprocess.Popen, mm: mmap.mmap, saved_stderr: int):
        self._proc, self._mm, self._saved = proc, mm, saved_stderr
        self._count = ctypes.c_uint64.from_buffer(mm, 0)
        threading.Thread(target=self._watch, daemon=True, name="exo-stderr-relay-watch").start()

    def value(self) -> int:
        return int(self._count.value)

    def _watch(self) -> None:
        code = self._proc.wait()  # normally never returns: the relay outlives the controller
        os.dup2(self._saved, 2)
        LOG.error("the stderr relay (pid %d) exited with %s: TLS handshakes gRPC refuses are no longer "
                  "counted in %s (it stays at %d)", self._proc.pid, code, STAT, self.value())


# How the relay is started: this module as __main__, found on the controller's own sys.path. The
# installed controller (packaging/bin/exo-controller) runs `python3 -I` with the package's Python
# tree put on sys.path by hand, which a plain `python3 -m` child would not see (no PYTHONPATH).
_RELAY_BOOT = ("import json, runpy, sys; sys.path[:0] = json.loads(sys.argv.pop(1)); "
               "runpy.run_module('exo_controller.grpc_handshake_counter', run_name='__main__', alter_sys=True)")


def _start_relay(verbosity: str, saved: int, r: int) -> tuple[subprocess.Popen, mmap.mmap]:
    """The relay process reading `r`, writing `saved`; returns it with the shared cell once it
    runs. Raises OSError (or RuntimeError if it does not come up)."""
    cell = os.memfd_create("exo-tls-handshake-refused")
    try:
        os.ftruncate(cell, 16)
        mm = mmap.mmap(cell, 16)
        proc = subprocess.Popen([sys.executable, "-I", "-c", _RELAY_BOOT, json.dumps(sys.path), "--relay",
                                 "--counter-fd", str(cell), "--grpc-verbosity", verbosity],
                                stdin=r, stdout=subprocess.DEVNULL, stderr=saved, pass_fds=(cell,))
    finally:
        os.close(cell)
    ready = ctypes.c_uint64.from_buffer(mm, 8)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while ready.value != _READY and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if ready.value != _READY:
        if proc.poll() is None:
            proc.kill()
        raise RuntimeError(f"it did not come up (exit status {proc.wait()})")
    return proc, mm


def install() -> Optional[HandshakeRefusals]:
    """Route this process's fd 2 through the relay (see the module's doc); None, with an error
    logged, if the relay does not start (the controller then runs on without this count).
    Call it before anything imports grpc: under GRPC_VERBOSITY=ERROR or NONE gRPC would not write
    the line at all, so the variable is removed here (gRPC then keeps absl's level, INFO) and the
    relay drops what the operator's setting would have hidden. gRPC reads it once, on import."""
    verbosity = os.environ.get("GRPC_VERBOSITY", "")
    if grpc_floor(verbosity) > _SEVERITY[b"I"]:
        if "grpc" in sys.modules:
            LOG.error("grpc was imported before the handshake counter was installed: with GRPC_VERBOSITY=%s "
                      "gRPC does not report refused TLS handshakes and %s stays 0", verbosity, STAT)
        else:
            del os.environ["GRPC_VERBOSITY"]
    opened: list[int] = []
    try:
        saved = os.dup(2)  # the original stderr: the relay's output, and ours again should it die
        opened.append(saved)
        r, w = os.pipe()
        opened += [r, w]
        try:
            import fcntl
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except (OSError, AttributeError):
            pass  # the default 64 KiB will do
        proc, mm = _start_relay(verbosity, saved, r)
    except (OSError, RuntimeError) as err:
        for fd in opened:
            os.close(fd)
        LOG.error("cannot start the stderr relay (%s): %s will not be counted", err, STAT)
        return None
    os.close(r)
    sys.stderr.flush()
    os.dup2(w, 2)
    os.close(w)
    return HandshakeRefusals(proc, mm, saved)


if __name__ == "__main__":
    sys.exit(_relay_main(sys.argv[1:]))
