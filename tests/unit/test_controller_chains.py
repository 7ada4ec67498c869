"""Ruleset 3 as reconciled state through the app (docs/design/replication.md, 2.3 and step 3 of
section 8): the rf-3 layout on a fake datapath, a new chain table repointing only the rules that
changed (one ADD each, no delete, no flush), and a restarted controller adopting a switch whose
Ruleset 3 a previous controller left halfway through a move."""
import time
from types import SimpleNamespace

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp

from exo_common.config import parse_config
from exo_controller import flows
from exo_controller.app import ExoControllerApp
from fake_switch import FakeDatapath, out_port_of


def make_app(cluster_dict, factor=3):
    cluster_dict["switch"].update(rule_update_rate=100_000.0, partition_bits=4)
    cluster_dict["replication"] = {"factor": factor}
    return ExoControllerApp(exo_config=parse_config(cluster_dict), barrier_timeout=0.5)


def connect(app, table=None):
    dp = FakeDatapath(app, table=table)
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert app.connected.wait(2)
    deadline = time.monotonic() + 2
    while app._waiters:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    return dp


def r3(table):
    """cookie index -> out port of the Ruleset 3 flows the fake switch holds."""
    return {f.cookie & flows.COOKIE_INDEX_MASK: out_port_of(f) for f in table.flows.values()
            if flows.ruleset_of_cookie(f.cookie) == flows.RULESET_PARTITIONS}


@pytest.fixture
def apps():
    made = []
    yield made
    for a in made:
        a.stop()


def test_new_chain_table_repoints_only_the_changed_rules(cluster_dict, apps):
    app = make_app(cluster_dict)
    apps.append(app)
    dp = connect(app)
    cfg = app.cfg
    ports = {d.name: d.switch_port for d in cfg.db_nodes}
    chains = cfg.chains()
    assert r3(dp.table) == {**{s: ports[c[-1]] for s, c in enumerate(chains)},
                            **{flows.WRITE_RULE | s: ports[c[0]] for s, c in enumerate(chains)}}
    dp.sent.clear()
    # db1 fails: the survivors of each chain, in order
    without = [[n for n in c if n != "db1"] for c in chains]
    out = app.apply_chains(without, wait=True, timeout=2)
    moved = sum(1 for s, c in enumerate(chains) if c[-1] == "db1") + sum(1 for c in chains if c[0] == "db1")
    assert out.confirmed and out.note == "" and out.rules_changed == moved > 0
    assert len(dp.mods()) == moved and all(m.command == ofp.OFPFC_ADD and m.priority == 100 for m in dp.mods())
    assert ports["db1"] not in r3(dp.table).values() and len(r3(dp.table)) == 32
    assert app.stats()["static_pending"] == 0 and app.stats()["ruleset2_flow_mods_sent"] == 0
    # the same table again: nothing to send; a single read-server hand-over: one flow-mod
    assert app.apply_chains(without, wait=True).rules_changed == 0
    slot = next(s for s, c in enumerate(without) if c[-1] != "db2")
    out = app.move_slot(slot, read_server="db2", wait=True, timeout=2)
    assert (out.rules_changed, out.confirmed) == (1, True) and r3(dp.table)[slot] == ports["db2"]
    assert len(dp.mods()) == moved + 1
    # known-bad input changes nothing and names what is wrong
    with pytest.raises(ValueError, match=r"chains\[2\]\[0\]: 'db9' is not a db node"):
        app.apply_chains(without[:2] + [["db9"]] + without[3:])
    with pytest.raises(ValueError, match="'db9' is not a db node"):
        app.move_slot(0, head="db9")
    assert len(dp.mods()) == moved + 1


def test_restarted_controller_finishes_an_interrupted_move_without_flushing(cluster_dict, apps):
    first = make_app(cluster_dict)
    dp = connect(first)
    chains = first.cfg.chains()
    without = [[n for n in c if n != "db1"] for c in chains]
    # the first controller dies after half of the moves reached the switch
    first.apply_chains(without[:8] + chains[8:], wait=True, timeout=2)
    half = r3(dp.table)
    first.stop()
    table = dp.table
    kept = dict(table.flows)
    second = make_app(cluster_dict)
    apps.append(second)
    dp2 = connect(second, table=table)
    assert second.stats()["switch_tables_kept"] == 1 and "switch_tables_flushed" not in second.stats()
    want = second.updater.partitions.rules()  # its book: the config's chains (etcd comes later)
    differ = {i for i in want if half[i] != want[i]}
    assert differ and not dp2.mods(ofp.OFPFC_DELETE) and not dp2.mods(ofp.OFPFC_DELETE_STRICT)
    assert {m.cookie & flows.COOKIE_INDEX_MASK for m in dp2.mods(ofp.OFPFC_ADD)} == differ
    assert len(dp2.mods(ofp.OFPFC_ADD)) == len(differ) and r3(table) == want
    # every other flow is the very flow the first controller installed
    assert all(table.flows[k] is f for k, f in kept.items() if flows.ruleset_of_cookie(f.cookie) != 3)
    # and the new controller moves on from there
    assert second.apply_chains(without, wait=True, timeout=2).confirmed
    assert r3(table) == second.updater.partitions.rules() == second.updater.partitions_installed
