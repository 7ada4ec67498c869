"""The Ruleset 2 book in etcd (docs/design/replication.md, 5.3 and 5.5), when the controllers
elect a master there (`controller.etcd`). Without etcd nothing here runs.

    /exo/<cluster>/book/<cache node>/<rule hash, hex>   {"refs": n, "order": k}

One key per (rule hash, cache node) that holds references: `refs` is the refcount of
flows.CacheRuleBook, `order` says which node the rule outputs to when several hold it (the book's
rule goes to the node that added most recently; a larger `order` is more recent). So a new master
that loads the prefix has the exact refcounts at once, instead of rebuilding them from every cache
node's ListKeys (which stays, as reconciliation: rule_updater.sync_node counts what it had to
correct as `book_sync_corrections`).

The master writes the book before a change of it can reach the switch and before the
AddCacheRules / RemoveCacheRules caller is answered (app.py holds its lock across the write, so
the sender cannot act on a change etcd does not have; a failed write is rolled back and the
caller told). Every write is a Txn guarded by the master's election key (a deposed master's write
fails, changing nothing), at most MAX_TXN_OPS operations each (etcd's --max-txn-ops default); a
change of more keys than that goes in several Txns. A cache node declared DOWN loses its whole
prefix in one DeleteRange.

Pure parts (what to write, what was read) are functions; EtcdBookStore is the I/O.
"""
from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

from .etcd_keys import cluster_prefix

LOG = logging.getLogger("exo_controller.book")
MAX_TXN_OPS = 128  # etcd's --max-txn-ops default: a Txn with more operations is refused

# What etcd holds for one (rule hash, node): (refcount, order).
Entry = tuple[int, int]
Refs = Mapping[int, "OrderedDict[str, int]"]  # hash -> node -> refcount, oldest add first


def prefix(cfg) -> str:
    return f"{cluster_prefix(cfg)}/book/"


def key(base: str, node: str, h: int) -> str:
    return f"{base}{node}/{h:x}"


def encode(refs: int, order: int) -> bytes:
    return json.dumps({"refs": refs, "order": order}, separators=(",", ":")).encode()


def decode(base: str, items: Iterable[tuple[str, bytes]], nodes: Optional[Iterable[str]] = None
           ) -> tuple[dict[int, "OrderedDict[str, int]"], dict[tuple[int, str], Entry]]:
    """(key, value) pairs under `base` -> (the book's refs: hash -> node -> refcount, ordered by
    `order`; the entries as stored: (hash, node) -> (refs, order)). A key or value that does not
    parse, or names a node not in `nodes`, raises ValueError naming the key."""
    known = None if nodes is None else set(nodes)
    stored: dict[tuple[int, str], Entry] = {}
    for k, v in items:
        rest = k[len(base):] if k.startswith(base) else None
        node, sep, hexhash = (rest or "").partition("/")
        try:
            if rest is None or not sep or not node:
                raise ValueError("not <cache node>/<rule hash hex>")
            h = int(hexhash, 16)
            if h < 0 or hexhash != f"{h:x}":
                raise ValueError(f"rule hash {hexhash!r} is not lowercase hex")
            if known is not None and node not in known:
                raise ValueError(f"cache node {node!r} is not in the config (known: {', '.join(sorted(known))})")
            parsed = json.loads(v)
            refs, order = parsed["refs"], parsed["order"]
            if type(refs) is not int or type(order) is not int or refs < 1 or order < 0:
                raise ValueError(f"value {v!r}: refs must be a whole number >= 1 and order >= 0")
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"etcd key {k}: {err}") from None
        stored[(h, node)] = (refs, order)
    book: dict[int, OrderedDict] = {}
    for (h, node), (refs, order) in sorted(stored.items(), key=lambda kv: (kv[0][0], kv[1][1], kv[0][1])):
        book.setdefault(h, OrderedDict())[node] = refs
    return book, stored


@dataclass
class Plan:
    """What to write so that etcd holds `book` for some hashes: puts (key -> (refs, order)),
    deletes, and the next free order number."""
    puts: dict[tuple[int, str], Entry] = field(default_factory=dict)
    deletes: list[tuple[int, str]] = field(default_factory=list)
    next_order: int = 0

    def __len__(self) -> int:
        return len(self.puts) + len(self.deletes)


