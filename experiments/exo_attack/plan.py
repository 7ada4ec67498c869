"""The attacks of one suite run, in order (docs/security.md lists them with their defences).

Each Attack names what it does and which component must refuse it; judge.py runs it and reads
that component's counter before and after. Where the counter lives:
    rpc_refused         a gRPC server's Stats (cache node, db node, controller): calls refused
                        by the caller checks of control.proto's allowed_roles
    tls_handshake_refused  the same Stats: connections refused in the TLS handshake
    openflow_refused    the controller's Stats: OpenFlow peers that are not the switch
    switch:<cookie>     the packet count of the switch's hygiene rule with that cookie name
                        (controller/exo_controller/flows.py)
    meter:client        the band drops of the attacker's port meter
    <db node>:<counter> a db node's Stats counter
"""
from __future__ import annotations

from dataclasses import dataclass, field

from exo_chaos.worker import chaos_key
from exoskeleton.keyhash import PREFIX_FORWARDED
from exoskeleton.wire import FORWARDED_DSCP

FULL_IDENTITIES = ("nocert", "rogue", "proxy", "plaintext")
QUICK_IDENTITIES = ("nocert", "proxy")
OPENFLOW_IDENTITIES = ("plaintext", "proxy", "rogue")


@dataclass(frozen=True)
class Attack:
    name: str
    kind: str  # grpc | openflow | frame
    refuser: str  # the component that must refuse it
    counter: str  # see the module docstring
    args: dict = field(default_factory=dict)


def _owned_key(cfg, keys: list[int], db_name: str) -> bytes:
    from exo_common.partitions import slot_of
    from exoskeleton.keyhash import key_hash
    owners, bits = cfg.partitions(), cfg.switch.partition_bits
    for i in keys:
        if owners[slot_of(key_hash(chaos_key(i)), bits)] == db_name:
            return chaos_key(i)
    raise ValueError(f"no honest key owned by {db_name}")


def _key_routed_to(cfg, db_name: str, prefix: str) -> str:
    """A fresh key whose partition `db_name` owns."""
    from exo_common.partitions import slot_of
    from exoskeleton.keyhash import key_hash
    owners, bits = cfg.partitions(), cfg.switch.partition_bits
    for i in range(100_000):
        k = f"{prefix}:{i}"
        if owners[slot_of(key_hash(k.encode()), bits)] == db_name:
            return k
    raise ValueError(f"no key for {db_name}")


def _grpc_counter(identity: str, refuser: str) -> str:
    """Where the refusal of `identity`'s call is counted. A certificate of the cluster CA (and, on
    the C++ nodes, none at all) gets through the TLS handshake and is refused by the per-RPC
    check (rpc_refused); a certificate of another CA, plaintext, and on the Python controller a
    missing certificate, are refused in the handshake (tls_handshake_refused; docs/security.md)."""
    if identity in ("rogue", "plaintext") or (identity == "nocert" and refuser == "controller"):
        return "tls_handshake_refused"
    return "rpc_refused"


def attacks(cfg, keys: list[int], quick: bool) -> list[Attack]:
    db0, db1 = cfg.db_nodes[0].name, cfg.db_nodes[1].name
    key = _owned_key(cfg, keys, db0).decode()
    cache_of_key = cfg.cache_node_for_db(db0)
    cache0, cache1 = cfg.cache_nodes[0].name, cfg.cache_nodes[1].name
    out: list[Attack] = []
    for ident in (QUICK_IDENTITIES if quick else FULL_IDENTITIES):
        out += [
            Attack(f"poison_prepare_commit/{ident}", "grpc", cache_of_key, _grpc_counter(ident, cache_of_key),
                   {"attack": "poison", "identity": ident, "target": cache_of_key, "key": key}),
            Attack(f"pending_forever_prepare/{ident}", "grpc", cache_of_key, _grpc_counter(ident, cache_of_key),
                   {"attack": "pending_forever", "identity": ident, "target": cache_of_key, "key": key}),
            Attack(f"forget_cache_node/{ident}", "grpc", db0, _grpc_counter(ident, db0),
                   {"attack": "forget_cache_node", "identity": ident, "target": db0}),
            Attack(f"add_cache_rules_exhaustion/{ident}", "grpc", "controller", _grpc_counter(ident, "controller"),
                   {"attack": "add_rules_exhaustion", "identity": ident, "target": cache0}),
            Attack(f"reset_cache_node/{ident}", "grpc", cache0, _grpc_counter(ident, cache0),
                   {"attack": "reset", "identity": ident, "target": cache0}),
        ]
    # Real components' certificates used beyond their rights: the per-handler checks.
    out += [
        Attack(f"poison_prepare_commit/peer:{db1}", "grpc", cache_of_key, "rpc_refused",
               {"attack": "poison", "identity": f"peer:{db1}", "target": cache_of_key, "key": key}),
        Attack(f"add_cache_rules_for_another_port/peer:{cache1}", "grpc", "controller", "rpc_refused",
               {"attack": "add_rules_exhaustion", "identity": f"peer:{cache1}", "target": cache0}),
    ]
    for ident in (("plaintext", "proxy") if quick else OPENFLOW_IDENTITIES):
        out.append(Attack(f"openflow_claims_switch_dpid/{ident}", "openflow", "controller",
                          "openflow_refused", {"identity": ident}))
    out += [
        Attack("spoofed_source_mac_ip", "frame", "switch", "switch:client_source",
               {"attack": "spoof", "key": _key_routed_to(cfg, db0, "attack:spoof")}),
        # A cache node forwards GETs with prefix 0xAE: the switch drops every client frame with
        # it, and marks those from cache-node ports with a DSCP. Old-style forwards (0xBA, which
        # OpenFlow cannot tell from a PUT): the switch drops a client's that carries the mark and
        # the owning db node refuses an unmarked one (docs/switch-rules.md, "Ingress hygiene").
        Attack("forwarded_frames_from_client", "frame", "switch", "switch:client_forwarded",
               {"attack": "forwarded", "key": key, "prefix": PREFIX_FORWARDED}),
        Attack("forwarded_frames_from_client/old_prefix", "frame", db0, f"{db0}:forwarded_unmarked_dropped",
               {"attack": "forwarded", "key": key}),
        Attack("forwarded_frames_from_client/old_prefix_with_cache_mark", "frame", "switch",
               "switch:client_forwarded", {"attack": "forwarded", "key": key, "dscp": FORWARDED_DSCP}),
        Attack("write_to_wrong_db_node", "frame", db1, f"{db1}:wrong_owner_dropped",
               {"attack": "wrong_owner", "key": _key_routed_to(cfg, db0, "attack:wrong"),
                "route_key": _key_routed_to(cfg, db1, "attack:route")}),
        Attack("flood_above_meter", "frame", "switch", "meter:client",
               {"attack": "flood", "seconds": 1.0 if quick else 2.0}),
    ]
    return out
