"""Step 5 of docs/deploy.md: the switch. An Open vSwitch bridge plays the hardware switch
(userspace datapath, fail mode secure, OpenFlow 1.3, the forwarding table's flow limit as the
emulation sets it), with each machine's data-plane cable on its configured port and the
controller reached over TLS (`ovs-vsctl set-ssl` with the `switch` certificate, an ssl: target).
First the switch's flow-mod rate is measured against switch.rule_update_rate.
"""
from __future__ import annotations

import time
from pathlib import Path

from netlab import run
from rack import machines
from run_state import PREFIX, SWITCH_BRIDGE, Run, StepFailed


def step_switch(r: Run) -> dict:
    from exo_controller.flows import FORWARD_TABLE, table_flow_limit
    from exo_topo import ovs
    if ovs.ensure_running():
        r.lab.on_teardown("Open vSwitch", ovs.stop)
    cfg = r.cfg
    rate = measure_update_rate(r)
    if rate < cfg.switch.rule_update_rate:
        raise StepFailed(f"the switch takes {rate:.0f} flow-mods/s, below switch.rule_update_rate "
                         f"{cfg.switch.rule_update_rate:g}")
    r.lab.ovs_bridge(SWITCH_BRIDGE, "--", "set", "Bridge", SWITCH_BRIDGE, "datapath_type=netdev",
                     "fail_mode=secure", "protocols=OpenFlow13",
                     f"other-config:datapath-id={cfg.switch.dpid:016x}",
                     "other-config:disable-in-band=true")
    limit = table_flow_limit(cfg)
    run("ovs-vsctl", "--timeout=5", "--", "--id=@ft", "create", "Flow_Table", f"flow_limit={limit}",
        "overflow_policy=refuse", "name=exo_forward", "prefixes=ip_dst", "--", "set", "Bridge", SWITCH_BRIDGE,
        f"flow_tables:{FORWARD_TABLE}=@ft")
    for machine, _, data in machines(cfg):
        if data is not None:
            r.lab.ovs_port(SWITCH_BRIDGE, f"rh-{machine}", data.switch_port)
    pki = Path(cfg.security.cert_dir)
    ssl = [str(pki / "switch.key"), str(pki / "switch.crt"), str(pki / "ca.crt")]
    run("ovs-vsctl", "--timeout=5", "set-ssl", *ssl)
    r.lab.on_teardown("OVS SSL", lambda: _del_ssl_if_ours(ssl))
    target = f"ssl:{cfg.controller.openflow_host}:{cfg.controller.openflow_port}"
    run("ovs-vsctl", "--timeout=5", "set-controller", SWITCH_BRIDGE, target)
    return {"flow_mods_per_s": round(rate), "controller_target": target, f"table{FORWARD_TABLE}_flow_limit": limit}


def measure_update_rate(r: Run, n: int = 2000) -> float:
    """Flow-mods per second the switch takes: n adds on a scratch bridge, timed (docs/deploy.md)."""
    scratch = f"{PREFIX}-rate"
    r.lab.ovs_bridge(scratch, "--", "set", "Bridge", scratch, "datapath_type=netdev", "fail_mode=secure",
                     "protocols=OpenFlow13")
    flows = r.work / "rate-flows.txt"
    flows.write_text("".join(f"priority=200,ip,nw_dst=10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255},"
                             f"actions=drop\n" for i in range(n)))
    t0 = time.monotonic()
    run("ovs-ofctl", "-O", "OpenFlow13", "add-flows", scratch, str(flows), timeout=60)
    run("ovs-ofctl", "-O", "OpenFlow13", "dump-aggregate", scratch)  # after the adds are in
    rate = n / (time.monotonic() - t0)
    run("ovs-vsctl", "--timeout=5", "del-br", scratch)
    return rate


def _del_ssl_if_ours(ssl: list[str]) -> None:
    """Removes OVS's SSL settings only while they are still the ones step 5 set."""
    out = run("ovs-vsctl", "--timeout=5", "get-ssl", check=False).stdout
    if all(p in out for p in ssl):
        run("ovs-vsctl", "--timeout=5", "del-ssl", check=False)
