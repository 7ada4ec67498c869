"""Named exceptions of the client library. All derive from ExoError."""
from __future__ import annotations


class ExoError(Exception):
    """Base class of every error the client raises."""


class KeyTooLong(ExoError, ValueError):
    """The key is empty or longer than 250 bytes; nothing was sent."""


class ValueTooLarge(ExoError, ValueError):
    """Key + value do not fit one frame at the cluster MTU; nothing was sent."""


class Timeout(ExoError, TimeoutError):
    """No reply after every resend. The outcome of a write is unknown: it may have been applied."""

    def __init__(self, message: str, keys: list[bytes] | None = None):
        super().__init__(message)
        self.keys = keys or []


class ServerError(ExoError):
    """A node answered with an error status (see `status`)."""

    def __init__(self, message: str, status: int, key: bytes = b""):
        super().__init__(message)
        self.status = status
        self.key = key
