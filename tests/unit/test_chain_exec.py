"""The chain executor (exo_controller.chain_exec) driven step by step against in-memory db nodes
that follow the SetChains contract (refuse another incarnation or an older version): adoption of
a fresh cluster and of a live table (the cache nodes get its heads), a failover (cache nodes
learn the new heads, then are reset, before the push naming the new head; rules after it), a
cache node that comes back getting the heads, a restart rejoining as a learner and its hand-over, `exo node add|remove`, and the
known-bad: a removal that would leave a slot with no node is refused and changes nothing."""
import types

import pytest

from exo_controller import chain_plan as cp
from exo_controller.chain_exec import ChainExecutor
from exo_controller.db_liveness import DOWN, UP
from exoproto import control_pb2 as pb


class FakeDb:
    def __init__(self, name, inc):
        self.name, self.inc, self.alive = name, inc, True
        self.table = pb.ChainTableMsg()
        self.pending = 0
        self.caught_up = []


class FakePeers:
    """In-memory db and cache nodes; `log` records every call in order."""

    def __init__(self, names):
        self.db = {n: FakeDb(n, 100 + i) for i, n in enumerate(names)}
        self.log = []
        self.heads = {}  # cache node -> (version, heads) it holds, as exo-cache-node keeps them
        self.cache_dead = set()
        self.cache_old_build = set()

    def chain_status(self, node, timeout):
        d = self.db[node]
        if not d.alive:
            raise TimeoutError(f"{node} does not answer")
        return pb.ChainStatusReply(node=node, incarnation=d.inc, table=d.table, pending=d.pending,
                                   caught_up=d.caught_up)

    def set_chains(self, node, table, incarnation, timeout):
        d = self.db[node]
        if not d.alive:
            raise TimeoutError(f"{node} does not answer")
        if incarnation != d.inc or table.version < d.table.version:
            raise RuntimeError("FAILED_PRECONDITION")
        d.table = cp.to_msg(table, pb)
        self.log.append(("push", node, table.version))
        return table.version

    def reset(self, node, timeout):
        self.log.append(("reset", node))
        return 0

    def set_heads(self, node, version, heads, timeout):
        if node in self.cache_dead:
            raise TimeoutError(f"{node} does not answer")
        if node in self.cache_old_build:
            raise RuntimeError("UNIMPLEMENTED: unknown method SetHeads")
        held = self.heads.get(node, (0, ()))
        if version < held[0]:
            raise RuntimeError("FAILED_PRECONDITION: older")
        self.heads[node] = (version, tuple(heads))
        self.log.append(("heads", node, version))
        return version


class FakeApp:
    def __init__(self, log):
        self.log, self.monitor = log, None

    def accepts_rule_changes(self):
        return True

    def move_slot(self, slot, read_server=None, head=None, wait=False, timeout=None):
        self.log.append(("move", slot, read_server, head))

    def wait_chains(self, timeout):
        return True


def cluster(names=("d0", "d1", "d2"), members=None, rf=3, bits=2, rate=50.0):
    members = set(names) if members is None else set(members)
    dbs = [types.SimpleNamespace(name=n, switch_port=3 + i) for i, n in enumerate(names)]
    chains = [[names[(s + k) % len(members)] for k in range(rf)] for s in range(1 << bits)]
    return types.SimpleNamespace(
        replication=types.SimpleNamespace(factor=rf, db_heartbeat_misses=2),
        switch=types.SimpleNamespace(rule_update_rate=rate),
        db_nodes=dbs, cache_nodes=[types.SimpleNamespace(name="c1"), types.SimpleNamespace(name="c2")],
        members=lambda: [n for n in names if n in members], chains=lambda: chains)


class Clock:
    """The executor's clock; its waits (`_stop.wait`) advance it instead of sleeping."""
    t = 0.0

    def __call__(self):
        return self.t

    def wait(self, seconds=None):
        self.t += seconds or 0.0
        return False

    def is_set(self):
        return False


def make(**kw):
    cfg = cluster(**kw)
    peers = FakePeers([d.name for d in cfg.db_nodes])
    clock = Clock()
    ex = ChainExecutor(cfg, FakeApp(peers.log), peers, clock)
    ex._stop = clock
    return ex, peers, clock


