"""The .deb's private Python tree: the controller and the `exo` CLI with every Python package they
import, for Debian's /usr/bin/python3 (the wrappers packaging/bin/exo-controller and exo put it
first on sys.path).

    python packaging/python/bundle.py --dest DIR

Debian 12's own python3-grpcio, -protobuf and -pydantic are older than the project needs
(protobuf 3.21 cannot load stubs from today's protoc; pydantic 1), so the package carries its own
copies, at the versions the development environment runs and tests with (`pip freeze --local`
of the running interpreter, passed to pip as constraints). Wheels come from PyPI (or pip's cache).
Into DIR: the client, controller and topology wheels built by wheels.py (topology without its
dependencies: the CLI's config and certs commands need none of numpy, rich or Mininet).
The cryptography library is the exception: the development environment runs Debian's
python3-cryptography (its venv sees the system packages), so the .deb depends on that package
instead of carrying a second, different copy.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wheels  # noqa: E402

# Top-level names pip puts in DEST that Debian's packages provide instead (python3-cryptography,
# which brings python3-cffi-backend): the versions the tests run with.
FROM_DEBIAN = ("cryptography", "cffi", "pycparser", "_cffi_backend")


def pip(python: str, *args: str) -> None:
    res = subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args[:3])} ... failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")


def constraints(python: str) -> str:
    """The versions this environment runs, minus the project's own (editable) distributions."""
    res = subprocess.run([python, "-m", "pip", "freeze", "--local", "--exclude-editable"],
                         capture_output=True, text=True, check=True)
    return "\n".join(line for line in res.stdout.splitlines()
                     if "==" in line and not line.lower().startswith("exoskeleton")) + "\n"


def bundle(dest: Path, python: str = sys.executable) -> None:
    started = time.monotonic()
    if dest.exists():
        shutil.rmtree(dest)
    with tempfile.TemporaryDirectory(prefix="exo-bundle-") as tmp:
        built = wheels.build(["client", "controller", "topology"], Path(tmp) / "wheels", python)
        cons = Path(tmp) / "constraints.txt"
        cons.write_text(constraints(python))
        common = ["install", "-q", "--disable-pip-version-check", "--no-compile", "--target", str(dest),
                  "--only-binary", ":all:", "-c", str(cons)]
        pip(python, *common, str(built["client"]), str(built["controller"]))
        pip(python, *common, "--no-deps", "--upgrade", str(built["topology"]))
    for entry in list(dest.iterdir()):
        name = entry.name.split("-")[0].split(".")[0]
        if name in FROM_DEBIAN or entry.name == "distutils-precedence.pth":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    # Console scripts pip wrote for DEST's packages point at the build machine's interpreter.
    shutil.rmtree(dest / "bin", ignore_errors=True)
    for cache in dest.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    print(f"bundle: {dest}: {len(list(dest.iterdir()))} entries, {size / 1e6:.1f} MB "
          f"in {time.monotonic() - started:.1f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", required=True, type=Path, help="directory to fill (emptied first)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter whose pip builds and whose versions are pinned (default: this one)")
    args = ap.parse_args(argv)
    try:
        bundle(args.dest, args.python)
    except (RuntimeError, ValueError, subprocess.CalledProcessError) as err:
        print(f"bundle: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
