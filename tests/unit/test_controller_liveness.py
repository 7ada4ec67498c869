"""Cache node liveness and controller restart, through the thin layers: ClusterMonitor (fake gRPC
peers, fake clock, RPCs run inline) and ExoControllerApp with a monitor (real threads, fake
datapath with a flow table that survives the controller, fake peers)."""
import threading
import time
from concurrent import futures
from types import SimpleNamespace

import grpc
import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp

from exo_controller.app import ExoControllerApp
from exo_common import tls
from exo_common.config import parse_config
from exo_common.pki import init_pki
from exo_controller.flows import CacheRule, make_cookie, rule_hash
from exo_controller.grpc_service import ControllerServicer
from exo_controller.liveness import DOWN, REJOINING, UP
from exo_controller.monitor import ClusterMonitor, GrpcPeers
from exoproto import control_pb2, control_pb2_grpc
from exoskeleton.keyhash import key_hash
from fake_switch import FakeDatapath, H, wait_for  # H(i): key hash number i (i << flows.IP_SHIFT)


class Unavailable(Exception):
    pass


class FakePeers:
    """Cache and db nodes as the monitor sees them. Every call is logged as (what, node, ...)."""

    def __init__(self, cfg):
        self.alive = {c.name: True for c in cfg.cache_nodes}
        self.keys = {c.name: [] for c in cfg.cache_nodes}
        self.list_fails = {c.name: 0 for c in cfg.cache_nodes}    # next N ListKeys fail
        self.reset_fails = {c.name: 0 for c in cfg.cache_nodes}
        self.forget_fails = {d.name: 0 for d in cfg.db_nodes}      # next N ForgetCacheNode fail
        self.on_forget = None
        self.calls = []
        self.lock = threading.Lock()

    def _log(self, *call):
        with self.lock:
            self.calls.append(call)

    def called(self, what, node=None):
        with self.lock:
            return [c for c in self.calls if c[0] == what and (node is None or c[1] == node)]

    def cache_stats(self, node, timeout):
        self._log("stats", node, timeout)
        if not self.alive[node]:
            raise Unavailable(f"{node} is down")

    def list_keys(self, node, timeout):
        self._log("list_keys", node)
        if not self.alive[node] or self.list_fails[node] > 0:
            self.list_fails[node] -= 1
            raise Unavailable("no ListKeys")
        return list(self.keys[node])

    def reset(self, node, timeout):
        self._log("reset", node)
        if not self.alive[node] or self.reset_fails[node] > 0:
            self.reset_fails[node] -= 1
            raise Unavailable("no Reset")
        return 7

    def forget(self, db, cache_node, timeout):
        self._log("forget", cache_node, db)
        if self.on_forget is not None:
            self.on_forget(db, cache_node)
        if self.forget_fails[db] > 0:
            self.forget_fails[db] -= 1
            raise Unavailable(f"{db} is down")
        return 3, 1

    def close(self):
        pass


class InlineExecutor:
    def submit(self, fn, *args):
        fn(*args)

    def shutdown(self, **kw):
        pass


class FakeApp:
    def __init__(self):
        self.calls = []

    def withdraw_cache_node(self, node):
        self.calls.append(("withdraw", node))

    def rejoin_cache_node(self, node):
        self.calls.append(("rejoin", node))

    def sync_cache_node(self, node, hashes):
        self.calls.append(("sync", node, sorted(hashes)))
        return len(hashes)


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


# ---------------------------------------------------------------- ClusterMonitor, fake clock

@pytest.fixture
def mon(cfg):
    clock, peers, app = Clock(), FakePeers(cfg), FakeApp()
    peers.keys["cache1"] = [b"alpha", b"beta"]
    m = ClusterMonitor(cfg, app, peers, clock=clock, executor=InlineExecutor())
    return SimpleNamespace(m=m, clock=clock, peers=peers, app=app)