def beat(ex, clock, rounds=1):
    """Heartbeat rounds (each 0.1 s), then every queued event handled, then housekeeping."""
    for _ in range(rounds):
        clock.t += 0.1
        for n in ex.db_nodes:
            ex._heartbeat(n)
    while not ex._events.empty():
        item = ex._events.get_nowait()
        if isinstance(item, cp.ChainTable):  # never queued; keeps the type checker honest
            continue
        (ex._on_event if hasattr(item, "incarnation") else ex._on_op)(item)
    ex._housekeeping()


def drain(ex):
    """Wait for the background SetHeads pushes (the executor's pool)."""
    import time
    for _ in range(200):
        with ex._lock:
            if not ex._heads_inflight:
                return
        time.sleep(0.005)
    raise AssertionError("SetHeads still in flight")


def test_fresh_cluster_adopts_the_config_chains_and_pushes_them():
    ex, peers, clock = make()
    ex._adopt()
    drain(ex)
    assert peers.heads == {c: (1, ("d0", "d1", "d2", "d0")) for c in ("c1", "c2")}
    assert ex.table.version == 1 and ex.table.slots[0] == cp.SlotChain(("d0", "d1", "d2"), (), "d2")
    assert ex.table.members == {"d0": 100, "d1": 101, "d2": 102}
    assert sorted(e for e in peers.log if e[0] == "push") == [("push", n, 1) for n in ("d0", "d1", "d2")]
    assert ("move", 0, "d2", "d0") in peers.log
    beat(ex, clock)  # first answers: nothing to change
    assert ex.table.version == 1 and ex.metrics()["chain_table_version"] == 1


def test_a_new_master_adopts_the_highest_version_and_takes_out_a_restarted_member():
    ex, peers, clock = make()
    ex._adopt()
    v2 = cp.node_down(ex.table, "d2").table
    v2 = cp.ChainTable(2, v2.slots, {**v2.members})
    for n in ("d0", "d1"):
        peers.db[n].table = cp.to_msg(v2, pb)
    peers.db["d1"].inc = 555  # restarted since
    ex2 = ChainExecutor(cluster(), FakeApp(peers.log), peers, clock)
    ex2._stop = clock
    ex2._adopt()
    assert ex2.table.version == 3 and "d1" not in ex2.table.members
    assert all(s.nodes == ("d0",) for s in ex2.table.slots)


def test_failover_resets_caches_before_pushing_new_heads_and_moves_rules_after():
    ex, peers, clock = make()
    ex._adopt()
    beat(ex, clock)
    peers.log.clear()
    peers.db["d0"].alive = False
    beat(ex, clock, rounds=2)  # db_heartbeat_misses 2
    assert ex.liveness.state("d0") == DOWN and "d0" not in ex.table.members
    assert all("d0" not in s.names() for s in ex.table.slots)
    first_push = next(i for i, e in enumerate(peers.log) if e[0] == "push")
    first_reset = next(i for i, e in enumerate(peers.log) if e[0] == "reset")
    first_move = next(i for i, e in enumerate(peers.log) if e[0] == "move")
    # both cache nodes hold the new heads before either is reset, and before the new head acts
    last_heads = max(i for i, e in enumerate(peers.log) if e[:1] == ("heads",) and e[2] == 2)
    assert {e[1] for e in peers.log if e[0] == "heads" and e[2] == 2} == {"c1", "c2"}
    assert last_heads < first_reset < first_push < first_move
    assert peers.heads["c1"] == (2, tuple(s.head for s in ex.table.slots)) and peers.heads["c1"][1][0] == "d1"
    assert ("push", "d0", 2) not in peers.log  # a dead node is not waited for
    m = ex.metrics()
    assert m["db_nodes_down"] == 1 and m["chain_reconfigurations"] == 1 and m["last_failover_s"] == pytest.approx(0.1)

    # it comes back as a new process: a learner of every slot, then hand-over per slot
    peers.db["d0"].alive, peers.db["d0"].inc = True, 900
    peers.db["d0"].table = pb.ChainTableMsg()
    beat(ex, clock)
    assert ex.liveness.state("d0") == UP and ex.table.members["d0"] == 900
    assert all(s.learners == ("d0",) for s in ex.table.slots)
    assert ex.metrics()["learners_catching_up"] == 4
    peers.db["d0"].caught_up = [0, 1]
    peers.log.clear()
    beat(ex, clock)
    versions = [e[2] for e in peers.log if e[0] == "push" and e[1] == "d0"]
    assert len(versions) == 2  # read_server "" first, then d0 reads
    assert ex.table.slots[0].nodes[-1] == "d0" and ex.table.slots[0].read_server == "d0"
    assert ex.table.slots[2].learners == ("d0",)
    assert ("move", 0, "d0", None) in peers.log and ex.metrics()["chain_handovers"] == 2


