"""The chain table and db-node membership in etcd (docs/design/replication.md, 5.3), when the
controllers elect a master there (`controller.etcd`). The master writes both after every table
it pushes and every membership change, guarded by its election key (a deposed master's write
fails); a new master reads them before it adopts a table, so a node removed with `exo node
remove` stays out across a failover, and a table newer than any db node still holds (all the
nodes that took it restarted) is not lost.

    /exo/<cluster>/chains   the ChainTableMsg (exoproto, serialized)
    /exo/<cluster>/members  the member db nodes, a JSON list of names

The rest of the desired state in etcd has stores of its own (design step 9b; docs/etcd.md):
the config digest (config_digest.py), the Ruleset 2 book (book_store.py) and the rate-window
record (ratewin_store.py).
"""
from __future__ import annotations

import json
import logging
from typing import Optional

from . import chain_plan as cp
from .etcd_keys import cluster_prefix

LOG = logging.getLogger("exo_controller.chains")


def keys(cfg) -> tuple[str, str]:
    base = cluster_prefix(cfg)
    return f"{base}/chains", f"{base}/members"


def encode(table: cp.ChainTable, members: set[str]) -> tuple[bytes, bytes]:
    from exoproto import control_pb2
    return cp.to_msg(table, control_pb2).SerializeToString(), json.dumps(sorted(members)).encode()


def decode(chains: Optional[bytes], members: Optional[bytes]) -> tuple[Optional[cp.ChainTable], Optional[set[str]]]:
    """Either part None when absent; a value that does not parse raises ValueError naming the key."""
    from exoproto import control_pb2
    table = None
    if chains is not None:
        try:
            table = cp.from_msg(control_pb2.ChainTableMsg.FromString(chains))
        except Exception as err:  # noqa: BLE001 - protobuf's DecodeError and friends
            raise ValueError(f"etcd key chains: not a ChainTableMsg ({err})") from err
    names = None
    if members is not None:
        try:
            parsed = json.loads(members)
        except ValueError as err:
            raise ValueError(f"etcd key members: not JSON ({err})") from err
        if not isinstance(parsed, list) or not all(isinstance(n, str) for n in parsed):
            raise ValueError("etcd key members: not a list of node names")
        names = set(parsed)
    return table, names


class EtcdChainStore:
    """load()/save() through the master's election (failover.Failover: .client, .election)."""

    def __init__(self, cfg, failover):
        self.failover = failover
        self.chains_key, self.members_key = keys(cfg)

    def load(self) -> tuple[Optional[cp.ChainTable], Optional[set[str]]]:
        client = self.failover.client
        chains, members = client.get(self.chains_key), client.get(self.members_key)
        return decode(chains.value if chains else None, members.value if members else None)

    def save(self, table: cp.ChainTable, members: set[str]) -> bool:
        """False when this instance is no longer the elected master (nothing written)."""
        from exo_common.etcd import op_put
        chains, names = encode(table, members)
        ok, _ = self.failover.election.guarded_txn([op_put(self.chains_key, chains),
                                                    op_put(self.members_key, names)])
        return ok