def plan(book: Refs, hashes: Iterable[int], stored: Mapping[tuple[int, str], Entry], next_order: int,
         stored_nodes: Optional[Mapping[int, Iterable[str]]] = None) -> Plan:
    """The writes that make etcd hold `book`'s state of `hashes`, given what it holds (`stored`;
    `stored_nodes`: hash -> nodes stored for it, derived from `stored` when None). A node keeps
    its order number while the book's order of the hash's nodes agrees with the stored numbers;
    from the first node that is out of order on, each gets a new, larger number (an add moves its
    node to the end: usually only that node's key changes)."""
    out = Plan(next_order=next_order)
    if stored_nodes is None:
        idx: dict[int, set[str]] = {}
        for h, n in stored:
            idx.setdefault(h, set()).add(n)
        stored_nodes = idx
    for h in sorted(set(hashes)):
        want = book.get(h) or OrderedDict()
        last, renumber = -1, False
        for node, refs in want.items():
            old = stored.get((h, node))
            if renumber or old is None or old[1] <= last:
                renumber = True
                order = out.next_order
                out.next_order += 1
            else:
                order = old[1]
            last = order
            if old != (refs, order):
                out.puts[(h, node)] = (refs, order)
        out.deletes += [(h, n) for n in sorted(stored_nodes.get(h, ())) if n not in want]
    return out


def chunks(ops: list, size: int = MAX_TXN_OPS) -> list[list]:
    return [ops[i:i + size] for i in range(0, len(ops), size)] or [[]]


class BookStoreError(RuntimeError):
    """The book could not be written (or read): etcd unreachable, or this instance is no longer
    the elected master. The message says which."""


class EtcdBookStore:
    """load() / write() / drop_node() through the master's election (failover.Failover: .client,
    .election). Keeps a mirror of what etcd holds, so a write sends only the keys that change."""

    def __init__(self, cfg, failover, nodes: Iterable[str]):
        self.failover = failover
        self.base = prefix(cfg)
        self.nodes = set(nodes)
        self._stored: dict[tuple[int, str], Entry] = {}
        self._by_hash: dict[int, set[str]] = {}
        self._next_order = 0
        self.loaded_generation: Optional[int] = None  # the election generation load() ran in
        self.writes = 0
        self.txns = 0

    def load(self, generation: Optional[int] = None) -> dict[int, "OrderedDict[str, int]"]:
        """One Range of the prefix: the book as etcd holds it (hash -> node -> refcount)."""
        from exo_common.etcd import EtcdError
        try:
            kvs = self.failover.client.get_prefix(self.base)
        except EtcdError as err:
            raise BookStoreError(f"reading the Ruleset 2 book from etcd: {err}") from err
        book, stored = decode(self.base, ((kv.key, kv.value) for kv in kvs), self.nodes)
        self._stored = stored
        self._by_hash = {}
        for h, n in stored:
            self._by_hash.setdefault(h, set()).add(n)
        self._next_order = 1 + max((o for _, o in stored.values()), default=-1)
        self.loaded_generation = generation
        return book

    def write(self, book, hashes: Iterable[int]) -> int:
        """Make etcd hold `book`'s (flows.CacheRuleBook) state of `hashes` (rule hashes); returns
        the keys written. BookStoreError when a Txn is refused or fails; the Txns before it stay,
        and the mirror says so (each is a consistent state of its keys; the caller rolls its book
        back and writes those hashes again)."""
        from exo_common.etcd import op_delete, op_put
        hashes = set(hashes)
        p = plan(book.snapshot(hashes), hashes, self._stored, self._next_order, self._by_hash)
        if not p:
            return 0
        ops = [((h, n), op_put(key(self.base, n, h), encode(*e))) for (h, n), e in p.puts.items()]
        ops += [((h, n), op_delete(key(self.base, n, h))) for h, n in p.deletes]
        for part in chunks(ops):
            self._txn([op for _, op in part])
            self._next_order = max(self._next_order, p.next_order)
            for hn, _ in part:
                if hn in p.puts:
                    self._stored[hn] = p.puts[hn]
                    self._by_hash.setdefault(hn[0], set()).add(hn[1])
                else:
                    self._forget(hn)
        self.writes += len(p)
        return len(p)

    def drop_node(self, node: str) -> None:
        """A cache node declared DOWN: its whole prefix goes (one guarded DeleteRange)."""
        from etcd import rpc_pb2
        from exo_common.etcd.ops import b, prefix_range_end
        p = b(f"{self.base}{node}/")
        self._txn([rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(
            key=p, range_end=prefix_range_end(p)))])
        for hn in [hn for hn in self._stored if hn[1] == node]:
            self._forget(hn)

    def _forget(self, hn: tuple[int, str]) -> None:
        self._stored.pop(hn, None)
        nodes = self._by_hash.get(hn[0])
        if nodes is not None:
            nodes.discard(hn[1])
            if not nodes:
                del self._by_hash[hn[0]]

    def _txn(self, ops: list) -> None:
        from exo_common.etcd import EtcdError
        try:
            ok, _ = self.failover.election.guarded_txn(ops)
        except EtcdError as err:
            raise BookStoreError(f"writing the Ruleset 2 book to etcd: {err}") from err
        self.txns += 1
        if not ok:
            raise BookStoreError("writing the Ruleset 2 book to etcd refused: this instance is no longer "
                                 "the elected master")
