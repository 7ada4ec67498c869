"""etcd for the controllers (docs/etcd.md): a client over etcd's own gRPC API (client.py, with
the request builders of ops.py and watches on threads, watch.py), etcd's TLS files (tlsfiles.py),
and leader election (election.py)."""
from .client import EtcdClient
from .election import Election, LeaderInfo, revoke_leader
from .ops import (EtcdError, EtcdRpcError, KeyValue, WatchEvent, cmp_create_revision, cmp_mod_revision, cmp_value, op_delete,
                  op_get, op_put)
from .tlsfiles import EtcdTls
from .watch import Watch

__all__ = ["EtcdClient", "EtcdRpcError", "Election", "LeaderInfo", "revoke_leader", "EtcdError", "KeyValue",
           "WatchEvent", "cmp_create_revision", "cmp_mod_revision", "cmp_value", "op_delete", "op_get", "op_put",
           "EtcdTls", "Watch"]
