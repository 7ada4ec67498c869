"""`exo node add|remove|list [NAME]`: db node membership of a running cluster at
replication.factor > 1 (Controller.AddNode / RemoveNode / ListNodes, as an operator;
docs/replication.md, "Membership").

    exo node list          every db node: member, state, incarnation, slots it heads / is in /
                           copies / reads, and the chain table's version
    exo node add NAME      make a configured db node (a spare, or one removed) a member: it joins
                           every chain short of the factor as a learner, copies, then takes over
    exo node remove NAME   take a member out of every chain; it stays out until `exo node add`

Exit status: 0 done; 2 an error on stderr (no cluster up, not a db node, the controller refused:
the message says why, e.g. the slot that would have no node left).
"""
from __future__ import annotations

import sys
from typing import Optional


def _slots(s: list[int]) -> str:
    return ",".join(str(i) for i in s) if s else "-"


def render(reply) -> list[str]:
    """The ListNodes table (pure)."""
    rows = [("node", "member", "state", "incarnation", "heads", "in chains", "learning", "reads")]
    for n in reply.nodes:
        rows.append((n.name, "yes" if n.member else "no", n.state, f"{n.incarnation:#x}" if n.incarnation else "-",
                     _slots(list(n.heads)), _slots(list(n.nodes)), _slots(list(n.learners)), _slots(list(n.reads))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = [f"chain table v{reply.version}"]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return out


def run(cluster: Optional[str], action: str, name: Optional[str], timeout: float = 60.0) -> int:
    import grpc

    from exo_common.config import load_config
    from exo_common.tls import TlsFilesError
    from exo_topo.grpc_clients import Stubs
    from exoproto import control_pb2 as pb

    from .state import StateError, running

    try:
        st = running(cluster)
        cfg = load_config(st.data["cluster_yaml"])
        stubs = Stubs(cfg)
        stubs.check_identity()
    except (StateError, TlsFilesError) as err:
        print(f"exo node: {err}", file=sys.stderr)
        return 2
    try:
        ctl = stubs.controller()
        if action == "list":
            print("\n".join(render(ctl.ListNodes(pb.StatsRequest(), timeout=timeout))))
            return 0
        rpc = ctl.AddNode if action == "add" else ctl.RemoveNode
        rep = rpc(pb.NodeRequest(name=name), timeout=timeout)
        print(f"{action} {name}: done (chain table v{rep.version})")
        return 0
    except grpc.RpcError as err:
        print(f"exo node {action}: {err.code().name}: {err.details()}", file=sys.stderr)
        return 2
    finally:
        stubs.close()
