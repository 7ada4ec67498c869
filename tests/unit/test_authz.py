"""Who may call which RPC (exo_common/authz.py, docs/security.md), through real gRPC over mutual
TLS on unix sockets: the controller's own service (exo_controller.grpc_service.serve, with an app
that records calls) and the controller's and operator's channels to node servers
(exo_controller.monitor.GrpcPeers, exo_topo.grpc_clients.Stubs).

Every refusal must come with the right status code, reach no handler, and be counted; the
allowed calls must go through (the checks can fail in both directions)."""
from concurrent import futures
from dataclasses import dataclass, field

import grpc
import pytest

from exo_common import authz, tls
from exo_common.config import parse_config
from exo_common.pki import init_pki, issue_leaf, new_ca, read_pair, write_pair
from exo_controller.grpc_service import serve
from exo_controller.monitor import GrpcPeers
from exo_topo.grpc_clients import Stubs
from exoproto import control_pb2 as pb
from exoproto import control_pb2_grpc as rpc

ROLES = {"controller", "switch", "cache", "db", "proxy", "operator"}


# ---------------------------------------------------------------- the declarations

def test_every_rpc_of_control_proto_declares_known_roles():
    services = pb.DESCRIPTOR.services_by_name
    assert set(services) == {"Controller", "CacheNode", "DbNode"}
    for svc in services.values():
        for m in svc.methods:
            roles = authz.allowed_roles(f"/{svc.full_name}/{m.name}")
            assert roles, f"{svc.name}.{m.name} has no allowed_roles"
            assert roles <= ROLES - {"switch"}, (m.name, roles)


def test_allowed_roles_as_the_issue_asks():
    a = authz.allowed_roles
    for m in ("Prepare", "Commit", "Abort", "Report"):
        assert a(f"/exo.CacheNode/{m}") == {"db"}  # only db nodes Prepare/Commit/Abort on a cache node
    assert a("/exo.CacheNode/Reset") == {"controller"} and a("/exo.DbNode/ForgetCacheNode") == {"controller"}
    assert a("/exo.Controller/AddCacheRules") == {"cache"} == a("/exo.Controller/RemoveCacheRules")
    assert a("/exo.CacheNode/Cache") == {"operator"} == a("/exo.CacheNode/Evict")
    assert a("/exo.CacheNode/Stats") == {"controller", "operator"} == a("/exo.DbNode/Stats")
    assert a("/exo.DbNode/Fetch") == {"cache"}
    assert a("/exo.CacheNode/NoSuchRpc") is None and a("/other.Service/Stats") is None


def test_decide():
    roles = {"cache1": "cache", "db1": "db", "operator": "operator", "controller": "controller"}
    d = authz.decide("/exo.CacheNode/Prepare", "db1", roles)
    assert d.ok and d.role == "db"
    d = authz.decide("/exo.CacheNode/Prepare", "cache1", roles)
    assert (d.ok, d.code) == (False, "PERMISSION_DENIED") and "role cache" in d.why
    assert authz.decide("/exo.CacheNode/Prepare", None, roles).code == "UNAUTHENTICATED"
    assert authz.decide("/exo.CacheNode/Prepare", "stranger", roles).code == "PERMISSION_DENIED"
    assert authz.decide("/exo.CacheNode/Secret", "operator", roles).code == "PERMISSION_DENIED"
    assert authz.decide("/grpc.health.v1.Health/Check", "cache1", roles).ok
    assert not authz.decide("/grpc.health.v1.Health/Check", None, roles).ok
    assert authz.foreign_cache_nodes("cache1", ["cache1", "cache2", "cache2", "x"]) == ["cache2", "x"]


# ---------------------------------------------------------------- the controller's service

@dataclass
class RecordingApp:
    """What grpc_service needs of ExoControllerApp; records which handlers ran."""
    calls: list = field(default_factory=list)
    counters: dict = field(default_factory=dict)

    def count(self, name, n=1):
        self.counters[name] = self.counters.get(name, 0) + n

    def add_cache_rules(self, rules, loads=None, wait=True, timeout=None):
        from exo_controller.app import RulesOutcome
        self.calls.append(("add", [r.cache_node for r in rules]))
        return RulesOutcome(len(rules), 0)

    def remove_cache_rules(self, rules, wait=True, timeout=None):
        from exo_controller.app import RulesOutcome
        self.calls.append(("remove", [r.cache_node for r in rules]))
        return RulesOutcome(len(rules), 0)

    def stats(self):
        self.calls.append(("stats",))
        return {"rpc_refused": self.counters.get("rpc_refused", 0)}

    def list_flows(self, ruleset):
        self.calls.append(("list", ruleset))
        return []


@pytest.fixture
def cfg(cluster_dict, tmp_path):
    cluster_dict["controller"]["grpc"] = f"unix:{tmp_path}/controller.sock"
    cluster_dict["cache_nodes"][0]["grpc"] = f"unix:{tmp_path}/cache1.sock"
    cluster_dict["db_nodes"][2].update(grpc=f"unix:{tmp_path}/db3.sock", emulator="emu0")
    cluster_dict["security"] = {"cert_dir": str(tmp_path / "pki")}
    cfg = parse_config(cluster_dict)
    init_pki(cfg.roles(), cfg.cluster.name, cfg.security.cert_dir)
    return cfg


