"""Read-through caching: an item comes from the cluster; on a miss, from the source of truth,
and is then written to the cluster so the next read finds it there.

The cluster's failures are not papered over: a read or write the cluster did not complete
raises (exoskeleton.ExoError) and the page answers 503. Falling back to SQLite would keep pages
up through a cluster fault but would also hide it, and the demo measures exactly that
(docs/web-demo.md).
"""
from __future__ import annotations

from typing import Optional, Protocol

from .store import decode, encode

FROM_CLUSTER, FROM_STORE = "cluster", "source of truth"


class Cache(Protocol):
    async def get(self, key: str): ...
    async def set(self, key: str, value: bytes): ...


class Source(Protocol):
    def item(self, item_id: int) -> Optional[dict]: ...


def item_key(item_id: int) -> str:
    return f"item:{item_id}"


async def read_item(cache: Cache, source: Source, item_id: int) -> tuple[Optional[dict], str]:
    """(the item, where it was read) or (None, FROM_STORE) when the catalogue has no such item."""
    key = item_key(item_id)
    raw = await cache.get(key)
    if raw is not None:
        return decode(raw), FROM_CLUSTER
    item = source.item(item_id)
    if item is None:
        return None, FROM_STORE
    await cache.set(key, encode(item))
    return item, FROM_STORE
