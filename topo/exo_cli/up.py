"""`exo up`: start a cluster that outlives the command, and say how to reach it.

It claims the state file (state.py), starts the supervisor (supervisor.py) as a daemon (double
fork and setsid: no terminal, stdout and stderr to <run dir>/supervisor.log, no inherited file
descriptors, so neither a shell's pipe nor a `flock` lock stays held by it), prints the
supervisor's steps while it brings the cluster up, and returns once the state says "up". If
the supervisor dies first, the end of its log is printed. Ctrl-C (or a timeout) stops it again.

`exo up` for a cluster that is already up changes nothing and exits with status 1.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

from exo_common.config import ClusterConfig

from . import state
from .cleanup import cleanup

REPO = Path(__file__).resolve().parents[2]
FAILED = "supervisor failed:"  # how the supervisor's log gives the reason it did not come up
BINARIES = ("db-node/exo-db-node", "cache-node/exo-cache-node", "proxy/exo-proxy")


class UpError(RuntimeError):
    """exo up cannot start this cluster; the message says why and what to do."""


def build_dir() -> Path:
    return Path(os.environ.get("EXO_BUILD", REPO / "build"))


def preflight(cfg: ClusterConfig, config: Path, run_dir: Path) -> dict:
    """Refuse what cannot work before anything starts; returns the initial state data."""
    if not cfg.clients:
        raise UpError(f"{config}: clients[] is empty: exo up starts exo-proxy in the first client host "
                      "(exo get/set/del go through it), so the config needs at least one client")
    missing = [str(build_dir() / b) for b in BINARIES if not (build_dir() / b).exists()]
    if any(d.emulator for d in cfg.db_nodes) and not (build_dir() / "emulator/exo-emulator").exists():
        missing.append(str(build_dir() / "emulator/exo-emulator"))
    if missing:
        raise UpError(f"{', '.join(missing)} missing: run `make build` first")
    name = cfg.cluster.name
    path = state.state_path(name)
    return {"version": state.STATE_VERSION, "cluster": name, "phase": "starting", "step": "starting the supervisor",
            "config": str(config.resolve()), "run_dir": str(run_dir), "log": str(run_dir / "supervisor.log"),
            "bridge": cfg.switch.bridge, "openflow_port": cfg.controller.openflow_port,
            "cache_nodes": [n.name for n in cfg.cache_nodes],
            "tag": f"{name}:{run_dir}", "state_file": str(path), "started_at": time.time()}


def check_others(new: dict) -> None:
    """Already up, left behind by a killed supervisor, or in the way of another cluster."""
    states, _ = state.all_states()
    for s in states:
        if s.cluster != new["cluster"]:
            continue
        if s.supervisor_alive() or s.supervisor_pid is None:
            raise UpError(f"cluster {s.cluster!r} is already up ({s.phase}; supervisor pid {s.supervisor_pid}, "
                          f"state {s.path}); nothing changed. `exo down --cluster {s.cluster}` stops it")
        raise UpError(f"cluster {s.cluster!r} was not shut down: its supervisor (pid {s.supervisor_pid}) is gone "
                      f"but {s.path} is still there. Run `exo down --cluster {s.cluster}` to clean up, "
                      f"then `exo up` again")
    problems = state.conflicts(new, [s.data for s in states if s.supervisor_alive()])
    if problems:
        raise UpError("; ".join(problems))


def spawn_detached(argv: list[str], log: Path, env: dict) -> int:
    """Run argv as a daemon: fork, setsid, fork again (so it can never acquire a controlling
    terminal), stdin /dev/null, stdout and stderr to `log`, every other descriptor closed.
    Returns the daemon's pid (the grandchild's, sent up a pipe before it execs)."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked children
        try:
            os.close(r)
            os.setsid()
            if os.fork() > 0:
                os._exit(0)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.write(w, str(os.getpid()).encode())
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            os.chdir(REPO)
            os.umask(0o022)
            os.execve(argv[0], argv, env)
        except BaseException as err:  # noqa: BLE001 - nothing above us to report to but the log
            try:
                os.write(2, f"exo up: could not start the supervisor: {err}\n".encode())
            except OSError:
                pass
        os._exit(127)
    os.close(w)
    got = b""
    while chunk := os.read(r, 64):
        got += chunk
    os.close(r)
    os.waitpid(child, 0)
    if not got:
        raise UpError(f"the supervisor did not start (see {log})")
    return int(got)


