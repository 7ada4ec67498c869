"""Key names and alpha labels, from the generator's own definitions (not a second copy)."""
from __future__ import annotations

import subprocess

from .runner import LOADGEN


def alpha_key(alpha: float) -> str:
    """JSON key of an alpha: "uniform" for 0, else its shortest form, e.g. "0.995"."""
    return "uniform" if alpha == 0 else f"{alpha:g}"


def hottest(cluster, k: int, key_size: int = 16, n_keys: int = 100_000_000) -> list[bytes]:
    """The k hottest keys, hottest first, before any hot-set swap: what exo-loadgen sends most."""
    out = subprocess.run([str(cluster.build_dir / LOADGEN), "--print-keys", str(k),
                          "--key-size", str(key_size), "--keys", str(n_keys)],
                         check=True, capture_output=True, timeout=120).stdout
    keys = [line for line in out.split(b"\n") if line]
    if len(keys) != k:
        raise RuntimeError(f"exo-loadgen --print-keys {k} printed {len(keys)} keys")
    return keys
