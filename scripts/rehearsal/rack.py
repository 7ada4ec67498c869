"""The stand-in rack: which machine is what (from the cluster config), the machines as network
namespaces with their cables (step 0, before the guide's steps), and step 4 of docs/deploy.md,
each machine's management-network firewall (firewall.py's ruleset, applied with nft -f in its
namespace) with one connection it must let through and one it must drop.
"""
from __future__ import annotations

import os
import socket
import subprocess

import firewall
from run_state import ADMIN_IP, CONTROLLER_HOST, MGMT_BRIDGE, MGMT_PREFIX_LEN, Run, StepFailed


def host_of(address: str) -> str:
    host, sep, _port = address.rpartition(":")
    if not sep or address.startswith("unix:"):
        raise StepFailed(f"{address!r}: the rehearsal's machines talk over the management network (IP:port)")
    return host


def machines(cfg) -> list[tuple[str, str, object]]:
    """(machine, management IP, data-plane node or None) for every machine of the config."""
    out = [(CONTROLLER_HOST, host_of(cfg.controller.grpc), None)]
    out += [(n.name, host_of(n.grpc), n) for n in [*cfg.cache_nodes, *cfg.db_nodes]]
    for c in cfg.clients:
        proxy = next((p for p in cfg.proxies if p.client == c.name), None)
        if proxy is None or not proxy.metrics:
            raise StepFailed(f"clients[{c.name}]: the rehearsal needs a proxy with a metrics address on it")
        out.append((c.name, host_of(proxy.metrics), c))
    return out


def component_on(cfg, machine: str) -> str:
    """The config name of the component a machine runs (a client machine runs its proxy)."""
    if machine == CONTROLLER_HOST:
        return "controller"
    proxy = next((p.name for p in cfg.proxies if p.client == machine), None)
    return proxy or machine


# ---------------------------------------------------------------- step 0
def prepare_rack(r: Run) -> dict:
    """The machines and their cables, as they stand before the deployment starts: one netns per
    machine, each with a data-plane cable (not yet plugged into the switch) and a management
    cable on the management bridge. The config (cluster.yaml) says which machine is what."""
    closed = [str(d) for d in [r.work, *r.work.parents] if not os.stat(d).st_mode & 0o001]
    if closed:
        raise StepFailed(f"--work {r.work}: the services' user cannot enter {closed[0]} "
                         f"(mode {oct(os.stat(closed[0]).st_mode & 0o777)}); use a directory every user may enter")
    from exo_common.config import load_config
    r.cfg = load_config(r.rendered_config(write_to=r.work / "plan.yaml"))
    rack = machines(r.cfg)
    r.lab.linux_bridge(MGMT_BRIDGE, f"{ADMIN_IP}/{MGMT_PREFIX_LEN}")
    for machine, mgmt_ip, data in rack:
        r.lab.host(machine)
        r.lab.veth(machine, f"{machine}-mgmt", f"rhm-{machine}")
        r.lab.enslave(f"rhm-{machine}", MGMT_BRIDGE)
        r.lab.address(machine, f"{machine}-mgmt", f"{mgmt_ip}/{MGMT_PREFIX_LEN}")
        if data is not None:
            r.lab.veth(machine, data.interface, f"rh-{machine}", mac=data.mac)
            r.lab.address(machine, data.interface, f"{data.ip}/8")
    return {"machines": {m: ip for m, ip, _ in rack}}


# ---------------------------------------------------------------- step 4
def step_firewall(r: Run) -> dict:
    """firewall.py's ruleset on every machine's management interface (nft -f in its
    namespace); then one connection it must allow and one it must drop."""
    applied = {}
    (r.work / "firewall").mkdir(exist_ok=True)
    for machine, _, _ in machines(r.cfg):
        component = component_on(r.cfg, machine)
        text = firewall.ruleset(r.cfg, component, f"{machine}-mgmt", [ADMIN_IP], [ADMIN_IP], [ADMIN_IP])
        res = subprocess.run(["ip", "netns", "exec", r.lab.netns(machine), "nft", "-f", "-"], input=text,
                             capture_output=True, text=True, timeout=15)
        if res.returncode != 0:
            raise StepFailed(f"nft -f in {machine}: {res.stderr.strip()}")
        (r.work / "firewall" / f"{machine}.nft").write_text(text)
        applied[machine] = component
    db = r.cfg.db_nodes[0]
    cache = r.cfg.cache_nodes[0]
    client = r.cfg.clients[0]
    allowed = tcp_probe(r, cache.name, db.grpc)
    forbidden = tcp_probe(r, client.name, db.grpc)
    if allowed == "dropped" or forbidden != "dropped":
        raise StepFailed(f"{cache.name} -> {db.name} gRPC: {allowed} (want answered); "
                         f"{client.name} -> {db.name} gRPC: {forbidden} (want dropped)")
    return {"rulesets": applied, f"{cache.name}->{db.name} gRPC": allowed,
            f"{client.name}->{db.name} gRPC": forbidden}


def tcp_probe(r: Run, machine: str, address: str, timeout: float = 1.0) -> str:
    """From `machine`: "connected", "refused" (reached, nothing listening) or "dropped"."""
    from exo_topo.netns import in_named_netns
    host, port = firewall.split_address(address)
    with in_named_netns(r.lab.netns(machine)):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, port))
        return "connected"
    except ConnectionRefusedError:
        return "refused"
    except (socket.timeout, TimeoutError):
        return "dropped"
    finally:
        s.close()
