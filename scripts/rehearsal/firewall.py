"""The management network's firewall, one nftables ruleset per machine, derived from the config
and from who may call what (the `allowed_roles` of every rpc in proto/exoproto/control.proto):
a machine accepts on its management interface only the connections some peer needs.

    gRPC port of the controller / a cache node / a db node: from the machines of the roles that may
        call any rpc of its service (e.g. a db node: cache nodes, the controller, operators)
    the controller's OpenFlow port: from the switch's management address
    a metrics port: from the Prometheus hosts
    replies to its own connections (conntrack), ICMP; everything else on that interface: dropped

TLS already refuses a caller without a cluster certificate; this keeps everyone else from
reaching the ports at all (defence in depth, and no TLS handshake to attack).

    python scripts/rehearsal/firewall.py --config cluster.yaml --component db0 --iface eno2 \\
        --operator 10.9.0.5 --prometheus 10.9.0.5 --switch 10.9.0.2 > /etc/nftables.d/exo.nft

`ruleset()` is pure; the rehearsal (rack.py, step 4) applies its output with `nft -f` in every
machine's namespace and checks one allowed and one forbidden connection.
"""
from __future__ import annotations

import argparse
import sys

SERVICE_OF_ROLE = {"controller": "Controller", "cache": "CacheNode", "db": "DbNode"}


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or address.startswith("unix:") or not port.isdigit():
        raise ValueError(f"{address!r}: a firewall needs IP:port addresses (a unix socket needs none)")
    return host, int(port)


def callers_of(service: str) -> set[str]:
    """Roles that may call at least one rpc of exo.<service>, from control.proto's options."""
    from exoproto import control_pb2
    svc = control_pb2.DESCRIPTOR.services_by_name[service]
    out: set[str] = set()
    for m in svc.methods:
        out |= set(m.GetOptions().Extensions[control_pb2.allowed_roles])
    return out


def unused_roles(cfg, service: str) -> set[str]:
    """Roles allowed on `service` that this config never has call it: db nodes call each other
    (DbNode.Replicate) only when chains have more than one node (replication.factor > 1), and
    controllers each other (Controller.Ping) only when there are several."""
    if service == "DbNode" and cfg.replication.factor <= 1:
        return {"db"}
    if service == "Controller" and len(cfg.controller.all_instances()) <= 1:
        return {"controller"}
    return set()


def components(cfg) -> dict[str, tuple[str, str | None, str | None]]:
    """component name -> (role, gRPC address or None, metrics address or None)."""
    out = {"controller": ("controller", cfg.controller.grpc, cfg.controller.metrics or None)}
    out.update({n.name: ("cache", n.grpc, n.metrics or None) for n in cfg.cache_nodes})
    out.update({n.name: ("db", n.grpc, n.metrics or None) for n in cfg.db_nodes})
    out.update({p.name: ("proxy", None, p.metrics or None) for p in cfg.proxies})
    return out


def sources(cfg, role: str, operators: list[str], switch: list[str]) -> list[str]:
    """Management addresses the machines of `role` call from."""
    if role == "operator":
        return list(operators)
    if role == "switch":
        return list(switch)
    return sorted({split_address(addr)[0] for r, addr, _ in components(cfg).values() if r == role and addr})


def ruleset(cfg, component: str, iface: str, operators: list[str], prometheus: list[str],
            switch: list[str]) -> str:
    comps = components(cfg)
    if component not in comps:
        raise ValueError(f"--component {component!r}: not in the config (have {', '.join(comps)})")
    role, grpc_addr, metrics_addr = comps[component]
    allow: list[tuple[int, list[str], str]] = []
    if grpc_addr:
        service = SERVICE_OF_ROLE[role]
        roles = sorted(callers_of(service) - unused_roles(cfg, service))
        ips = sorted({ip for r in roles for ip in sources(cfg, r, operators, switch)})
        allow.append((split_address(grpc_addr)[1], ips, f"gRPC exo.{service}: {', '.join(roles)}"))
    if role == "controller":
        allow.append((cfg.controller.openflow_port, list(switch), "OpenFlow: the switch"))
    if metrics_addr:
        allow.append((split_address(metrics_addr)[1], list(prometheus), "metrics: Prometheus"))
    lines = [f"# exo management firewall for {component} ({role}) on {iface}: scripts/rehearsal/firewall.py",
             "table inet exo_mgmt {", "  chain input {",
             "    type filter hook input priority filter; policy accept;",
             f'    iifname != "{iface}" accept',
             "    ct state established,related accept",
             "    ip protocol icmp accept"]
    for port, ips, why in allow:
        if ips:
            lines.append(f"    ip saddr {{ {', '.join(ips)} }} tcp dport {port} accept  # {why}")
    lines += ["    counter drop", "  }", "}"]
    return "\n".join(lines) + "\n"


def _find_exo_packages() -> None:
    """From a source checkout's venv the packages are importable; on a machine with only the .deb,
    they are in its private Python tree."""
    try:
        import exo_common  # noqa: F401
    except ImportError:
        sys.path.append("/usr/lib/exoskeleton/python")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--component", required=True, help="controller, a node name or a proxy name")
    ap.add_argument("--iface", required=True, help="the machine's management interface")
    ap.add_argument("--operator", action="append", default=[], help="an operator host's address (repeat)")
    ap.add_argument("--prometheus", action="append", default=[], help="a Prometheus host's address (repeat)")
    ap.add_argument("--switch", action="append", default=[], help="the switch's management address")
    args = ap.parse_args(argv)
    _find_exo_packages()
    from exo_common.config import ConfigError, load_config
    try:
        cfg = load_config(args.config)
        sys.stdout.write(ruleset(cfg, args.component, args.iface, args.operator, args.prometheus, args.switch))
    except (ConfigError, ValueError) as err:
        print(f"firewall: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
