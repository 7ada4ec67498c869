"""The chain table and membership in etcd (controller/exo_controller/chain_store.py), against a
real etcd: a round trip through the master's guarded write, a deposed master's write refused
(known-bad), and values that do not parse named by their key."""
import types
import uuid

import pytest

from etcd_fixtures import client, etcd_plain  # noqa: F401  (fixtures)
from exo_common.etcd import Election, revoke_leader
from exo_controller.failover import election_prefix
from exo_controller import chain_plan as cp
from exo_controller.chain_store import EtcdChainStore, decode, encode

TTL = 1


def table(version=7):
    slots = (cp.SlotChain(("db0", "db1", "db2"), (), "db2"), cp.SlotChain(("db1", "db2"), ("db3",), "db2"))
    return cp.ChainTable(version, slots, {"db0": 11, "db1": 12, "db2": 13, "db3": 14})


def store_for(client, name):
    cfg = types.SimpleNamespace(cluster=types.SimpleNamespace(name=f"t-{uuid.uuid4().hex[:8]}"))
    election = Election(client, election_prefix(cfg), name, TTL)
    election.campaign(timeout_s=5)
    return cfg, EtcdChainStore(cfg, types.SimpleNamespace(client=client, election=election)), election


def test_the_masters_table_and_members_come_back(client):
    _, store, election = store_for(client, "c1")
    assert store.load() == (None, None)  # a fresh cluster: nothing stored yet
    assert store.save(table(), {"db0", "db1", "db2"})
    got, members = store.load()
    assert got == table() and members == {"db0", "db1", "db2"}
    election.resign()


def test_a_deposed_masters_write_is_refused_and_changes_nothing(client):
    cfg, store, election = store_for(client, "c1")
    assert store.save(table(7), {"db0", "db1", "db2"})
    revoke_leader(client, election.lease_id)
    assert not store.save(table(8), {"db0"})  # known-bad: a master that lost its election
    got, members = store.load()
    assert got.version == 7 and members == {"db0", "db1", "db2"}


def test_values_that_do_not_parse_name_their_key():
    chains, members = encode(table(), {"db1"})
    assert decode(chains, members) == (table(), {"db1"})
    with pytest.raises(ValueError, match="etcd key members"):
        decode(chains, b"{not json")
    with pytest.raises(ValueError, match="etcd key members"):
        decode(chains, b'{"db1": 1}')
    with pytest.raises(ValueError, match="etcd key chains"):
        decode(b"\xff\xff\xff", members)
