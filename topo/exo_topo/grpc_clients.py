"""Small typed helpers over the generated gRPC stubs, for the CLI, tests and experiments.

They call as an operator (docs/security.md): with the certificate of security.operators[0]
(or `identity`), over mutual TLS, each channel checking the server's certificate name
(exo_common/tls.py). Plaintext in insecure_dev_mode.
"""
from __future__ import annotations

from typing import Optional

import grpc

from exo_common import tls
from exoproto import control_pb2 as pb
from exoproto import control_pb2_grpc as rpc


class Stubs:
    """Channels to every node of a running cluster, by node name. identity: the certificate
    name to call with (default: the first of security.operators)."""

    def __init__(self, cfg, identity: Optional[str] = None):
        self.cfg = cfg
        if identity is None and not cfg.security.insecure_dev_mode:
            if not cfg.security.operators:
                raise ValueError("security.operators is empty: the exo tools call the cluster with an "
                                 "operator certificate; name one there")
            identity = cfg.security.operators[0]
        self.identity = identity
        self._channels: dict[str, grpc.Channel] = {}

    def check_identity(self) -> None:
        """Raise tls.TlsFilesError naming the file if this identity's certificate cannot be read
        (channels read it only when first used; a tool wants to say so before it starts)."""
        if not self.cfg.security.insecure_dev_mode:
            tls.read_identity(self.cfg.security.cert_dir, self.identity)

    def _channel(self, node: str, addr: str) -> grpc.Channel:
        if addr not in self._channels:
            self._channels[addr] = tls.secure_channel(self.cfg, self.identity or "", addr,
                                                      tls.server_cert_name(self.cfg, node))
        return self._channels[addr]

    def controller(self) -> rpc.ControllerStub:
        return rpc.ControllerStub(self._channel("controller", self.cfg.controller.grpc))

    def cache(self, name: str) -> rpc.CacheNodeStub:
        return rpc.CacheNodeStub(self._channel(name, self.cfg.node(name).grpc))

    def db(self, name: str) -> rpc.DbNodeStub:
        return rpc.DbNodeStub(self._channel(name, self.cfg.node(name).grpc))

    def stats(self, name: str, timeout: float = 5.0, wait: bool = False) -> dict[str, int]:
        stub = self.cache(name) if any(c.name == name for c in self.cfg.cache_nodes) else self.db(name)
        return _as_dict(stub.Stats(pb.StatsRequest(), timeout=timeout, wait_for_ready=wait))

    def node_stats(self, timeout: float = 5.0) -> dict[str, dict[str, int]]:
        """Counters of every cache and db node, by node name."""
        return {n.name: self.stats(n.name, timeout) for n in [*self.cfg.cache_nodes, *self.cfg.db_nodes]}

    def controller_stats(self, timeout: float = 5.0) -> dict[str, int]:
        """The rule updater's metrics (docs/cache-fill.md): rule_adds_queued, ruleset2_max, ..."""
        return _as_dict(self.controller().Stats(pb.StatsRequest(), timeout=timeout))

    def hot_keys(self, db_name: str, timeout: float = 5.0) -> pb.ReportRequest:
        """What db node `db_name` would REPORT now: its load and hottest keys with rates."""
        return self.db(db_name).HotKeys(pb.StatsRequest(), timeout=timeout)

    def cached_keys(self, cache_name: str, timeout: float = 5.0) -> list[bytes]:
        return list(self.cache(cache_name).ListKeys(pb.StatsRequest(), timeout=timeout).keys)

    def slot_digests(self, db_name: str, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
        """slot -> (keys, digest) of what db node `db_name` holds (DbNode.SlotDigest)."""
        rep = self.db(db_name).SlotDigest(pb.SlotDigestRequest(), timeout=timeout)
        return {e.slot: (e.keys, e.digest) for e in rep.slots}

    def rules(self, ruleset: int = 0, timeout: float = 5.0) -> pb.ListRulesReply:
        return self.controller().ListRules(pb.ListRulesRequest(ruleset=ruleset), timeout=timeout)

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()


def _as_dict(reply: pb.StatsReply) -> dict[str, int]:
    return {c.name: c.value for c in reply.counters}
