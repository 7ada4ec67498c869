"""Exoskeleton client library.

    from exoskeleton import Client
    with Client(iface="client0-eth0") as c:
        c.set(b"user:1", b"alice")
        assert c.get(b"user:1") == b"alice"

The client needs CAP_NET_RAW: it sends raw Ethernet frames whose destination MAC carries
the key hash (docs/wire-format.md).
"""
from .client import Client, Request, Result
from .errors import (DefinitelyFailed, ExoError, KeyTooLong, ServerError, Timeout, UnknownOutcome,
                     ValueTooLarge)

__all__ = ["Client", "Request", "Result", "ExoError", "KeyTooLong", "ServerError", "Timeout",
           "ValueTooLarge", "UnknownOutcome", "DefinitelyFailed"]
