"""Serve the app with uvicorn and several worker processes:

    python3 -m catalogue_web.serve --host 127.0.0.1 --port 8000 --workers 4

What `uvicorn catalogue_web.app:app --workers 4` does, except for the listening socket: uvicorn
(0.17.6, Debian 12, and later releases) creates it with protocol 0, its accepted connections
inherit that, and asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP. With
Nagle left on, every keep-alive response whose headers and body go out in two writes waits for
the client's delayed ACK: ~40 ms per request (uvicorn issue #3149). Here the socket is made with
IPPROTO_TCP and handed to uvicorn's own multi-process supervisor.
"""
from __future__ import annotations

import argparse
import socket
import sys

import uvicorn
from uvicorn.supervisors import Multiprocess

APP = "catalogue_web.app:app"


def listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)  # the workers are spawned processes that receive it
    return sock


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="catalogue_web.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--log-level", default="warning")
    a = p.parse_args(argv)
    if not 1 <= a.workers <= 64:
        print(f"catalogue_web.serve: --workers: must be in 1..64 (got {a.workers})", file=sys.stderr)
        return 2
    try:
        sock = listening_socket(a.host, a.port)
    except OSError as err:
        print(f"catalogue_web.serve: --host/--port: bind {a.host}:{a.port}: {err}", file=sys.stderr)
        return 1
    config = uvicorn.Config(APP, host=a.host, port=a.port, workers=a.workers, access_log=False,
                            log_level=a.log_level)
    server = uvicorn.Server(config=config)
    Multiprocess(config, target=server.run, sockets=[sock]).run()  # until SIGINT/SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
