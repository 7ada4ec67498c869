"""Finds and loads the client's native hot path, the pybind11 extension `_exo_native`
(client-lib/native/: the pipelined request engine in C++, sendmmsg/recvmmsg, the GIL released
while it waits). Client.execute uses it when it is available and the client talks to a real
RawIO; everything else (a fake or recording I/O, Client.stream) stays on the pure-Python path.

The extension is looked up as $EXO_NATIVE_LIB, else in $EXO_BUILD/client-lib/native/ (EXO_BUILD
defaulting to build/ in the repository, as for the node binaries). `make build` builds it
(`ninja -C build _exo_native`).
"""
from __future__ import annotations

import glob
import importlib.machinery
import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
MODULE = "_exo_native"
_cache: dict[str, object] = {}


def library_path() -> Optional[Path]:
    if os.environ.get("EXO_NATIVE_LIB"):
        return Path(os.environ["EXO_NATIVE_LIB"])
    d = Path(os.environ.get("EXO_BUILD", REPO / "build")) / "client-lib" / "native"
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    for path in sorted(glob.glob(str(d / f"{MODULE}*"))):
        if any(path.endswith(s) for s in suffixes):
            return Path(path)
    return None


def load() -> tuple[Optional[ModuleType], str]:
    """(the module, "") or (None, why it is not available). Loaded once per process."""
    if "module" not in _cache:
        path = library_path()
        if path is None or not path.exists():
            _cache["module"], _cache["why"] = None, (
                f"{MODULE} not built (looked in {path or 'build/client-lib/native/'}; `make build`)")
        else:
            try:
                spec = importlib.util.spec_from_file_location(MODULE, path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                _cache["module"], _cache["why"] = mod, ""
            except ImportError as e:
                _cache["module"], _cache["why"] = None, f"{path}: {e}"
    return _cache["module"], _cache["why"]  # type: ignore[return-value]
