"""`cmake --install build --prefix P` (cmake/packaging.cmake): the three programs and the two
Python wrappers, the four systemd units pointing at P/bin, the controller's private Python tree
with the generated stubs, docs and examples; no test, bench, emulator or mutant binary. The
installed controller starts from its wrapper on Debian's python3 (its --help)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest_ci import missing_or_fail

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("EXO_BUILD", REPO / "build"))
PROGRAMS = {"exo-cache-node", "exo-db-node", "exo-proxy", "exo-controller", "exo"}
UNITS = {"exo-controller.service", "exo-cache-node@.service", "exo-db-node@.service", "exo-proxy.service"}


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    if not (BUILD / "cmake_install.cmake").exists() or not (BUILD / "db-node" / "exo-db-node").exists():
        missing_or_fail(f"{BUILD} is not built (make build)")
    p = tmp_path_factory.mktemp("prefix")
    res = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(p)], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return p


def test_only_the_deployment_programs_are_installed(prefix):
    assert {f.name for f in (prefix / "bin").iterdir()} == PROGRAMS
    executables = [f for f in prefix.rglob("*") if f.is_file() and os.access(f, os.X_OK)
                   and "lib/exoskeleton/python" not in str(f)]
    assert sorted(f.name for f in executables) == sorted(PROGRAMS)
    for bad in ("_tests", "bench", "mutant", "exo-emulator", "exo-loadgen", "exo-mcload"):
        assert not [f for f in prefix.rglob(f"*{bad}*")
                    if "lib/exoskeleton/python" not in str(f)], bad


def test_units_run_the_installed_programs(prefix):
    unit_dir = prefix / "lib" / "systemd" / "system"
    assert {f.name for f in unit_dir.iterdir()} == UNITS
    for unit in UNITS:
        exec_start = [line for line in (unit_dir / unit).read_text().splitlines() if line.startswith("ExecStart=")]
        assert len(exec_start) == 1 and exec_start[0].startswith(f"ExecStart={prefix}/bin/exo-"), exec_start


def test_the_controller_and_its_stubs_are_installed_and_start(prefix):
    tree = prefix / "lib" / "exoskeleton" / "python"
    for f in ("exo_controller/main.py", "exo_common/config.py", "exoproto/control_pb2.py",
              "exoproto/control_pb2_grpc.py", "exoproto/cluster_pb2.py", "exoskeleton/client.py", "os_ken", "grpc"):
        assert (tree / f).exists(), f
    # Debian's python3, a clean environment: nothing from the source tree or its venv.
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    res = subprocess.run([str(prefix / "bin" / "exo-controller"), "--help"], capture_output=True, text=True,
                         env=env, cwd="/", timeout=60)
    assert res.returncode == 0 and "--config" in res.stdout, res.stderr
    res = subprocess.run([str(prefix / "bin" / "exo"), "config", "check", str(REPO / "configs" / "demo.yaml")],
                         capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert res.returncode == 0 and ": ok (" in res.stdout, res.stderr
    bad = subprocess.run([str(prefix / "bin" / "exo"), "config", "check", "/nonexistent.yaml"],
                         capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert bad.returncode != 0
