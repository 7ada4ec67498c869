"""The cache node's own selection (exo::cache::select_keys, cache-node/src/fill/selector.cc),
loaded with ctypes from the shared library exo_selector_capi (cache-node/src/fill/selector_capi.cc).

The library is looked up as $EXO_BUILD/cache-node/libexo_selector_capi.so, EXO_BUILD defaulting
to build/ in the repository (as exo_topo does for the node binaries); EXO_SELECTOR_LIB names the
file directly. Build it with `ninja -C build exo_selector_capi` (make build builds it too).
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np

REPO = Path(__file__).resolve().parents[2]
LIB_NAME = "libexo_selector_capi.so"
ABI_VERSION = 1

Keys = Union[np.ndarray, Sequence[bytes]]
_c_size_p = ctypes.POINTER(ctypes.c_size_t)
_dbl_p = ctypes.POINTER(ctypes.c_double)
_u32_p = ctypes.POINTER(ctypes.c_uint32)
_i64_p = ctypes.POINTER(ctypes.c_int64)


def library_path() -> Path:
    if os.environ.get("EXO_SELECTOR_LIB"):
        return Path(os.environ["EXO_SELECTOR_LIB"])
    return Path(os.environ.get("EXO_BUILD", REPO / "build")) / "cache-node" / LIB_NAME


class SelectorUnavailable(RuntimeError):
    pass


@dataclass
class Selection:
    admit: np.ndarray    # indices into the candidates, hottest first
    evict: np.ndarray    # index < len(held): a held key; len(held) + j: candidate j
    threshold: float


def _pack(keys: Keys) -> tuple[bytes, np.ndarray]:
    """Concatenated key bytes and one uint32 length per key."""
    if isinstance(keys, np.ndarray) and keys.dtype.kind == "S":
        lens = np.char.str_len(keys).astype(np.uint32) if keys.size else np.zeros(0, np.uint32)
        if keys.size and int(lens.min()) == keys.dtype.itemsize:
            return np.ascontiguousarray(keys).tobytes(), lens  # fixed width: the buffer as is
        return b"".join(keys.tolist()), lens
    keys = [bytes(k) for k in keys]
    return b"".join(keys), np.fromiter((len(k) for k in keys), dtype=np.uint32, count=len(keys))


class Selector:
    """select_keys through the C ABI. One instance per process is plenty (see get())."""

    def __init__(self, path: Optional[Path] = None):
        self.path = Path(path) if path else library_path()
        if not self.path.exists():
            raise SelectorUnavailable(
                f"{self.path} not found: build it with `ninja -C {self.path.parent.parent} exo_selector_capi` "
                "(or make build), or point EXO_BUILD / EXO_SELECTOR_LIB at it")
        self.lib = ctypes.CDLL(str(self.path))
        self.lib.exo_selector_capi_version.restype = ctypes.c_int
        version = self.lib.exo_selector_capi_version()
        if version != ABI_VERSION:
            raise SelectorUnavailable(f"{self.path}: C ABI version {version}, this loader wants {ABI_VERSION}")
        f = self.lib.exo_select_keys
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_char_p, _u32_p, _dbl_p, ctypes.c_size_t,
                      ctypes.c_char_p, _u32_p, _dbl_p, ctypes.c_size_t,
                      ctypes.c_char_p, _u32_p, ctypes.c_size_t,
                      ctypes.c_size_t, ctypes.c_double, ctypes.c_double,
                      _i64_p, _c_size_p, _i64_p, _c_size_p, _dbl_p]
        self._f = f

    def select(self, cand_keys: Keys, cand_rates, held_keys: Keys = (), held_rates=(),
               capacity: int = 0, min_rate: float = 0.0, hysteresis: float = 0.0,
               skip: Keys = ()) -> Selection:
        """Run select_keys. Candidates should be hottest first (as the filler passes them)."""
        cbuf, clen = _pack(cand_keys)
        hbuf, hlen = _pack(held_keys)
        sbuf, slen = _pack(skip)
        crate = np.ascontiguousarray(cand_rates, dtype=np.float64)
        hrate = np.ascontiguousarray(held_rates, dtype=np.float64)
        nc, nh = len(clen), len(hlen)
        if len(crate) != nc or len(hrate) != nh:
            raise ValueError("one rate per key")
        admit = np.empty(max(nc, 1), dtype=np.int64)
        evict = np.empty(max(nc + nh, 1), dtype=np.int64)
        na, ne, thr = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_double()

        def ptr(a, t):
            return a.ctypes.data_as(t)

        rc = self._f(cbuf, ptr(clen, _u32_p), ptr(crate, _dbl_p), nc,
                     hbuf, ptr(hlen, _u32_p), ptr(hrate, _dbl_p), nh,
                     sbuf, ptr(slen, _u32_p), len(slen),
                     int(capacity), float(min_rate), float(hysteresis),
                     ptr(admit, _i64_p), ctypes.byref(na), ptr(evict, _i64_p), ctypes.byref(ne),
                     ctypes.byref(thr))
        if rc != 0:
            raise RuntimeError(f"exo_select_keys returned {rc}")
        return Selection(admit[:na.value].copy(), evict[:ne.value].copy(), thr.value)


_instance: Optional[Selector] = None


def get() -> Selector:
    """The process-wide Selector (loads the library on first use)."""
    global _instance
    if _instance is None:
        _instance = Selector()
    return _instance
