"""The Python distributions (root pyproject.toml): the client wheel holds the client only and
installs alone; the controller wheel carries gRPC stubs generated at build time, which are not
committed; every package of the repository is in exactly one wheel."""
from __future__ import annotations

import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from conftest_ci import missing_or_fail

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "packaging" / "python"))
import wheel_check  # noqa: E402
import wheels  # noqa: E402

CLIENT_MAX_BYTES = 200_000  # the client is ~130 KB of Python; a stray package would show
STUBS = ("exoproto/control_pb2.py", "exoproto/control_pb2_grpc.py", "exoproto/cluster_pb2.py",
         "etcd/kv_pb2.py", "etcd/rpc_pb2.py", "etcd/rpc_pb2_grpc.py")
# wheel -> its top-level packages
PACKAGES = {
    "client": {"exoskeleton"},
    "controller": {"exo_controller", "exo_common", "exoproto", "etcd"},
    "topology": {"exo_topo", "exo_cli", "exo_harness"},
    "experiments": {"exo_chaos", "exo_sim", "exo_figures", "exo_testbed", "exo_bench", "exo_proxy", "exo_attack"},
}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    try:
        import grpc_tools  # noqa: F401  (the controller's build hook runs grpc_tools.protoc)
    except ImportError:
        missing_or_fail("grpcio-tools is not installed (make deps)")
    return wheels.build(list(wheels.DISTRIBUTIONS), tmp_path_factory.mktemp("wheels"))


def test_client_wheel_holds_only_the_client(built):
    assert wheel_check.problems(wheel_check.listing(built["client"]), PACKAGES["client"], CLIENT_MAX_BYTES) == []


def test_checker_rejects_a_client_wheel_with_the_controller_in_it():
    bad = [("exoskeleton/__init__.py", 900), ("exo_controller/app.py", 40_000), ("exoproto/control_pb2.py", 500_000)]
    found = wheel_check.problems(bad, PACKAGES["client"], CLIENT_MAX_BYTES, required=STUBS)
    assert any(p.startswith("exo_controller/app.py: not in an allowed package") for p in found)
    assert any("more than 200,000" in p for p in found)
    assert "exoproto/control_pb2_grpc.py: missing" in found


def test_each_wheel_holds_its_packages(built):
    for name, path in built.items():
        files = wheel_check.listing(path)
        tops = {f.split("/", 1)[0] for f, _ in files if not f.split("/", 1)[0].endswith(".dist-info")}
        assert tops == PACKAGES[name], name
        assert wheel_check.problems(files, PACKAGES[name], 5_000_000) == []


def test_every_repository_package_is_in_exactly_one_wheel():
    res = subprocess.run(["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, text=True, check=True)
    found = {Path(f).parent.name for f in res.stdout.split()
             if f.endswith("/__init__.py") and f.count("/") == 2 and not f.startswith(("tests/", "examples/"))}
    owners = [p for pkgs in PACKAGES.values() for p in pkgs]
    assert sorted(owners) == sorted(set(owners)), "a package is in two wheels"
    assert found == set(owners), f"packages in no wheel: {found - set(owners)}; listed but gone: {set(owners) - found}"
    declared = set()
    for name, rel in wheels.DISTRIBUTIONS.items():
        setuptools = tomllib.loads((REPO / rel / "pyproject.toml").read_text())["tool"]["setuptools"]
        assert set(setuptools["packages"]) == PACKAGES[name], rel
        declared |= set(setuptools["packages"])
    assert declared == found


def test_controller_wheel_carries_generated_stubs_that_are_not_committed(built, tmp_path):
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "proto"], capture_output=True, text=True,
                             check=True).stdout.split()
    assert not [f for f in tracked if "_pb2" in f], "generated stubs are committed"
    files = wheel_check.listing(built["controller"])
    assert wheel_check.problems(files, PACKAGES["controller"], 2_000_000, required=STUBS) == []
    # They import from the wheel (with this environment's grpc and protobuf).
    subprocess.run(["unzip", "-q", str(built["controller"]), "-d", str(tmp_path)], check=True)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from exoproto import control_pb2_grpc, control_pb2; "
            "assert control_pb2_grpc.__file__.startswith(sys.argv[1]), control_pb2_grpc.__file__; "
            "print(control_pb2.DESCRIPTOR.services_by_name['Controller'].full_name)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "exo.Controller"


def test_extras_name_the_sibling_distributions_at_the_same_version():
    root = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = root["optional-dependencies"]
    for name, rel in wheels.DISTRIBUTIONS.items():
        project = tomllib.loads((REPO / rel / "pyproject.toml").read_text())["project"]
        assert project["version"] == root["version"], rel
        if name != "client":
            assert extras[name] == [f"{project['name']}=={root['version']}"]


def test_client_wheel_installs_alone_in_a_fresh_venv(built, tmp_path):
    """Only the client wheel, no index: the client imports (xxhash from Debian's python3-xxhash,
    seen through --system-site-packages) and nothing of the controller is there."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=True).create(env_dir)
    py = env_dir / "bin" / "python"
    res = subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(built["client"])],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    code = ("import importlib.util, sys, exoskeleton\n"
            "from exoskeleton.keyhash import key_hash\n"
            "assert exoskeleton.__file__.startswith(sys.prefix), exoskeleton.__file__\n"
            "missing = [m for m in ('exo_controller', 'exo_common', 'exoproto', 'exo_topo') if importlib.util.find_spec(m)]\n"
            "assert not missing, missing\n"
            "print(key_hash(b'user:1'))\n")
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    from exoskeleton.keyhash import key_hash
    assert int(out.stdout) == key_hash(b"user:1")
