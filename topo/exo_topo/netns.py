"""Run code in a Mininet host's network namespace from this process.

A network namespace is a per-thread attribute in Linux, and a socket stays in the namespace
it was created in. So a test can step into a host's namespace, create a Client there (its
sockets live in the host), step back, and then use the client from the root namespace.
"""
from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager
from typing import Iterator

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def in_netns(pid: int) -> Iterator[None]:
    """Enter the network namespace of process `pid` for the duration of the block."""
    with _entered(f"/proc/{pid}/ns/net"):
        yield


@contextmanager
def in_named_netns(name: str) -> Iterator[None]:
    """Enter the namespace `ip netns add NAME` made (/var/run/netns/NAME) for the block."""
    with _entered(f"/var/run/netns/{name}"):
        yield


@contextmanager
def _entered(ns_path: str) -> Iterator[None]:
    home = os.open("/proc/self/task/%d/ns/net" % threading.get_native_id(), os.O_RDONLY)
    target = os.open(ns_path, os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(target)
        os.close(home)