@pytest.fixture
def controller(cfg):
    app = RecordingApp()
    server = serve(app, cfg, workers=4)
    yield app
    server.stop(None)


def channel(cfg, name, server_name="controller", address=None):
    return tls.secure_channel(cfg, name, address or cfg.controller.grpc, server_name)


def rules(*nodes):
    return pb.CacheRulesRequest(rules=[pb.CacheRule(key_hash=i + 1, cache_node=n) for i, n in enumerate(nodes)])


def code_of(fn):
    with pytest.raises(grpc.RpcError) as e:
        fn()
    return e.value.code()


def test_the_controller_service_checks_every_caller(cfg, controller):
    app = controller
    op = rpc.ControllerStub(channel(cfg, "operator"))
    assert op.Stats(pb.StatsRequest(), timeout=5).counters[0].name == "rpc_refused"
    assert op.ListRules(pb.ListRulesRequest(ruleset=2), timeout=5).switch_connected
    assert app.calls == [("stats",), ("list", 2)]

    cache1 = rpc.ControllerStub(channel(cfg, "cache1"))
    assert cache1.AddCacheRules(rules("cache1", "cache1"), timeout=5).accepted == 2
    assert cache1.RemoveCacheRules(rules("cache1"), timeout=5).accepted == 1
    assert app.calls[2:] == [("add", ["cache1", "cache1"]), ("remove", ["cache1"])]
    app.calls.clear()

    # refused: a role that may not, and a cache node acting for another
    assert code_of(lambda: cache1.Stats(pb.StatsRequest(), timeout=5)) == grpc.StatusCode.PERMISSION_DENIED
    assert code_of(lambda: op.AddCacheRules(rules("cache1"), timeout=5)) == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as e:
        cache1.AddCacheRules(rules("cache1", "cache2"), timeout=5)
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED and "not for cache2" in e.value.details()
    assert code_of(lambda: cache1.RemoveCacheRules(rules("cache2"), timeout=5)) == grpc.StatusCode.PERMISSION_DENIED
    db = rpc.ControllerStub(channel(cfg, "emu0"))  # an emulator speaks as a db node
    assert code_of(lambda: db.AddCacheRules(rules("cache1"), timeout=5)) == grpc.StatusCode.PERMISSION_DENIED
    assert app.calls == [] and app.counters["rpc_refused"] == 5

    # a certificate of this CA with a name the config does not know
    ca_key, ca = read_pair(cfg.security.cert_dir, "ca")
    write_pair(cfg.security.cert_dir, "stranger", *issue_leaf(ca_key, ca, "stranger", "operator", "t"))
    stranger = rpc.ControllerStub(channel(cfg, "stranger"))
    assert code_of(lambda: stranger.Stats(pb.StatsRequest(), timeout=5)) == grpc.StatusCode.PERMISSION_DENIED
    assert app.counters["rpc_refused"] == 6 and app.calls == []


def test_without_the_cluster_ca_nothing_gets_through(cfg, controller, tmp_path):
    app = controller
    ca_pem = (tmp_path / "pki" / "ca.crt").read_bytes()
    calls = []
    # no client certificate: the TLS handshake fails (gRPC Python can only require one or not ask)
    nocert = grpc.secure_channel(cfg.controller.grpc, grpc.ssl_channel_credentials(ca_pem),
                                 options=[("grpc.ssl_target_name_override", "controller")])
    calls.append(lambda: rpc.ControllerStub(nocert).Stats(pb.StatsRequest(), timeout=2))
    # a certificate named like the operator from a CA of the attacker's
    key, ca = new_ca("t")
    write_pair(tmp_path, "rogue", *issue_leaf(key, ca, "operator", "operator", "t"))
    rogue = grpc.secure_channel(cfg.controller.grpc, grpc.ssl_channel_credentials(
        ca_pem, (tmp_path / "rogue.key").read_bytes(), (tmp_path / "rogue.crt").read_bytes()),
        options=[("grpc.ssl_target_name_override", "controller")])
    calls.append(lambda: rpc.ControllerStub(rogue).Stats(pb.StatsRequest(), timeout=2))
    calls.append(lambda: rpc.ControllerStub(grpc.insecure_channel(cfg.controller.grpc)).Stats(
        pb.StatsRequest(), timeout=2))
    for call in calls:
        assert code_of(call) == grpc.StatusCode.UNAVAILABLE
    # the client checks the server too: the controller is not cache1
    wrong_server = rpc.ControllerStub(channel(cfg, "operator", server_name="cache1"))
    assert code_of(lambda: wrong_server.Stats(pb.StatsRequest(), timeout=2)) == grpc.StatusCode.UNAVAILABLE
    assert app.calls == []


