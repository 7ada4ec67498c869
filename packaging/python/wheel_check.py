"""What a wheel may hold, as a pure check over its file listing (tests/unit/test_python_wheels.py).

    problems(listing, allowed={"exoskeleton"}, max_bytes=200_000, required=[...]) -> [why, ...]

`listing` is [(path inside the wheel, uncompressed bytes)], as `listing(wheel)` reads it. A wheel
is fine when every file lies in an allowed top-level package (or the wheel's own .dist-info),
the files add up to at most max_bytes, and every required path is there.
"""
from __future__ import annotations

import zipfile
from pathlib import Path


def listing(wheel: Path) -> list[tuple[str, int]]:
    with zipfile.ZipFile(wheel) as z:
        return [(i.filename, i.file_size) for i in z.infolist() if not i.is_dir()]


def problems(files: list[tuple[str, int]], allowed: set[str], max_bytes: int,
             required: tuple[str, ...] = ()) -> list[str]:
    out = []
    names = {name for name, _ in files}
    for name, size in files:
        top = name.split("/", 1)[0]
        if top.endswith(".dist-info"):
            continue
        if top not in allowed:
            out.append(f"{name}: not in an allowed package ({', '.join(sorted(allowed))})")
    total = sum(size for _, size in files)
    if total > max_bytes:
        biggest = sorted(files, key=lambda f: -f[1])[:3]
        out.append(f"{total:,} bytes in all, more than {max_bytes:,} (largest: "
                   + ", ".join(f"{n} {s:,}" for n, s in biggest) + ")")
    out += [f"{r}: missing" for r in required if r not in names]
    return out