def test_a_learner_of_many_slots_is_handed_them_in_groups_the_switch_moves_quickly():
    """At R = 20 a hand-over takes 10 slots (their read rules move in 0.5 s), so no slot stays
    BUSY for the 3.2 s 64 moves would take; known-bad: one hand-over of all 64."""
    ex, peers, clock = make(bits=6, rate=20.0)
    assert ex.handover_group == cp.handover_group(20.0) == 10
    ex._adopt()
    beat(ex, clock)
    peers.db["d0"].alive = False
    beat(ex, clock, rounds=3)
    peers.db["d0"].alive, peers.db["d0"].inc = True, 900
    peers.db["d0"].table = pb.ChainTableMsg()
    beat(ex, clock)
    assert all(s.learners == ("d0",) for s in ex.table.slots)
    peers.db["d0"].caught_up = list(range(64))
    reading = []
    for _ in range(7):
        peers.log.clear()
        beat(ex, clock)
        moved = [e[1] for e in peers.log if e[0] == "move" and e[2] == "d0"]
        assert len(moved) <= 10
        reading.append(sum(s.read_server == "d0" for s in ex.table.slots))
    assert reading == [10, 20, 30, 40, 50, 60, 64]


def test_node_remove_and_add_through_requests():
    ex, peers, clock = make(names=("d0", "d1", "d2", "d3"), members=("d0", "d1", "d2"))
    ex._adopt()
    beat(ex, clock)
    assert "d3" not in ex.table.members  # a spare stays out until added
    assert [n["member"] for n in ex.nodes()] == [True, True, True, False]

    from exo_controller.chain_exec import _Op
    from concurrent.futures import Future
    op = _Op("add", "d3", Future())
    ex._on_op(op)
    assert op.done.result().members["d3"] == 103
    op = _Op("remove", "d0", Future())
    ex._on_op(op)
    t = op.done.result()
    assert "d0" not in t.members and all("d0" not in s.names() for s in t.slots)
    beat(ex, clock)  # d0 still answers, but it is no member any more: it stays out
    assert "d0" not in ex.table.members


def test_a_removal_that_leaves_a_slot_empty_is_refused_and_changes_nothing():
    """Known-bad: removing the last node of a chain."""
    ex, peers, clock = make(rf=1)
    ex._adopt()
    beat(ex, clock)
    before = ex.table
    from exo_controller.chain_exec import _Op
    from concurrent.futures import Future
    op = _Op("remove", "d0", Future())
    ex._on_op(op)
    with pytest.raises(cp.PlanError, match=r"slot \d+: 'd0' is the last node"):
        op.done.result()
    assert ex.table == before and "d0" in ex.membership


def test_a_hand_over_waits_for_pending_writes_and_undoes_itself_when_they_never_drain():
    ex, peers, clock = make(names=("d0", "d1", "d2", "d3"), members=("d0", "d1", "d2"))
    ex._adopt()
    beat(ex, clock)
    peers.db["d2"].alive = False
    beat(ex, clock, rounds=2)
    from exo_controller.chain_exec import _Op
    from concurrent.futures import Future
    ex._on_op(_Op("add", "d3", Future()))
    learner_slots = [i for i, s in enumerate(ex.table.slots) if "d3" in s.learners]
    assert learner_slots
    reader = ex.table.slots[learner_slots[0]].read_server
    peers.db[reader].pending = 3  # never drains
    peers.db["d3"].caught_up = learner_slots[:1]
    beat(ex, clock)
    assert ex.metrics()["chain_plans_aborted"] == 1
    assert ex.table.slots[learner_slots[0]].read_server == ""  # stopped halfway
    beat(ex, clock)  # restore_readers; no new try before the back-off
    assert ex.table.slots[learner_slots[0]].read_server == reader
    peers.db[reader].pending = 0
    clock.t += 5.0
    beat(ex, clock)
    assert ex.table.slots[learner_slots[0]].read_server == "d3"