def test_insecure_dev_mode_is_plaintext_without_checks(cluster_dict, tmp_path):
    cluster_dict["controller"]["grpc"] = f"unix:{tmp_path}/controller.sock"
    cluster_dict["security"] = {"insecure_dev_mode": True, "cert_dir": str(tmp_path / "none")}
    cfg = parse_config(cluster_dict)
    app = RecordingApp()
    server = serve(app, cfg, workers=2)
    try:
        stub = rpc.ControllerStub(grpc.insecure_channel(cfg.controller.grpc))
        assert stub.AddCacheRules(rules("cache2"), timeout=5).accepted == 1
        assert Stubs(cfg).controller_stats(timeout=5) == {"rpc_refused": 0}
    finally:
        server.stop(None)
    assert app.counters == {}


# ---------------------------------------------------------------- channels to the nodes

class CacheNode(rpc.CacheNodeServicer):
    def Stats(self, request, context):
        return pb.StatsReply(node="cache1")

    def Reset(self, request, context):
        return pb.KeysReply(done=3)


class DbNode(rpc.DbNodeServicer):
    def ForgetCacheNode(self, request, context):
        return pb.ForgetCacheNodeReply(keys_dropped=1)

    def Stats(self, request, context):
        return pb.StatsReply(node="db3")


def node_server(cfg, name, address, servicer, add):
    """A node's gRPC server as the C++ nodes run it: TLS as `name`, the allowed_roles checks."""
    counters = {}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), interceptors=[
        authz.AuthzInterceptor(cfg.roles(), lambda n: counters.__setitem__(n, counters.get(n, 0) + 1))])
    add(servicer, server)
    tls.add_port(server, cfg, name, address)
    server.start()
    return server, counters


def test_the_controller_and_the_operator_reach_nodes_by_their_certificate_names(cfg):
    cache_addr, db_addr = cfg.node("cache1").grpc, cfg.node("db3").grpc
    cs, cache_refused = node_server(cfg, "cache1", cache_addr, CacheNode(), rpc.add_CacheNodeServicer_to_server)
    # db3 lives in wimpy emulator emu0: its server holds emu0's certificate
    ds, db_refused = node_server(cfg, "emu0", db_addr, DbNode(), rpc.add_DbNodeServicer_to_server)
    peers, stubs = GrpcPeers(cfg), Stubs(cfg)
    try:
        peers.cache_stats("cache1", 5)
        assert peers.reset("cache1", 5) == 3
        assert peers.forget("db3", "cache1", 5) == (1, 0)
        assert stubs.stats("cache1", timeout=5) == {} and stubs.stats("db3", timeout=5) == {}
        # what neither may do
        assert code_of(lambda: stubs.cache("cache1").Reset(pb.StatsRequest(), timeout=5)) == \
            grpc.StatusCode.PERMISSION_DENIED
        assert code_of(lambda: stubs.db("db3").ForgetCacheNode(pb.ForgetCacheNodeRequest(), timeout=5)) == \
            grpc.StatusCode.PERMISSION_DENIED
        assert cache_refused == {"rpc_refused": 1} and db_refused == {"rpc_refused": 1}
    finally:
        cs.stop(None)
        ds.stop(None)
        peers.close()
        stubs.close()
    # a server with the wrong certificate at db3's address (db1's, not emu0's) is not believed
    ds, _ = node_server(cfg, "db1", db_addr, DbNode(), rpc.add_DbNodeServicer_to_server)
    peers = GrpcPeers(cfg)
    try:
        assert code_of(lambda: peers.forget("db3", "cache1", 2)) == grpc.StatusCode.UNAVAILABLE
    finally:
        ds.stop(None)
        peers.close()


def test_a_missing_certificate_is_named(cluster_dict, tmp_path):
    cluster_dict["security"] = {"cert_dir": str(tmp_path / "empty")}
    cfg = parse_config(cluster_dict)
    with pytest.raises(tls.TlsFilesError, match=r"empty/ca.crt is missing: run `exo certs init"):
        GrpcPeers(cfg)
    with pytest.raises(tls.TlsFilesError, match=r"empty/ca.crt is missing"):
        Stubs(cfg).check_identity()  # what `exo stats` says instead of showing every node down
    cluster_dict["security"]["operators"] = []
    with pytest.raises(ValueError, match=r"security.operators is empty"):
        Stubs(parse_config(cluster_dict))


def test_every_refusal_is_counted_but_the_log_is_throttled(caplog):
    now = [100.0]
    counted = []
    icpt = authz.AuthzInterceptor({"cache1": "cache"}, counted.append, clock=lambda: now[0])

    class Ctx:
        def abort(self, code, details):
            raise RuntimeError(code)

    d = authz.decide("/exo.CacheNode/Reset", "cache1", icpt.roles)
    with caplog.at_level("WARNING", logger="exo.authz"):
        for t in (100.0, 101.0, 105.0, 111.0):
            now[0] = t
            with pytest.raises(RuntimeError, match="PERMISSION_DENIED"):
                icpt.refuse(Ctx(), "/exo.CacheNode/Reset", d)
    assert counted == ["rpc_refused"] * 4
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "and 2 more refusals not logged" in lines[1]