def test_monitor_syncs_then_withdraws_forgets_resets_and_rejoins(mon):
    m, clock, peers, app = mon.m, mon.clock, mon.peers, mon.app
    m.poll()
    assert [c[2] for c in peers.called("stats")] == [0.1, 0.1]  # deadline = heartbeat interval
    assert app.calls == [("sync", "cache1", sorted([key_hash(b"alpha"), key_hash(b"beta")])), ("sync", "cache2", [])]
    peers.alive["cache1"] = False
    for _ in range(2):
        clock.t += 0.1
        m.poll()
    assert m.states()["cache1"] == UP and ("withdraw", "cache1") not in app.calls
    clock.t += 0.1
    m.poll()
    assert m.states()["cache1"] == DOWN and app.calls[-1] == ("withdraw", "cache1")
    assert not peers.called("forget")  # not before the switch confirmed the withdrawal
    peers.forget_fails["db2"] = 2
    clock.t += 0.05
    m.withdrawn("cache1")
    assert [c[2] for c in peers.called("forget")] == ["db1", "db2", "db3"]
    assert m.metrics()["withdraw_s_last"] == pytest.approx(0.05)
    clock.t += 0.05
    m.run_due()
    assert len(peers.called("forget")) == 3  # the retry waits 100 ms
    clock.t += 0.06
    m.run_due()
    assert peers.called("forget")[-1] == ("forget", "cache1", "db2")
    peers.alive["cache1"] = True
    m.poll()
    assert m.states()["cache1"] == REJOINING and not peers.called("reset")  # db2 has not forgotten it
    clock.t += 0.11
    m.run_due()
    assert peers.called("reset") == [("reset", "cache1")]
    assert app.calls[-1] == ("rejoin", "cache1") and m.states()["cache1"] == UP
    metrics = m.metrics()
    assert (metrics["cache_node_withdrawals"], metrics["cache_node_rejoins"], metrics["cache_nodes_down"]) == (1, 1, 0)
    assert metrics["cache_node_forgets"] == 3 and metrics["cache_node_forget_failures"] == 2
    assert not peers.called("list_keys", "cache1")[1:]  # a rejoined node is empty: no second sync


def test_monitor_port_down_and_failed_reset(mon):
    m, clock, peers, app = mon.m, mon.clock, mon.peers, mon.app
    m.port_status(12, True, "link down")
    assert app.calls == [("withdraw", "cache2")]
    m.withdrawn("cache2")
    m.poll()  # answers, but the link is down
    assert m.states()["cache2"] == DOWN
    m.port_status(12, False, "up")
    peers.reset_fails["cache2"] = 1
    m.poll()
    assert m.states()["cache2"] == REJOINING and len(peers.called("reset")) == 1
    m.poll()
    assert m.states()["cache2"] == UP and len(peers.called("reset")) == 2
    assert m.metrics()["cache_node_reset_failures"] == 1


class _Cache(control_pb2_grpc.CacheNodeServicer):
    def __init__(self):
        self.resets = 0

    def Stats(self, request, context):
        return control_pb2.StatsReply(node="cache1")

    def ListKeys(self, request, context):
        return control_pb2.CachedKeysReply(keys=[b"alpha", b"beta"])

    def Reset(self, request, context):
        self.resets += 1
        return control_pb2.KeysReply(done=2)


class _Db(control_pb2_grpc.DbNodeServicer):
    def __init__(self):
        self.forgot = []

    def ForgetCacheNode(self, request, context):
        self.forgot.append(request.cache_node)
        return control_pb2.ForgetCacheNodeReply(keys_dropped=5, txns_dropped=1)


