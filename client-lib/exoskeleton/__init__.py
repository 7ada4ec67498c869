"""Exoskeleton client library.

    from exoskeleton import Client
    with Client(iface="client0-eth0") as c:
        c.set(b"user:1", b"alice")
        assert c.get("user:1") == b"alice"     # str keys are UTF-8

    from exoskeleton import AsyncClient         # the same calls as coroutines, for asyncio
    async with AsyncClient(iface="client0-eth0") as c:
        await c.get(b"user:1")

The client needs CAP_NET_RAW: it sends raw Ethernet frames whose destination MAC carries
the key hash (docs/wire-format.md). Without it, the same calls go through the host's exo-proxy:
Client(transport="proxy", proxy="/run/exo-proxy.sock") (proxy_transport.py). A Client may be shared by threads and survives fork()
(docs/client.md).
"""
from .aio import AsyncClient
from .api import BatchOutcome
from .client import Client, Request, Result
from .errors import (DefinitelyFailed, ExoError, KeyTooLong, PartialResult, ServerError, Timeout, UnknownOutcome,
                     ValueTooLarge)

__all__ = ["Client", "AsyncClient", "Request", "Result", "BatchOutcome", "ExoError", "KeyTooLong", "ServerError",
           "Timeout", "ValueTooLarge", "UnknownOutcome", "DefinitelyFailed", "PartialResult"]
