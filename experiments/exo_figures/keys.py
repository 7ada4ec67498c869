"""Key names and alpha labels, from the generator's own definitions (not a second copy)."""
from __future__ import annotations

import subprocess

from exo_testbed.record import alpha_key  # noqa: F401  (one definition for both result sets)

from .runner import LOADGEN


def hottest(cluster, k: int, key_size: int = 16, n_keys: int = 100_000_000) -> list[bytes]:
    """The k hottest keys, hottest first, before any hot-set swap: what exo-loadgen sends most."""
    out = subprocess.run([str(cluster.build_dir / LOADGEN), "--print-keys", str(k),
                          "--key-size", str(key_size), "--keys", str(n_keys)],
                         check=True, capture_output=True, timeout=120).stdout
    keys = [line for line in out.split(b"\n") if line]
    if len(keys) != k:
        raise RuntimeError(f"exo-loadgen --print-keys {k} printed {len(keys)} keys")
    return keys
