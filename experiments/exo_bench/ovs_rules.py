"""The two rule layouts the OVS cases load on their bridge (ovs-ofctl, no controller):

  forward  in_port=1 -> 2 and in_port=2 -> 1: the cheapest layout there is, one datapath flow
           per direction; with the reflector behind it this is OVS's own forwarding ceiling.
  cluster  the cluster's layout (docs/switch-rules.md) for hot GETs: Ruleset 1 (node MAC ->
           port) and one Ruleset 2 exact-match rule per cached key hash (aa:<hash> -> the cache
           node's port), from the controller's own flow-mod builder. OVS caches one datapath
           flow per distinct destination MAC under these rules: upcalls per request say how
           often a GET took the slow path.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from typing import Iterable

from exo_controller import flows
from exoskeleton.keyhash import key_hash

GEN_PORT, SRV_PORT = 1, 2


def _ofctl(*args: str) -> str:
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ovs-ofctl {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def _flow_line(fm: "flows.FlowMod") -> str:
    # FlowMod's str() is "add cookie=.. priority=.. dl_dst=.. actions=.."; add-flows wants the rest.
    return str(fm).removeprefix(f"{flows.ADD} ").replace(" ", ",")


def load_forward(bridge: str) -> int:
    _ofctl("add-flow", bridge, f"priority=10,in_port={GEN_PORT},actions=output:{SRV_PORT}")
    _ofctl("add-flow", bridge, f"priority=10,in_port={SRV_PORT},actions=output:{GEN_PORT}")
    return 2


def load_cluster(bridge: str, client_mac: str, cache_mac: str, hot_keys: Iterable[bytes]) -> int:
    lines = [f"priority={flows.PRIORITY[flows.RULESET_NODES]},dl_dst={client_mac},actions=output:{GEN_PORT}",
             f"priority={flows.PRIORITY[flows.RULESET_NODES]},dl_dst={cache_mac},actions=output:{SRV_PORT}"]
    lines += [_flow_line(flows.cache_flowmod(key_hash(k), SRV_PORT)) for k in hot_keys]
    with tempfile.NamedTemporaryFile("w", suffix=".flows") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        _ofctl("add-flows", bridge, f.name)
    return len(lines)


def datapath_lookups() -> dict[str, int]:
    """ovs-vswitchd's datapath counters: lookups hit (fast path) / missed (upcall) / lost."""
    r = subprocess.run(["ovs-appctl", "dpctl/show"], capture_output=True, text=True)
    out = {"hit": 0, "missed": 0, "lost": 0}
    for m in re.finditer(r"lookups: hit:(\d+) missed:(\d+) lost:(\d+)", r.stdout):
        out["hit"] += int(m.group(1))
        out["missed"] += int(m.group(2))
        out["lost"] += int(m.group(3))
    return out


def datapath_flows() -> int:
    r = subprocess.run(["ovs-appctl", "dpctl/dump-flows"], capture_output=True, text=True)
    return sum(1 for line in r.stdout.splitlines() if line.strip() and not line.startswith("flow-dump"))