def log_tail(log: Path, lines: int = 15) -> str:
    """The end of the supervisor's log, led by its "supervisor failed:" line if it has one (the
    reason, which a node's long output in the traceback would otherwise push out of view)."""
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError as err:
        return f"  ({log}: {err.strerror})"
    reason = [line.split(FAILED, 1)[1].strip() for line in text if FAILED in line]
    head = [f"  reason: {reason[-1]}"] if reason else []
    return "\n".join(head + ["  | " + line for line in text[-lines:]])


def stop_supervisor(pid: int, start: int | None, timeout: float = 120.0) -> bool:
    """SIGTERM and wait for the supervisor to finish its teardown. False if it did not."""
    if not state.same_process(pid, start):
        return True
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not state.same_process(pid, start):
            return True
        time.sleep(0.2)
    return False


def up(cfg: ClusterConfig, config: Path, run_dir: Path, timeout: float, fresh: bool) -> int:
    data = preflight(cfg, config, run_dir)
    check_others(data)
    path = Path(data["state_file"])
    if not state.claim(path, data):
        raise UpError(f"{path} appeared meanwhile: another `exo up` of {cfg.cluster.name!r} is starting it")
    pid = None
    start = None
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if fresh:
            for d in cfg.db_nodes:
                shutil.rmtree(d.data_dir, ignore_errors=True)
        print(f"exo up: cluster {cfg.cluster.name!r} from {config} "
              f"({len(cfg.cache_nodes)} cache, {len(cfg.db_nodes)} db, {len(cfg.clients)} clients); "
              f"run dir {run_dir}", flush=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        argv = [sys.executable, "-m", "exo_cli.supervisor", "--config", data["config"], "--run-dir", str(run_dir),
                "--state", str(path), "--tag", data["tag"]]
        pid = spawn_detached(argv, Path(data["log"]), env)
        start = state.proc_start(pid)
        return _wait_up(path, pid, start, Path(data["log"]), timeout)
    except KeyboardInterrupt:
        print("\nexo up: interrupted: stopping the cluster again", file=sys.stderr, flush=True)
        _abandon(path, data, pid, start)
        return 130
    except BaseException:
        _abandon(path, data, pid, start)
        raise


def _wait_up(path: Path, pid: int, start: int | None, log: Path, timeout: float) -> int:
    t0 = time.monotonic()
    last_step = None
    while True:
        elapsed = time.monotonic() - t0
        try:
            st = state.read(path)
        except state.StateError:
            st = None  # the supervisor removes it when it gives up
        if st is not None and st.phase == "up":
            others = [s for s in state.all_states()[0] if s.cluster != st.cluster]
            print(f"  [{elapsed:5.1f} s] up", flush=True)
            print("\n".join(state.reach_lines(st.data, name_it=bool(others))), flush=True)
            return 0
        if st is not None and st.data.get("step") != last_step:
            last_step = st.data.get("step")
            print(f"  [{elapsed:5.1f} s] {last_step}", flush=True)
        if not state.same_process(pid, start):
            print(f"exo up: the supervisor (pid {pid}) exited before the cluster was up (each process's "
                  f"log is in {log.parent}); the end of its log {log}:\n{log_tail(log)}", file=sys.stderr, flush=True)
            if st is not None:  # it did not get to its own cleanup
                cleanup(st.data)
                state.remove(path)
            return 1
        if elapsed > timeout:
            print(f"exo up: the cluster was not up after {timeout:g} s; stopping it. "
                  f"The end of {log}:\n{log_tail(log)}", file=sys.stderr, flush=True)
            _abandon(path, st.data if st else None, pid, start)
            return 1
        time.sleep(0.25)


def _abandon(path: Path, data: dict | None, pid: int | None, start: int | None) -> None:
    """Stop a supervisor we started and no longer want; clean up whatever is left."""
    if pid is not None and not stop_supervisor(pid, start):
        os.kill(pid, signal.SIGKILL)
    try:
        data = state.read(path).data
    except state.StateError:
        pass
    if data is not None:
        cleanup(data, say=lambda s: print(s, file=sys.stderr))
    state.remove(path)
