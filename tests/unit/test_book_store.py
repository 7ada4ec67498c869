"""The Ruleset 2 book in etcd (controller/exo_controller/book_store.py) and what the rule updater
does with it (load_book, ListKeys sync as reconciliation, rollback): the pure plan, then against
a real etcd a round trip through the master's guarded writes (more keys than one Txn may hold),
a node's prefix dropped, a deposed master's write refused (known-bad), and keys that do not
parse named."""
import types
import uuid
from collections import OrderedDict

import pytest

from etcd_fixtures import client, etcd_plain  # noqa: F401  (fixtures)
from exo_common.etcd import Election, revoke_leader
from exo_controller.failover import election_prefix
from exo_controller.book_store import (MAX_TXN_OPS, BookStoreError, EtcdBookStore, chunks, decode, encode,
                                       key, plan)
from exo_controller.flows import CacheRule
from exo_controller.rule_updater import RuleUpdater

NODES = ("cache1", "cache2", "cache3")
TTL = 1


def store_for(client, name="c1", cluster=None):
    cfg = types.SimpleNamespace(cluster=types.SimpleNamespace(name=cluster or f"t-{uuid.uuid4().hex[:8]}"))
    election = Election(client, election_prefix(cfg), name, TTL)
    election.campaign(timeout_s=5)
    fo = types.SimpleNamespace(client=client, election=election)
    return cfg, EtcdBookStore(cfg, fo, NODES), election


def updater():
    return RuleUpdater({"cache1": 1, "cache2": 2, "cache3": 3}, capacity=1000, rate=50)


# ---------------------------------------------------------------- pure

def test_plan_keeps_order_numbers_and_renumbers_only_what_moved():
    book = {0x1000: OrderedDict([("cache1", 2), ("cache2", 1)])}
    p = plan(book, [0x1000], {}, next_order=5)
    assert p.puts == {(0x1000, "cache1"): (2, 5), (0x1000, "cache2"): (1, 6)} and p.next_order == 7
    stored = dict(p.puts)
    # cache1 adds again: it moves to the end (the rule now goes to cache1): only its key changes
    book = {0x1000: OrderedDict([("cache2", 1), ("cache1", 3)])}
    p = plan(book, [0x1000], stored, next_order=7)
    assert p.puts == {(0x1000, "cache1"): (3, 7)} and not p.deletes
    stored.update(p.puts)
    # a remove that keeps references changes the count, not the order
    book = {0x1000: OrderedDict([("cache2", 1), ("cache1", 2)])}
    assert plan(book, [0x1000], stored, 8).puts == {(0x1000, "cache1"): (2, 7)}
    # the last reference of cache2 goes: its key is deleted; nothing else
    book = {0x1000: OrderedDict([("cache1", 3)])}
    p = plan(book, [0x1000], stored, 8)
    assert p.deletes == [(0x1000, "cache2")] and not p.puts
    # unchanged: nothing to write
    assert len(plan({0x1000: OrderedDict([("cache2", 1), ("cache1", 3)])}, [0x1000], stored, 8)) == 0


def test_decode_rebuilds_the_order_and_names_bad_keys():
    base = "/exo/t/book/"
    items = [(key(base, "cache1", 0xab), encode(2, 9)), (key(base, "cache2", 0xab), encode(1, 3)),
             (key(base, "cache2", 0x1), encode(4, 10))]
    book, stored = decode(base, items, NODES)
    assert list(book[0xab].items()) == [("cache2", 1), ("cache1", 2)]  # cache1 added last: the owner
    assert book[0x1] == OrderedDict([("cache2", 4)]) and stored[(0xab, "cache1")] == (2, 9)
    for k, v, why in [(base + "cache1/xyz", encode(1, 1), "etcd key /exo/t/book/cache1/xyz"),
                      (base + "cache9/ab", encode(1, 1), "cache9"),
                      (base + "cache1/ab", b'{"refs": 0, "order": 1}', "refs must be"),
                      (base + "cache1/ab", b"not json", "etcd key /exo/t/book/cache1/ab"),
                      (base + "cache1", encode(1, 1), "not <cache node>/<rule hash hex>")]:
        with pytest.raises(ValueError, match=why):
            decode(base, [(k, v)], NODES)


