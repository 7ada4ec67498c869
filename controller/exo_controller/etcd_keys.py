"""Where a cluster's state lives in etcd (docs/etcd.md, "What etcd holds"): every key of one
cluster is under /exo/<cluster.name>, so clusters can share an etcd. The stores add their own
suffix (leader/, chains, members, book/, ratewin, config)."""
from __future__ import annotations


def cluster_prefix(cfg) -> str:
    return f"/exo/{cfg.cluster.name}"
