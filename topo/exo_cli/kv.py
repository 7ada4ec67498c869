"""`exo get/set/del`: one request through the exo-proxy `exo up` started (its unix socket, named
in the state file), with the Python client's proxy transport, so no privilege is needed beyond
being allowed to connect to that socket.

Exit status and output:
    get   0 the value on stdout (then a newline) | 1 NOT_FOUND on stderr
    set   0 STORED
    del   0 DELETED                              | 1 NOT_FOUND on stderr
    any   2 an error on stderr: no cluster up, no access to the socket, the cluster refused the
          request or did not answer (a set or del without an answer may or may not have been
          applied: the message says "outcome unknown")
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Optional

from exoskeleton import Client
from exoskeleton.errors import ExoError, UnknownOutcome

from . import state

FOUND, NOT_FOUND, ERROR = 0, 1, 2


class KvError(RuntimeError):
    pass


def proxy_socket(cluster: Optional[str], socket_path: Optional[str]) -> str:
    """The socket to use: --socket, or the one the state file of the running cluster names."""
    if socket_path is None:
        socket_path = state.running(cluster).data["proxy"]["unix"]
    p = Path(socket_path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise KvError(f"proxy socket {p} does not exist (is exo-proxy running? see `exo up`)") from None
    except PermissionError:
        raise KvError(f"proxy socket {p}: no permission to reach it (a directory on the way is closed to you)") from None
    if not stat.S_ISSOCK(mode):
        raise KvError(f"{p} is not a unix socket")
    if not os.access(p, os.W_OK):
        raise KvError(f"proxy socket {p} (mode {stat.filemode(mode)}): no permission to connect; "
                      "run as root or give your user write access to the socket")
    return str(p)


def _client(args) -> Client:
    return Client(transport="proxy", proxy=proxy_socket(args.cluster, args.socket))


def _fail(verb: str, err: Exception) -> int:
    # A write that got no answer may have been applied: say so, whatever the client's wording.
    what = "outcome unknown: " if isinstance(err, UnknownOutcome) and "outcome unknown" not in str(err) else ""
    print(f"exo {verb}: {what}{err}", file=sys.stderr)
    return ERROR


def cmd_get(args) -> int:
    try:
        c = _client(args)
        try:
            value = c.get(os.fsencode(args.key))
        finally:
            c.close()
    except (KvError, state.StateError, ExoError, OSError) as err:
        return _fail("get", err)
    if value is None:
        print("NOT_FOUND", file=sys.stderr)
        return NOT_FOUND
    sys.stdout.buffer.write(value + b"\n")
    sys.stdout.flush()
    return FOUND


def cmd_set(args) -> int:
    try:
        c = _client(args)
        try:
            c.set(os.fsencode(args.key), os.fsencode(args.value))
        finally:
            c.close()
    except (KvError, state.StateError, ExoError, OSError) as err:
        return _fail("set", err)
    print("STORED")
    return FOUND


def cmd_del(args) -> int:
    try:
        c = _client(args)
        try:
            existed = c.delete(os.fsencode(args.key))
        finally:
            c.close()
    except (KvError, state.StateError, ExoError, OSError) as err:
        return _fail("del", err)
    if not existed:
        print("NOT_FOUND", file=sys.stderr)
        return NOT_FOUND
    print("DELETED")
    return FOUND