def test_chunks_respect_etcds_txn_limit():
    parts = chunks(list(range(300)))
    assert [len(p) for p in parts] == [MAX_TXN_OPS, MAX_TXN_OPS, 300 - 2 * MAX_TXN_OPS]


# ---------------------------------------------------------------- the updater with a stored book

def test_a_loaded_book_is_exact_at_once_and_sync_corrects_only_what_differs():
    up = updater()
    up.expect_sync(["cache1", "cache2"])
    up.load_book({0x1000: OrderedDict([("cache2", 1), ("cache1", 2)]), 0x2000: OrderedDict([("cache2", 1)])})
    assert up.book.refcount(0x1000, "cache1") == 2 and up.book.owner(0x1000) == "cache1"
    # cache1's ListKeys agrees with etcd: no correction
    assert up.sync_node("cache1", [0x1000, 0x1000]) == 0 and up.book_sync_corrections == 0
    # cache2 holds 0x1000 twice (etcd said once), and no longer 0x2000: two corrections
    up.sync_node("cache2", [0x1000, 0x1000])
    assert up.book_sync_corrections == 2
    assert up.book.refcount(0x1000, "cache2") == 2 and up.book.refcount(0x2000, "cache2") == 0


def test_a_resent_add_that_etcd_already_has_is_absorbed():
    # The old master wrote the add to etcd and died before answering: the node resends it.
    up = updater()
    up.load_book({0x1000: OrderedDict([("cache1", 1)])})
    up.add([CacheRule(0x1000, "cache1")])
    assert up.book.refcount(0x1000, "cache1") == 1


def test_rollback_undoes_an_add_that_etcd_did_not_take():
    up = updater()
    up.book_tracking = True
    up.add([CacheRule(0x1000, "cache1")])
    up.book_dirty.clear()
    rules = [CacheRule(0x1000, "cache2"), CacheRule(0x3000, "cache2")]
    cp = up.checkpoint(rules)
    up.add(rules)
    assert up.book.owner(0x1000) == "cache2"
    up.rollback(cp)
    assert up.book.owner(0x1000) == "cache1" and up.book.refcount(0x3000, "cache2") == 0
    assert {0x1000, 0x3000} <= up.book_dirty  # written again: a half-done write is put right


# ---------------------------------------------------------------- against a real etcd

def test_the_masters_book_comes_back_exact_over_several_txns(client):
    cfg, store, election = store_for(client)
    assert store.load(1) == {}
    up = updater()
    up.book_tracking = True
    rules = [CacheRule(h << 8, NODES[h % 3]) for h in range(1, 301)] + [CacheRule(7 << 8, "cache3")] * 2
    up.add(rules)
    txns = store.txns
    assert store.write(up.book, up.book_dirty) == 301  # 300 hashes, one of them held by two nodes
    assert store.txns - txns == 3, "301 keys need 3 Txns of at most 128 operations"
    up.book_dirty.clear()
    up.remove([CacheRule(7 << 8, "cache3")])
    store.write(up.book, up.book_dirty)
    # A new master (another store, as after a failover) reads exactly the same book.
    fresh = EtcdBookStore(cfg, store.failover, NODES)
    got = fresh.load(2)
    assert got == up.book.snapshot(up.book.hashes())
    assert got[7 << 8] == OrderedDict([("cache2", 1), ("cache3", 1)]) and list(got[7 << 8])[-1] == up.book.owner(7 << 8)
    # A cache node declared DOWN: its prefix goes.
    store.drop_node("cache1")
    assert all("cache1" not in n for n in EtcdBookStore(cfg, store.failover, NODES).load(3).values())
    election.resign()


def test_a_deposed_masters_book_write_is_refused_and_changes_nothing(client):
    cfg, store, election = store_for(client)
    up = updater()
    up.book_tracking = True
    up.add([CacheRule(0x1000, "cache1")])
    store.write(up.book, up.book_dirty)
    up.book_dirty.clear()
    revoke_leader(client, election.lease_id)
    up.add([CacheRule(0x1000, "cache2")])
    with pytest.raises(BookStoreError, match="no longer the elected master"):
        store.write(up.book, up.book_dirty)  # known-bad: a master that lost its election
    assert EtcdBookStore(cfg, store.failover, NODES).load() == {0x1000: OrderedDict([("cache1", 1)])}
    with pytest.raises(BookStoreError):
        store.drop_node("cache1")
