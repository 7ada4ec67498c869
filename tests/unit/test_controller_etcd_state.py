"""ExoControllerApp as an elected master with its desired state in a real etcd (book_store.py,
ratewin_store.py through failover.Failover), against the fake datapath of test_controller_app.py:
taking over, it loads the old master's book (exact refcounts, the same owner) and seeds its rate
window from the old master's record before sending anything; an AddCacheRules is in etcd when it
is answered; and once deposed (its lease revoked), its book writes are refused, the caller gets
the error and the book is rolled back (known-bad)."""
import copy
import time
import uuid
from collections import OrderedDict
from types import SimpleNamespace

import pytest

from etcd_fixtures import client, etcd_plain  # noqa: F401  (fixtures)
from exo_common.config import parse_config
from exo_common.etcd import revoke_leader
from exo_controller.app import ExoControllerApp, StateNotStored
from exo_controller.book_store import EtcdBookStore, encode, key, prefix
from exo_controller.failover import Failover
from exo_controller.flows import CacheRule
from exo_controller.leadership import MASTER, Leadership
from exo_controller.ratewin_store import BatchRecord, encode as encode_record, key as ratewin_key
from fake_switch import FakeDatapath, H

RATE = 1000.0


@pytest.fixture
def master(client, cluster_dict):
    """An app whose Failover won the election, connected and confirmed MASTER; before that, an
    "old master" left a book and a rate-window record in etcd."""
    d = copy.deepcopy(cluster_dict)
    d["cluster"]["name"] = f"t-{uuid.uuid4().hex[:8]}"
    d["switch"]["rule_update_rate"] = RATE
    d["controller"] = {"etcd": ["http://127.0.0.1:2379"], "lease_ttl_s": 1, "instances": [
        {"name": "c1", "openflow_port": 6671, "grpc": "unix:/tmp/exoctl-test/c1.sock"},
        {"name": "c2", "openflow_port": 6672, "grpc": "unix:/tmp/exoctl-test/c2.sock"}]}
    cfg = parse_config(d).for_instance("c1")
    base = prefix(cfg)
    # The old master's book: H(1) held by cache2 then cache1 (the rule goes to cache1), H(2) x3.
    client.put(key(base, "cache2", H(1)), encode(1, 4))
    client.put(key(base, "cache1", H(1)), encode(2, 9))
    client.put(key(base, "cache2", H(2)), encode(3, 5))
    now = time.time()
    client.put(ratewin_key(cfg), encode_record([BatchRecord(now - 0.2, 7, confirmed_at=now - 0.19),
                                                BatchRecord(now - 0.1, 5)]))
    app = ExoControllerApp(exo_config=cfg, barrier_timeout=0.3, leadership=Leadership("c1", single=False))
    app.updater.expect_sync(["cache1", "cache2"])  # as the cache node monitor does (none here)
    fo = Failover(cfg, app, client, "c1")
    app.failover = fo
    try:
        dp = FakeDatapath(app)
        app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
        gen = fo.election.campaign(timeout_s=5)
        app.leadership_event("elected_as", gen)
        app.leadership_event("role_reply", MASTER, gen)
        assert app.connected.wait(5)
        yield SimpleNamespace(app=app, fo=fo, cfg=cfg, base=base, dp=dp)
    finally:
        app.stop()
        fo.election.resign()


def stored(client, cfg):
    return EtcdBookStore(cfg, SimpleNamespace(client=client), ["cache1", "cache2"]).load()


def test_a_new_master_takes_the_book_and_the_rate_window_from_etcd(master):
    app = master.app
    assert app.book.refcount(H(1), "cache1") == 2 and app.book.refcount(H(1), "cache2") == 1
    assert app.book.owner(H(1)) == "cache1" and app.book.refcount(H(2), "cache2") == 3
    # 7 confirmed flow-mods (their second not over) and 5 never confirmed: 12 in the window at once
    assert app.updater._in_window() >= 12
    # ListKeys sync reconciles: cache1 holds what etcd says (no correction); cache2 holds a key
    # etcd's book lacks (one correction, written to etcd)
    app.sync_cache_node("cache1", [H(1), H(1)])
    assert app.stats()["book_sync_corrections"] == 0
    app.sync_cache_node("cache2", [H(1), H(2), H(2), H(2), H(5)])
    assert app.stats()["book_sync_corrections"] == 1 and app.book.refcount(H(5), "cache2") == 1
    assert stored(app.failover.client, app.cfg)[H(5)] == OrderedDict([("cache2", 1)])


def test_an_add_is_in_etcd_when_it_is_answered(master, client):
    out = master.app.add_cache_rules([CacheRule(H(3), "cache2"), CacheRule(H(2), "cache1")])
    assert out.accepted == 2, out
    book = stored(client, master.cfg)
    assert book[H(3)] == OrderedDict([("cache2", 1)])
    assert list(book[H(2)].items()) == [("cache2", 3), ("cache1", 1)], "cache1 added last: the rule moved to it"
    assert master.app.book.owner(H(2)) == "cache1"
    # A stored reference absorbs one add of its (hash, node): the resend of an add the old master
    # wrote to etcd but never answered (rule_updater.load_book) is not counted twice.
    assert master.app.add_cache_rules([CacheRule(H(1), "cache2")]).accepted == 1
    assert stored(client, master.cfg)[H(1)] == OrderedDict([("cache2", 1), ("cache1", 2)])
    # the rate window record followed the batches
    assert client.get(ratewin_key(master.cfg)) is not None


def test_a_deposed_masters_add_is_refused_and_rolled_back(master, client):
    before = stored(client, master.cfg)
    revoke_leader(client, master.fo.election.lease_id)
    with pytest.raises(StateNotStored, match="no longer the elected master"):
        master.app.add_cache_rules([CacheRule(H(4), "cache1")])  # known-bad: deposed
    assert master.app.book.refcount(H(4), "cache1") == 0, "the book was not rolled back"
    assert stored(client, master.cfg) == before
    assert master.app.stats()["book_store_failures"] >= 1
