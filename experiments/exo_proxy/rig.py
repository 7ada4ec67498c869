"""exo-proxy on a Mininet cluster: started in a client host (which has the raw-socket access
the proxy needs), waited for until it answers `version`, and stopped with the cluster."""
from __future__ import annotations

import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from exo_topo.cluster import EmulatedCluster
from exo_topo.netns import in_netns

PORT = 11211


def run_in(cl: EmulatedCluster, host: str):
    """A conformance.Runner for `host`: the command runs in that host's network namespace."""
    def run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        proc = cl.host(host).popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += f"\n(killed after {timeout:g} s)"
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)
    return run


def answers_version(cl: EmulatedCluster, host: str, port: int = PORT) -> bool:
    with in_netns(cl.host(host).pid):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
                s.sendall(b"version\r\n")
                return s.recv(256).startswith(b"VERSION ")
        except OSError:
            return False


@contextmanager
def proxy(cl: EmulatedCluster, host: str = "client0", port: int = PORT,
          unix_path: Path | None = None, extra_args: Sequence[str] = ()) -> Iterator[subprocess.Popen]:
    """extra_args: more exo-proxy options (e.g. --unix-group, --timeout-ms)."""
    cmd = [str(cl.build_dir / "proxy/exo-proxy"), "--config", str(cl.resolved), "--client", host,
           "--listen", f"127.0.0.1:{port}"]
    if unix_path is not None:
        cmd += ["--unix", str(unix_path)]
    cmd += list(extra_args)
    proc = cl.popen_in(host, cmd, f"proxy-{host}")
    try:
        deadline = time.monotonic() + 20
        while not answers_version(cl, host, port):
            if proc.poll() is not None:
                raise RuntimeError(f"exo-proxy exited {proc.returncode}; see {cl.run_dir}/proxy-{host}.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"exo-proxy did not answer on 127.0.0.1:{port} in {host} within 20 s")
            time.sleep(0.2)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
