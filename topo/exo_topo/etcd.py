"""A real etcd (Debian's `etcd-server`) for tests and the emulation: one member in the root
namespace, on free 127.0.0.1 ports, its data and log under run_dir (docs/etcd.md).

    with EtcdServer(run_dir, tls=EtcdTls.server(cert_dir)) as etcd:   # or tls=None: plaintext
        client = EtcdClient(etcd.endpoints, tls=EtcdTls.client(cert_dir))

With TLS, clients must present a certificate of etcd's own CA (--client-cert-auth), and the peer
port uses the same files. Timing is the test setting of docs/design/replication.md 5.2
(--heartbeat-interval 10 --election-timeout 100, so the minimum lease TTL is 1 s). It is never
a system service: the process (its own process group) is killed on exit, also when start() fails
half-way or on Ctrl-C (lifecycle.StartStop).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional

from exo_common.etcd import EtcdClient, EtcdError, EtcdTls

from .lifecycle import StartStop

HEARTBEAT_MS = 10
ELECTION_TIMEOUT_MS = 100


class EtcdServerError(RuntimeError):
    pass


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def etcd_command(binary: str, name: str, data_dir: Path, client_port: int, peer_port: int,
                 tls: Optional[EtcdTls]) -> list[str]:
    """The etcd command line (pure)."""
    scheme = "http" if tls is None else "https"
    client_url = f"{scheme}://127.0.0.1:{client_port}"
    peer_url = f"{scheme}://127.0.0.1:{peer_port}"
    cmd = [binary, "--name", name, "--data-dir", str(data_dir),
           "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
           "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
           "--initial-cluster", f"{name}={peer_url}", "--initial-cluster-state", "new",
           "--heartbeat-interval", str(HEARTBEAT_MS), "--election-timeout", str(ELECTION_TIMEOUT_MS),
           "--logger", "zap", "--log-outputs", "stderr"]
    if tls is not None:
        cmd += ["--cert-file", tls.cert, "--key-file", tls.key, "--trusted-ca-file", tls.ca, "--client-cert-auth",
                "--peer-cert-file", tls.cert, "--peer-key-file", tls.key, "--peer-trusted-ca-file", tls.ca,
                "--peer-client-cert-auth"]
    return cmd


class EtcdServer(StartStop):
    def __init__(self, run_dir: str | Path, tls: Optional[EtcdTls] = None, name: str = "exo-etcd",
                 ready_timeout_s: float = 10.0, binary: Optional[str] = None):
        """tls: etcd's own identity (EtcdTls.server(cert_dir)); None: plaintext (dev mode)."""
        self.run_dir = Path(run_dir)
        self.tls = tls
        self.name = name
        self.ready_timeout_s = ready_timeout_s
        self.binary = binary or shutil.which("etcd") or ""
        self.proc: Optional[subprocess.Popen] = None
        self.endpoints: list[str] = []
        self.log_path = self.run_dir / "etcd.log"

    @staticmethod
    def server_tls(cert_dir: str | Path) -> EtcdTls:
        """etcd's identity in <cert_dir>/etcd (what `exo certs init` wrote)."""
        return EtcdTls.server(cert_dir)

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "etcd"

    def start(self) -> None:
        if not self.binary:
            raise EtcdServerError("etcd is not installed (Debian etcd-server; scripts/install-deps.sh)")
        if self.tls is not None:
            self.tls.read()  # a missing file is an error naming it, before etcd says something vaguer
        self.run_dir.mkdir(parents=True, exist_ok=True)
        client_port, peer_port = _free_ports(2)
        cmd = etcd_command(self.binary, self.name, self.data_dir, client_port, peer_port, self.tls)
        self.endpoints = [cmd[cmd.index("--advertise-client-urls") + 1]]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        # etcd's own identity also has clientAuth, and its CA signed it: it can ask itself.
        client = EtcdClient(self.endpoints, tls=self.tls, timeout_s=1.0)
        deadline = time.monotonic() + self.ready_timeout_s
        last = "no answer"
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise EtcdServerError(f"etcd exited with {self.proc.returncode} at start; see {self.log_path}:\n"
                                          + self._log_tail())
                try:
                    client.revision()
                    return
                except EtcdError as err:
                    last = str(err)
                    time.sleep(0.05)
        finally:
            client.close()
        raise EtcdServerError(f"etcd did not answer within {self.ready_timeout_s} s ({last}); see {self.log_path}")

    def _log_tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