def _serve(address, cache=None, db=None, cfg=None, name=None):
    """A node's gRPC server, with mutual TLS as `name` (exo_common/tls.py)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    if cache is not None:
        control_pb2_grpc.add_CacheNodeServicer_to_server(cache, server)
    if db is not None:
        control_pb2_grpc.add_DbNodeServicer_to_server(db, server)
    tls.add_port(server, cfg, name, address)
    server.start()
    return server


def test_grpc_peers_over_real_channels_and_reconnect_after_restart(cluster_dict, tmp_path):
    """Over mutual TLS, as the controller runs them (GrpcPeers calls as `controller`)."""
    cluster_dict["cache_nodes"][0]["grpc"] = f"unix:{tmp_path}/cache1.sock"
    cluster_dict["db_nodes"][0]["grpc"] = f"unix:{tmp_path}/db1.sock"
    cluster_dict["security"] = {"cert_dir": str(tmp_path / "pki")}
    cfg = parse_config(cluster_dict)
    init_pki(cfg.roles(), cfg.cluster.name, cfg.security.cert_dir)
    peers = GrpcPeers(cfg)
    with pytest.raises(grpc.RpcError):
        peers.cache_stats("cache1", 0.1)  # nothing listening: a missed heartbeat, at once
    cache, db = _Cache(), _Db()
    cserver = _serve(f"unix:{tmp_path}/cache1.sock", cache=cache, cfg=cfg, name="cache1")
    dserver = _serve(f"unix:{tmp_path}/db1.sock", db=db, cfg=cfg, name="db1")
    try:
        deadline = time.monotonic() + 2.0  # the channel reconnects within its (short) backoff
        while True:
            try:
                peers.cache_stats("cache1", 0.1)
                break
            except grpc.RpcError:
                assert time.monotonic() < deadline, "no reconnect within 2 s"
                time.sleep(0.02)
        assert peers.list_keys("cache1", 1.0) == [b"alpha", b"beta"]
        assert peers.reset("cache1", 1.0) == 2 and cache.resets == 1
        assert peers.forget("db1", "cache1", 1.0) == (5, 1) and db.forgot == ["cache1"]
        cserver.stop(None).wait()  # the cache node dies ...
        with pytest.raises(grpc.RpcError):
            peers.cache_stats("cache1", 0.1)
        cserver = _serve(f"unix:{tmp_path}/cache1.sock", cache=cache, cfg=cfg, name="cache1")  # ... and restarts
        t0 = time.monotonic()
        while True:
            try:
                peers.cache_stats("cache1", 0.1)
                break
            except grpc.RpcError:
                assert time.monotonic() - t0 < 2.0, "no reconnect within 2 s of the restart"
                time.sleep(0.02)
    finally:
        cserver.stop(None)
        dserver.stop(None)
        peers.close()


# ---------------------------------------------------------------- the app with a monitor

def make_app(cluster_dict, peers_box, table=None, interval_ms=20, **controller):
    cluster_dict["switch"]["rule_update_rate"] = 100_000.0
    cluster_dict["controller"].update(heartbeat_interval_ms=interval_ms, **controller)
    cfg = parse_config(cluster_dict)
    peers_box.setdefault("peers", FakePeers(cfg))
    return ExoControllerApp(exo_config=cfg, barrier_timeout=0.5,
                            monitor_factory=lambda app: ClusterMonitor(cfg, app, peers_box["peers"]))


def connect(app, table=None):
    dp = FakeDatapath(app, table=table)
    app._switch_features(SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert app.connected.wait(2)
    return dp


@pytest.fixture
def apps():
    made = []
    yield made
    for a in made:
        a.stop()


def test_dead_cache_node_is_withdrawn_forgotten_rejected_then_rejoins(cluster_dict, apps):
    box = {}
    app = make_app(cluster_dict, box)
    apps.append(app)
    peers = box["peers"]
    dp = connect(app)
    wait_for(lambda: app.updater.synced)
    out = app.add_cache_rules([CacheRule(H(1), "cache1"), CacheRule(H(2), "cache1"), CacheRule(H(2), "cache1"),
                               CacheRule(H(3), "cache2")])
    assert (out.accepted, out.rejected) == (4, 0)
    assert dp.table.ruleset2() == {H(1): 11, H(2): 11, H(3): 12}
    seen_at_forget = []
    peers.on_forget = lambda db, node: seen_at_forget.append(dict(dp.table.ruleset2()))
    peers.forget_fails["db3"] = 2
    dp.sent.clear()
    t0 = time.monotonic()
    peers.alive["cache1"] = False
    wait_for(lambda: app.stats()["cache_node_forgets"] == 3)
    assert time.monotonic() - t0 < 1.5
    (withdraw,) = dp.mods(ofp.OFPFC_DELETE)
    assert (withdraw.table_id, withdraw.out_port, withdraw.cookie, withdraw.cookie_mask) == (
        1, 11, 0xE2 << 56, 0xFF << 56)  # the forwarding table (flows.FORWARD_TABLE)
    assert not dp.mods(ofp.OFPFC_DELETE_STRICT)  # one flow-mod, not one per rule
    assert dp.table.ruleset2() == app.updater.installed == {H(3): 12}
    assert len(app.book) == 1 and app.book.refcount(H(2), "cache1") == 0
    assert all(11 not in seen.values() for seen in seen_at_forget)  # forget only after the barrier
    assert [c[2] for c in peers.called("forget", "cache1")][:3] == ["db1", "db2", "db3"]
    stats = app.stats()
    assert stats["cache_nodes_down"] == 1 and stats["cache_node_state cache1"] == 1
    assert stats["cache_node_state cache2"] == 0 and stats["cache_node_withdrawals"] == 1
    assert 0 < stats["withdraw_s_last"] < 1.0 and stats["withdraw_ms_last"] == pytest.approx(
        stats["withdraw_s_last"] * 1000, abs=0.01)

    svc = ControllerServicer(app)
    ctx = SimpleNamespace(time_remaining=lambda: 5.0)
    rep = svc.AddCacheRules(control_pb2.CacheRulesRequest(rules=[control_pb2.CacheRule(key_hash=H(9), cache_node="cache1")]), ctx)
    assert (rep.accepted, rep.rejected) == (0, 1)
    assert "cache node cache1 is out of the cluster until it rejoins" in rep.error
    rep = svc.RemoveCacheRules(control_pb2.CacheRulesRequest(rules=[control_pb2.CacheRule(key_hash=H(1), cache_node="cache1")]), ctx)
    assert (rep.accepted, rep.rejected, rep.error) == (1, 0, "")
    rep = svc.AddCacheRules(control_pb2.CacheRulesRequest(rules=[control_pb2.CacheRule(key_hash=H(9), cache_node="cache2")]), ctx)
    assert (rep.accepted, rep.rejected) == (1, 0)  # the other cache node is unaffected

    peers.alive["cache1"] = True
    wait_for(lambda: app.stats()["cache_node_rejoins"] == 1)
    forget_times = [i for i, c in enumerate(peers.calls) if c[0] == "forget" and c[1] == "cache1"]
    reset_times = [i for i, c in enumerate(peers.calls) if c[0] == "reset"]
    assert reset_times and min(reset_times) > max(forget_times)  # reset after every forget
    assert app.stats()["cache_nodes_down"] == 0
    out = app.add_cache_rules([CacheRule(H(1), "cache1")])
    assert (out.accepted, out.rejected) == (1, 0) and dp.table.ruleset2() == {H(1): 11, H(3): 12, H(9): 12}


def test_port_link_down_declares_down_without_waiting_for_heartbeats(cluster_dict, apps):
    box = {}
    app = make_app(cluster_dict, box, interval_ms=5000)  # heartbeats would take 15 s
    apps.append(app)
    dp = connect(app)
    app.add_cache_rules([CacheRule(H(4), "cache2"), CacheRule(H(5), "cache1")])
    dp.sent.clear()
    ev = SimpleNamespace(msg=SimpleNamespace(reason=ofp.OFPPR_MODIFY, desc=SimpleNamespace(
        port_no=12, name=b"exo-s1-eth12", state=ofp.OFPPS_LINK_DOWN, config=0)))
    app._port_status(ev)
    wait_for(lambda: app.stats()["cache_node_withdrawals"] == 1)
    assert [m.out_port for m in dp.mods(ofp.OFPFC_DELETE)] == [12]
    assert dp.table.ruleset2() == {H(5): 11}
    assert app.counters["port_modified"] == 1
    # a port that is no cache node's changes nothing
    app._port_status(SimpleNamespace(msg=SimpleNamespace(reason=ofp.OFPPR_DELETE, desc=SimpleNamespace(
        port_no=21, name=b"exo-s1-eth21", state=0, config=0))))
    assert app.stats()["cache_nodes_down"] == 1


def _program(cluster_dict, rules):
    """A switch programmed by an earlier controller (no monitor), then left alone."""
    cd = {**cluster_dict, "switch": {**cluster_dict["switch"], "rule_update_rate": 100_000.0}}
    first = ExoControllerApp(exo_config=parse_config(cd), barrier_timeout=0.5)
    try:
        dp = connect(first)
        first.add_cache_rules(rules)
        return dp.table
    finally:
        first.stop()


def test_restarted_controller_keeps_the_switch_and_rebuilds_the_book(cluster_dict, apps):
    h = {k: key_hash(k) for k in (b"k1", b"k2", b"k3", b"k4")}  # real 40-bit key hashes
    r = {k: rule_hash(v) for k, v in h.items()}  # what their Ruleset 2 rules match (top 32 bits)
    assert len(set(r.values())) == 4  # four distinct rules
    table = _program(cluster_dict, [CacheRule(h[b"k1"], "cache1"), CacheRule(h[b"k2"], "cache1"),
                                    CacheRule(h[b"k3"], "cache2")])
    flows_before = dict(table.flows)
    box = {}
    cfg_peers = FakePeers(parse_config(cluster_dict))
    cfg_peers.keys = {"cache1": [b"k1"], "cache2": [b"k3"]}  # cache1 evicted k2 while we were away
    cfg_peers.list_fails["cache2"] = 10 ** 9                # cache2 cannot list its keys yet
    box["peers"] = cfg_peers
    app = make_app(cluster_dict, box)
    apps.append(app)
    dp = connect(app, table=table)
    assert isinstance(dp.sent[0], type(dp.stats_requests()[0]))
    assert not dp.mods(ofp.OFPFC_DELETE) and not dp.mods(ofp.OFPFC_ADD)  # no flush, no statics
    assert app.updater.installed == {r[b"k1"]: 11, r[b"k2"]: 11, r[b"k3"]: 12}
    assert app.stats()["switch_tables_kept"] == 1 and app.stats()["switch_programmed"] == 1
    wait_for(lambda: app.updater.unsynced_nodes == {"cache2"})
    assert app.book.owner(h[b"k1"]) == "cache1" and app.book.owner(h[b"k2"]) is None
    app.add_cache_rules([CacheRule(h[b"k4"], "cache2")], wait=True)  # adds go before the sync
    time.sleep(0.2)
    # k2's rule is not wanted by cache1, but cache2 is not synced: it might be cache2's. Held.
    assert not dp.mods(ofp.OFPFC_DELETE_STRICT) and r[b"k2"] in dp.table.ruleset2()
    assert app.stats()["rule_deletes_held"] == 2  # k2, and k3 until cache2 says it holds it
    cfg_peers.list_fails["cache2"] = 0
    wait_for(lambda: r[b"k2"] not in dp.table.ruleset2())
    assert dp.table.ruleset2() == {r[b"k1"]: 11, r[b"k3"]: 12, r[b"k4"]: 12}
    assert [m.cookie for m in dp.mods(ofp.OFPFC_DELETE_STRICT)] == [make_cookie(2, r[b"k2"])]
    assert app.book.owner(h[b"k3"]) == "cache2" and app.stats()["cache_nodes_unsynced"] == 0
    # every static flow is the one the first controller installed (same OFPFlowMod objects)
    assert all(table.flows[k] is f for k, f in flows_before.items() if f.priority != 200)
    assert sum(1 for f in flows_before.values() if f.priority != 200) == 15 + 7 + 256  # ingress checks too
    assert list(table.meters) == [1]  # and the client's meter, kept


def test_restarted_controller_withdraws_a_dead_nodes_rules(cluster_dict, apps):
    table = _program(cluster_dict, [CacheRule(H(1), "cache1"), CacheRule(H(2), "cache2"), CacheRule(H(3), "cache2")])
    box = {"peers": FakePeers(parse_config(cluster_dict))}
    box["peers"].keys = {"cache1": [], "cache2": []}
    box["peers"].alive["cache2"] = False
    app = make_app(cluster_dict, box)
    apps.append(app)
    dp = connect(app, table=table)
    wait_for(lambda: app.stats()["cache_node_withdrawals"] == 1 and app.updater.synced)
    wait_for(lambda: dp.table.ruleset2() == {})  # cache2's by withdrawal, 1 after cache1's (empty) sync
    assert [m.out_port for m in dp.mods(ofp.OFPFC_DELETE)] == [12]
    assert [m.cookie for m in dp.mods(ofp.OFPFC_DELETE_STRICT)] == [make_cookie(2, H(1))]
    assert dp.table.count(1) == 7 and dp.table.count(3) == 256


def test_foreign_flow_means_flush(cluster_dict, apps):
    table = _program(cluster_dict, [CacheRule(H(1), "cache1")])
    table.add_foreign(in_port=3)
    box = {}
    app = make_app(cluster_dict, box)
    apps.append(app)
    dp = connect(app, table=table)
    flush = dp.mods()[0]
    assert flush.command == ofp.OFPFC_DELETE and flush.table_id == ofp.OFPTT_ALL and flush.cookie_mask == 0
    assert app.stats()["switch_tables_flushed"] == 1
    assert dp.table.count(1) == 7 and dp.table.count(3) == 256 and len(dp.table.flows) == 15 + 263
