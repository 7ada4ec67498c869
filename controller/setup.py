"""exoskeleton-controller's build hook: the Python stubs of proto/exoproto/*.proto are generated
here, while the package is built, with grpc_tools.protoc (a build requirement in pyproject.toml).
They are git-ignored, never committed, and always in the wheel.

A wheel build writes them into the build tree only; an editable install (the development checkout,
scripts/install-deps.sh) writes them next to the .proto files, where the editable import path finds
them. Everything else about the package is in pyproject.toml.
"""
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PROTO_ROOT = Path(__file__).resolve().parent.parent / "proto"
# .proto file (under PROTO_ROOT) -> whether it has gRPC services (then *_pb2_grpc.py too)
PROTOS = {"exoproto/control.proto": True, "exoproto/cluster.proto": False,
          # etcd's API subset the controllers speak to etcd with (proto/etcd/README.md)
          "etcd/kv.proto": False, "etcd/rpc.proto": True}


def generate_stubs(out: Path) -> list[Path]:
    """Runs protoc for every .proto; returns the files it wrote. `python -m grpc_tools.protoc` adds
    grpc_tools' copy of the well-known protos (control.proto imports descriptor.proto)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for proto, has_services in PROTOS.items():
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_ROOT}", f"--python_out={out}"]
        if has_services:
            cmd.append(f"--grpc_python_out={out}")
        cmd.append(str(PROTO_ROOT / proto))
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(f"protoc failed for {proto} (is grpcio-tools installed?):\n{res.stderr}")
        stem = out / proto[: -len(".proto")]
        written.append(stem.with_name(stem.name + "_pb2.py"))
        if has_services:
            written.append(stem.with_name(stem.name + "_pb2_grpc.py"))
    missing = [str(p) for p in written if not p.is_file()]
    if missing:
        raise SystemExit(f"protoc ran but did not write {', '.join(missing)}")
    return written


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            generate_stubs(PROTO_ROOT)
        else:
            self._stubs = generate_stubs(Path(self.build_lib))

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), *(str(p) for p in getattr(self, "_stubs", []))]


setup(cmdclass={"build_py": BuildPyWithStubs})