def test_membership_rpcs_and_the_cli_table(tmp_path):
    """Controller.AddNode / RemoveNode / ListNodes over a real (plaintext, in-process) gRPC server
    with the executor's threads running; a refused removal comes back FAILED_PRECONDITION naming
    the slot; `exo node list`'s table."""
    from concurrent import futures

    import grpc
    from exo_cli.node import render
    from exo_controller.grpc_service import ControllerServicer
    from exoproto import control_pb2_grpc

    cfg = cluster(names=("d0", "d1", "d2", "d3"), members=("d0", "d1"), rf=2)
    peers = FakePeers([d.name for d in cfg.db_nodes])
    app = FakeApp(peers.log)
    app.chains = ChainExecutor(cfg, app, peers).start()
    app.count = lambda *a: None
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    control_pb2_grpc.add_ControllerServicer_to_server(ControllerServicer(app), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        stub = control_pb2_grpc.ControllerStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        import time
        deadline = time.monotonic() + 10
        while (app.chains.table is None or any(app.chains.liveness.state(n) != UP for n in ("d2", "d3"))) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        before = stub.ListNodes(pb.StatsRequest(), timeout=5)
        assert [(n.name, n.member) for n in before.nodes] == [("d0", True), ("d1", True), ("d2", False), ("d3", False)]
        v1 = stub.RemoveNode(pb.NodeRequest(name="d0"), timeout=5).version
        assert v1 > before.version
        with pytest.raises(grpc.RpcError) as exc:  # known-bad: d1 is every slot's last node now
            stub.RemoveNode(pb.NodeRequest(name="d1"), timeout=5)
        assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "is the last node of its chain" in exc.value.details() and "slot 0" in exc.value.details()
        v = stub.AddNode(pb.NodeRequest(name="d2"), timeout=5).version
        assert v > v1
        with pytest.raises(grpc.RpcError) as exc:
            stub.AddNode(pb.NodeRequest(name="nope"), timeout=5)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "not a db node" in exc.value.details()
        after = stub.ListNodes(pb.StatsRequest(), timeout=5)
        d2 = next(n for n in after.nodes if n.name == "d2")
        assert d2.member and d2.state == "up" and d2.incarnation == 102
        text = "\n".join(render(after))
        assert text.startswith(f"chain table v{after.version}") and "d2    yes" in text
    finally:
        server.stop(0)
        app.chains.stop()


def test_adoption_waits_for_the_members_then_takes_out_one_that_never_answers():
    ex, peers, clock = make()
    peers.db["d2"].alive = False
    ex._adopt()
    assert clock.t >= 5.0  # ADOPT_GRACE_S after the first answers
    assert "d2" not in ex.table.members and all("d2" not in s.names() for s in ex.table.slots)
    assert ("push", "d2", ex.table.version) not in peers.log


def test_a_deposed_master_stops_its_plan_before_the_next_step():
    ex, peers, clock = make()
    ex._adopt()
    beat(ex, clock)
    drain(ex)  # the adoption's background SetHeads, which would otherwise log after the clear
    peers.log.clear()
    ex.app.accepts_rule_changes = lambda: False
    assert not ex._execute(cp.node_down(ex.table, "d0"))
    assert peers.log == [] and ex.table.version == 1 and ex.metrics()["chain_plans_aborted"] == 1


def test_a_joining_learner_gets_the_table_after_the_nodes_it_copies_from():
    ex, peers, clock = make()
    ex._adopt()
    beat(ex, clock)
    peers.db["d0"].alive = False
    beat(ex, clock, rounds=2)
    peers.db["d0"].alive, peers.db["d0"].inc = True, 901
    peers.db["d0"].table = pb.ChainTableMsg()
    peers.log.clear()
    t = clock.t
    beat(ex, clock)
    pushes = [e for e in peers.log if e[0] == "push"]
    assert pushes[-1][1] == "d0" and {e[1] for e in pushes[:-1]} == {"d1", "d2"}
    assert clock.t - t >= cp.LEARNER_SETTLE_S


class FakeStore:
    """chain_store.EtcdChainStore's interface, in memory."""

    def __init__(self, table=None, members=None):
        self.table, self.members, self.saves = table, members, 0

    def load(self):
        return self.table, self.members

    def save(self, table, members):
        self.table, self.members = table, set(members)
        self.saves += 1
        return True


def test_with_etcd_a_new_master_keeps_a_removed_node_out_and_saves_every_push():
    """controller.etcd: membership and the table survive a failover (chain_store.py). Known-bad
    without the store: a new master takes the config's members again and d2 would be back."""
    ex, peers, clock = make()
    store = FakeStore()
    ex._store = store
    ex.app.failover = object()  # an election runs: the store is used
    ex._adopt()
    assert store.saves == 1 and store.table.version == 1
    ex._on_op(types.SimpleNamespace(kind="remove", node="d2", done=__import__("concurrent.futures").futures.Future()))
    assert "d2" not in ex.membership and store.members == {"d0", "d1"}
    assert store.table.version == ex.table.version > 1
    for with_store in (False, True):
        ex2 = ChainExecutor(cluster(), FakeApp(peers.log), peers, clock)
        ex2._stop = clock
        if with_store:
            ex2._store, ex2.app.failover = store, object()
        ex2._adopt()
        assert ("d2" in ex2.membership) is (not with_store)


def test_a_cache_node_that_was_down_gets_the_current_heads_when_it_comes_back():
    ex, peers, clock = make()
    states = {"c1": "up", "c2": "up"}
    ex.app.monitor = types.SimpleNamespace(states=lambda: dict(states))
    ex._adopt()
    drain(ex)
    beat(ex, clock)
    states["c2"] = "down"
    peers.cache_dead.add("c2")
    peers.db["d0"].alive = False
    beat(ex, clock, rounds=2)  # failover while c2 is down: it is not waited for
    drain(ex)
    assert peers.heads["c1"][0] == 2 and peers.heads["c2"][0] == 1
    # c2 restarted: the config's heads again, then it answers (REJOINING)
    peers.cache_dead.discard("c2")
    peers.heads.pop("c2")
    states["c2"] = "rejoining"
    beat(ex, clock)
    drain(ex)
    assert peers.heads["c2"] == peers.heads["c1"] == (2, tuple(s.head for s in ex.table.slots))
    # a cache node that restarted unnoticed (never DOWN) gets them at the next refresh
    peers.heads.pop("c1")
    clock.t += 5.0  # HEADS_REFRESH_S
    beat(ex, clock)
    drain(ex)
    assert peers.heads["c1"][0] == 2


def test_a_cache_node_without_set_heads_does_not_hold_up_a_failover():
    """A build without SetHeads (UNIMPLEMENTED) cannot learn heads: no retries for it, while a
    cache node that does not answer is retried (RESET_RETRY_S) before the reset and the push."""
    ex, peers, clock = make()
    peers.cache_old_build.add("c2")
    ex._adopt()
    drain(ex)
    beat(ex, clock)
    peers.db["d0"].alive = False
    beat(ex, clock, rounds=2)
    assert ex.last_failover_s == pytest.approx(0.1) and peers.heads["c1"][0] == 2
    peers.db["d0"].alive, peers.cache_dead = True, {"c1"}
    peers.db["d0"].inc, peers.db["d0"].table = 901, pb.ChainTableMsg()
    beat(ex, clock)  # d0 joins as a learner: no head changes, no SetHeads
    peers.db["d1"].alive = False
    beat(ex, clock, rounds=2)  # d1 heads slots 0 and 1 now: c1 is retried, then the plan goes on
    assert ex.last_failover_s >= 2.0 and "d1" not in ex.table.members
