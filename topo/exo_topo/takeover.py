"""Measuring a controller takeover (docs/design/replication.md, 5.4), shared by
tests/integration/test_controller_failover.py and the chaos fault kill_master_controller
(experiments/exo_chaos/faults.py), so both report the same `takeover_s`:

    takeover_s   kill of the master -> the first AddCacheRules the survivor accepts, which it
                 answers only once the switch confirmed it MASTER (ROLE_REPLY), it adopted the
                 switch's table and a flow-mod was barrier-confirmed: rule updates resumed.
    role_master_s  kill -> the survivor's Stats say controller_master = 1 (polled, so coarse).

and the same "no flow flushed" check: the switch's flows with their durations (`ovs-ofctl
dump-flows`) before and after; a flow that is gone or whose duration went down was flushed.
"""
from __future__ import annotations

import re
import subprocess
import time
from typing import Callable, Optional

import grpc

from exo_common import tls
from exoproto import control_pb2 as pb
from exoproto import control_pb2_grpc as rpc

# A key hash no client uses (keyhash.key_hash of the campaign's keys never yields it in practice;
# the rule is removed again by remove()). It points at the impersonated cache node.
PROBE_KEY_HASH = 0x12_3456_789A

_FLOW_RE = re.compile(r"cookie=(\S+), duration=([\d.]+)s, table=(\d+),.*?priority=(\d+)(,[^ ]*)? actions")


def flow_durations(bridge: str, keep: Optional[Callable[[int], bool]] = None) -> dict[str, float]:
    """flow "t<table> p<priority> <match> <cookie>" -> its duration in seconds, from ovs-ofctl;
    keep(cookie): only the flows it accepts (all when None)."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge], capture_output=True,
                         text=True, check=True, timeout=10).stdout
    flows = {}
    for line in out.splitlines():
        m = _FLOW_RE.search(line)
        if m and (keep is None or keep(int(m.group(1), 16))):
            flows[f"t{m.group(3)} p{m.group(4)} {m.group(5) or ''} {m.group(1)}"] = float(m.group(2))
    return flows


def flushed(before: dict[str, float], after: dict[str, float]) -> tuple[list[str], list[str]]:
    """(flows of `before` gone from `after`, flows whose duration went down): a kept flow's
    duration only grows."""
    gone = sorted(set(before) - set(after))
    reset = sorted(f for f in before if f in after and after[f] < before[f])
    return gone, reset


class TakeoverProbe:
    """AddCacheRules of one probe rule, sent to one controller instance as cache node
    `cache_node` would send it (its certificate), until the instance accepts it."""

    def __init__(self, cfg, cache_node: str, instance: str):
        self.instance = instance
        self.channel = tls.secure_channel(cfg, cache_node, cfg.for_instance(instance).controller.grpc,
                                          "controller")
        self.stub = rpc.ControllerStub(self.channel)
        self.rule = pb.CacheRulesRequest(rules=[pb.CacheRule(key_hash=PROBE_KEY_HASH, cache_node=cache_node)])

    def refused_as_standby(self, master: str) -> bool:
        """True when the instance refuses the rule naming `master` as the master (it is a standby);
        False when it accepted it. Anything else is an error."""
        try:
            self.stub.AddCacheRules(self.rule, timeout=2)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            if f"the master is {master}" not in err.details():
                raise RuntimeError(f"{self.instance} refused as standby but names another master: "
                                   f"{err.details()}") from err
            return True
        return False

    def measure(self, t_kill: float, stats: Callable[[], dict], timeout: float = 10.0) -> dict:
        """After the master was killed at monotonic time t_kill: retry until the instance
        accepts the rule. stats(): the instance's Stats (for role_master_s)."""
        role_s = add_s = None
        attempts = 0
        while time.monotonic() - t_kill < timeout:
            if role_s is None and _master(stats):
                role_s = time.monotonic() - t_kill
            attempts += 1
            try:
                out = self.stub.AddCacheRules(self.rule, timeout=2)
            except grpc.RpcError as err:
                if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
                    raise
                time.sleep(0.01)
                continue
            if out.accepted == 1:
                add_s = time.monotonic() - t_kill
                break
            time.sleep(0.01)  # rejected (not refused): ask again
        if role_s is None and _master(stats):
            role_s = time.monotonic() - t_kill
        return {"takeover_s": add_s, "role_master_s": role_s, "add_attempts": attempts}

    def remove(self) -> None:
        self.stub.RemoveCacheRules(self.rule, timeout=5)

    def close(self) -> None:
        self.channel.close()


def _master(stats: Callable[[], dict]) -> bool:
    try:
        return stats().get("controller_master") == 1
    except grpc.RpcError:  # busy taking over: ask again next round
        return False
