"""The web host of `exo demo-web`: an unprivileged user, the app staged where that user can read
it, the app's uvicorn workers started as that user in a Mininet client host, and what exo-proxy
and /proc say about them.

The repository may live where the web user cannot read it (CI clones under /root, mode 700), so
the app (examples/webapp/catalogue_web) and the pure-Python client (client-lib/exoskeleton) are
copied into the run dir, which is made readable. The app runs on Debian's /usr/bin/python3 with
Debian's FastAPI, uvicorn and xxhash (scripts/install-deps.sh), not the repository's venv.
"""
from __future__ import annotations

import grp
import http.client
import json
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

from exo_topo.netns import in_netns

from .demo_web_report import parse_proc_status

REPO = Path(__file__).resolve().parents[2]
APP_SRC = REPO / "examples" / "webapp"
CLIENT_SRC = REPO / "client-lib" / "exoskeleton"
SYSTEM_PYTHON = "/usr/bin/python3"
APP_MODULES = ("fastapi", "uvicorn", "xxhash")


class WebHostError(RuntimeError):
    pass


def check_prerequisites() -> None:
    """wrk, setpriv and the app's Debian packages; a clear error naming what is missing."""
    for tool in ("wrk", "setpriv", "useradd"):
        if shutil.which(tool) is None:
            raise WebHostError(f"{tool} not found: run scripts/install-deps.sh")
    probe = subprocess.run([SYSTEM_PYTHON, "-c", f"import {', '.join(APP_MODULES)}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        raise WebHostError(f"{SYSTEM_PYTHON} cannot import {', '.join(APP_MODULES)} (python3-fastapi, "
                           f"python3-uvicorn, python3-xxhash): run scripts/install-deps.sh\n{probe.stderr.strip()}")


def ensure_user(name: str) -> pwd.struct_passwd:
    """The web user: a system user with a group of the same name, no home, no shell. Created
    once; an existing one is used as it is (but never root)."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        proc = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
                               "/nonexistent", "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True)
        if proc.returncode not in (0, 9):  # 9: created meanwhile by someone else
            raise WebHostError(f"--user: useradd {name} failed: {proc.stderr.strip()}")
        pw = pwd.getpwnam(name)
    if pw.pw_uid == 0 or pw.pw_gid == 0:
        raise WebHostError(f"--user: {name} has uid {pw.pw_uid}, gid {pw.pw_gid}: the web user must not be root")
    return pw


def _readable_by_others(path: Path) -> None:
    """Every directory above `path` must let other users through (x), else the web user cannot
    reach the app however its own files are set."""
    for d in [path, *path.parents]:
        if d.exists() and not d.stat().st_mode & 0o001:
            raise WebHostError(f"--run-dir: {d} is not searchable by other users (mode "
                               f"{oct(d.stat().st_mode & 0o777)}); the web user could not reach {path}")


def stage(web_dir: Path, n_items: int) -> dict[str, Path]:
    """Copy the app and the client into web_dir (readable by all, writable by root only) and
    write the catalogue's SQLite file. Returns the paths the app's environment names."""
    if web_dir.exists():
        shutil.rmtree(web_dir)
    app_dir, lib_dir = web_dir / "app", web_dir / "lib"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(APP_SRC / "catalogue_web", app_dir / "catalogue_web", ignore=ignore)
    shutil.copytree(CLIENT_SRC, lib_dir / "exoskeleton", ignore=ignore)
    shutil.copy2(APP_SRC / "zipf.lua", web_dir / "zipf.lua")
    db = web_dir / "items.sqlite"
    proc = subprocess.run([SYSTEM_PYTHON, "-m", "catalogue_web.store", "--db", str(db), "--items", str(n_items)],
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(app_dir), "PYTHONDONTWRITEBYTECODE": "1"},
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise WebHostError(f"writing the catalogue failed: {proc.stderr.strip()}")
    for root, dirs, files in os.walk(web_dir):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    _readable_by_others(web_dir)
    return {"app": app_dir, "lib": lib_dir, "db": db, "lua": web_dir / "zipf.lua"}


def app_command(user: str, paths: dict[str, Path], env: dict[str, str], port: int, workers: int) -> list[str]:
    """Drop to `user` (its own groups only, no capability in any set, no way to regain one:
    no_new_privs), with a clean environment, then run the app's uvicorn workers."""
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(paths["app"]), "PYTHONDONTWRITEBYTECODE": "1",
             "PYTHONPATH": f"{paths['app']}:{paths['lib']}", **env}
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--no-new-privs",
            "--inh-caps=-all", "--bounding-set=-all",
            "env", "-i", f"--chdir={paths['app']}", *(f"{k}={v}" for k, v in clean.items()),
            SYSTEM_PYTHON, "-m", "catalogue_web.serve", "--host", "127.0.0.1", "--port", str(port),
            "--workers", str(workers)]


def http_get(host_pid: int, port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """A GET to 127.0.0.1:port inside the Mininet host whose shell is host_pid."""
    with in_netns(host_pid):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            conn.connect()  # the socket is made here, in the host's namespace
        except OSError:
            conn.close()
            raise
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_healthy(proc: subprocess.Popen, host_pid: int, port: int, workers: int, log: Path,
                 timeout: float = 60.0) -> list[dict]:
    """Until /healthz answers 200 from every worker (each answers with its pid); the answers."""
    deadline = time.monotonic() + timeout
    seen: dict[int, dict] = {}
    last = ""
    while len(seen) < workers:
        if proc.poll() is not None:
            raise WebHostError(f"the web app exited with {proc.returncode}; see {log}:\n"
                               f"{log.read_text(errors='replace')[-2000:]}")
        if time.monotonic() > deadline:
            raise WebHostError(f"the web app's /healthz did not answer from {workers} workers within {timeout:g} s "
                               f"(answered: {sorted(seen)}; last: {last}); see {log}")
        try:
            status, body = http_get(host_pid, port, "/healthz")
            last = f"{status} {body[:200]!r}"
            if status == 200:
                h = json.loads(body)
                seen[h["pid"]] = h
        except (OSError, http.client.HTTPException, ValueError) as err:
            last = repr(err)
            time.sleep(0.2)
    return list(seen.values())


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(entry))
    return sorted(out)


def identity(pid: int) -> dict:
    """What /proc says about a process: its uid/gid, groups, capability sets, user name."""
    st = parse_proc_status(Path(f"/proc/{pid}/status").read_text())
    st["pid"] = pid
    st["user"] = pwd.getpwuid(st["Uid"][1]).pw_name
    st["cmdline"] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    return st


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float | None:
    """User + system CPU time of these processes together (None once one of them is gone)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / CLK_TCK


def proxy_stats(unix_path: Path, timeout: float = 5.0) -> dict[str, int | str]:
    """exo-proxy's `stats`, read over its unix socket (root may connect whatever its mode)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(unix_path))
        s.sendall(b"stats\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise WebHostError(f"exo-proxy closed the connection during `stats` ({unix_path})")
            buf += chunk
    out: dict[str, int | str] = {}
    for line in buf.decode().splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            out[parts[1]] = int(parts[2]) if parts[2].lstrip("-").isdigit() else parts[2]
    return out


def socket_file(unix_path: Path) -> dict:
    st = unix_path.stat()
    return {"path": str(unix_path), "mode": oct(st.st_mode & 0o777), "group": grp.getgrgid(st.st_gid).gr_name}
