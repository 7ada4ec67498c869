"""Named exceptions of the client library. All derive from ExoError.

Every error a request can end in says what became of the request, in `outcome`:
  "failed"  - it definitely had no effect (nothing was sent, the node refused it, or it was a
              read: a read has no effect whatever happened);
  "unknown" - a write got no reply after every resend: it may or may not have been applied.
An application that must know retries an unknown write (writes are idempotent per value) or
reads the key back.
"""
from __future__ import annotations


class ExoError(Exception):
    """Base class of every error the client raises."""

    outcome = "failed"


class KeyTooLong(ExoError, ValueError):
    """The key is empty or longer than 250 bytes; nothing was sent."""


class ValueTooLarge(ExoError, ValueError):
    """Key + value do not fit one frame at the cluster MTU; nothing was sent."""


class Timeout(ExoError, TimeoutError):
    """No reply after every resend. For a read that is a definite failure (a read changes
    nothing); a write raises the subclass UnknownOutcome instead."""

    def __init__(self, message: str, keys: list[bytes] | None = None):
        super().__init__(message)
        self.keys = keys or []


class UnknownOutcome(Timeout):
    """A write got no reply after every resend: it may have been applied or not."""

    outcome = "unknown"


class PartialResult(Timeout):
    """get_many could not read some keys: no reply after every resend, or an error status.
    `values` holds what it did read ({key: value, or None for not found}); `failed_keys` (also
    `keys`) the keys it could not read; `errors` {key: the Timeout or ServerError get() would
    have raised}. A read changes nothing: the outcome is "failed" for those keys alone."""

    def __init__(self, message: str, values: dict, errors: dict):
        super().__init__(message, list(errors))
        self.values = values
        self.errors = errors

    @property
    def failed_keys(self) -> list:
        return list(self.errors)


class ServerError(ExoError):
    """A node answered with an error status (see `status`). Db nodes answer ERROR and BUSY only
    for writes they did not apply, so this is a definite failure."""

    def __init__(self, message: str, status: int, key: bytes = b""):
        super().__init__(message)
        self.status = status
        self.key = key


class DefinitelyFailed(ServerError):
    """A write the cluster refused (ERROR, or BUSY after every retry): it was not applied."""
