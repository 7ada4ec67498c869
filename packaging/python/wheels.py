"""Build the project's Python wheels from a clean copy of the source tree.

    python packaging/python/wheels.py --out DIR [client controller topology experiments]

Each distribution (pyproject.toml beside its code, see the root pyproject.toml) is built with
`pip wheel --no-deps --no-build-isolation` from a copy of the files git tracks or would track
(`git ls-files --cached --others --exclude-standard`): so a wheel never picks up a generated or
ignored file that happens to lie in the working tree (the gRPC stubs are made by the controller's
build hook, not copied), and setuptools' build/ directories land in the copy, not in the checkout.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# distribution short name -> directory of its pyproject.toml (relative to the repository)
DISTRIBUTIONS = {"client": ".", "controller": "controller", "topology": "topo", "experiments": "experiments"}


def export_tree(dest: Path) -> None:
    """Copies every file git tracks or would track (not ignored ones) to dest."""
    res = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, check=True)
    for rel in filter(None, res.stdout.decode().split("\0")):
        src = REPO / rel
        if not src.is_file():  # deleted in the working tree but still in the index
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)


def build(names: list[str], out: Path, python: str = sys.executable) -> dict[str, Path]:
    """Builds the named distributions into out; returns name -> wheel path."""
    unknown = [n for n in names if n not in DISTRIBUTIONS]
    if unknown:
        raise ValueError(f"unknown distribution(s) {unknown}: choose from {sorted(DISTRIBUTIONS)}")
    out.mkdir(parents=True, exist_ok=True)
    wheels: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="exo-wheels-") as tmp:
        src = Path(tmp) / "src"
        export_tree(src)
        for name in names:
            before = set(out.glob("*.whl"))
            res = subprocess.run([python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                                  "-w", str(out), f"./{DISTRIBUTIONS[name]}"],
                                 cwd=src, capture_output=True, text=True)
            if res.returncode != 0:
                raise RuntimeError(f"building the {name} wheel failed:\n{res.stdout}\n{res.stderr}")
            made = sorted(set(out.glob("*.whl")) - before) or _existing(out, name)
            wheels[name] = made[0]
    return wheels


def _existing(out: Path, name: str) -> list[Path]:
    """A rebuild into the same directory replaces the wheel in place: find it by name."""
    prefix = "exoskeleton-" if name == "client" else f"exoskeleton_{name}-"
    return sorted(out.glob(f"{prefix}*.whl"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="directory for the wheels")
    ap.add_argument("names", nargs="*", default=list(DISTRIBUTIONS), help=f"of {list(DISTRIBUTIONS)}")
    args = ap.parse_args(argv)
    try:
        wheels = build(args.names, args.out)
    except (ValueError, RuntimeError) as err:
        print(f"wheels: {err}", file=sys.stderr)
        return 2
    for name, path in wheels.items():
        print(f"{name:12s} {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
