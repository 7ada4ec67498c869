"""The gRPC calls of the chain executor (chain_exec.py): DbNode.ChainStatus and DbNode.SetChains,
CacheNode.SetHeads, plus CacheNode.Reset (inherited from monitor.GrpcPeers), as `controller` over
mutual TLS."""
from __future__ import annotations

from . import chain_plan
from .monitor import GrpcPeers


class ChainPeers(GrpcPeers):
    def _db_stub(self, node: str):
        from exoproto import control_pb2_grpc
        return control_pb2_grpc.DbNodeStub(self._channel(node, self._db[node]))

    def chain_status(self, node: str, timeout: float):
        """The node's ChainStatusReply (raises grpc.RpcError on failure or deadline)."""
        from exoproto import control_pb2
        return self._db_stub(node).ChainStatus(control_pb2.StatsRequest(), timeout=timeout)

    def set_chains(self, node: str, table: chain_plan.ChainTable, incarnation: int, timeout: float) -> int:
        """Push `table` to `node` (its `incarnation` as we know it); returns the version it acts on."""
        from exoproto import control_pb2
        req = control_pb2.SetChainsRequest(table=chain_plan.to_msg(table, control_pb2), incarnation=incarnation)
        return self._db_stub(node).SetChains(req, timeout=timeout).version

    def set_heads(self, node: str, version: int, heads, timeout: float) -> int:
        """CacheNode.SetHeads: each slot's head (slot order) from the table of `version`; returns
        the version the cache node acts on (raises grpc.RpcError: FAILED_PRECONDITION when it
        holds a newer one)."""
        from exoproto import control_pb2
        req = control_pb2.SetHeadsRequest(version=version, heads=list(heads))
        return self._cache_stub(node).SetHeads(req, timeout=timeout).version
