"""One control-plane attack, run as a process on an attacker's host by the suite:

    python -m exo_attack.grpc_attack --config cluster.yaml --attack poison --identity proxy \
        --key chaos:003 --out result.json

Every attack is a call (or two) that an honest cluster never lets this identity make; the
result says whether the server let it through (`succeeded`) and with which gRPC status it
refused it. What was refused and counted is the suite's business (suite.py), which reads the
refusing component's counters before and after.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import grpc

from exo_common.config import load_config
from exo_common.tls import server_cert_name
from exoproto import control_pb2 as pb
from exoproto import control_pb2_grpc as rpc

from .identities import IDENTITIES, channel

HUGE_TXID = (1 << 64) - 1  # a txid above any real one: every later write of the key would be BUSY
ROGUE_RULES = 5000  # more than switch.cache_rule_capacity in every config the suite uses


def _identity_channel(args, cfg, address: str, server: str) -> grpc.Channel:
    if cfg.security.insecure_dev_mode:
        # The cluster speaks plaintext (and has no CA to trust): so does every attacker.
        return grpc.insecure_channel(address)
    proxy = cfg.proxies[0].name if cfg.proxies else "proxy0"
    return channel(args.identity, Path(cfg.security.cert_dir), address, server, proxy, Path(args.rogue_dir))


def poison(cfg, args) -> list:
    """Prepare then Commit a value of the attacker's choice on a cached key: the cache node would
    serve it marked FROM_CACHE."""
    stub = rpc.CacheNodeStub(_identity_channel(args, cfg, cfg.node(args.target).grpc, args.target))
    txid = HUGE_TXID - 1
    return [stub.Prepare(pb.PrepareRequest(key=args.key.encode(), txid=txid, value=b"POISONED"), timeout=3),
            stub.Commit(pb.TxRequest(key=args.key.encode(), txid=txid), timeout=3)]


def pending_forever(cfg, args) -> list:
    stub = rpc.CacheNodeStub(_identity_channel(args, cfg, cfg.node(args.target).grpc, args.target))
    return [stub.Prepare(pb.PrepareRequest(key=args.key.encode(), txid=HUGE_TXID, value=b"x"), timeout=3)]


def forget_cache_node(cfg, args) -> list:
    server = server_cert_name(cfg, args.target)
    stub = rpc.DbNodeStub(_identity_channel(args, cfg, cfg.node(args.target).grpc, server))
    victim = cfg.cache_node_for_db(args.target)
    return [stub.ForgetCacheNode(pb.ForgetCacheNodeRequest(cache_node=victim), timeout=3)]


def add_rules_exhaustion(cfg, args) -> list:
    stub = rpc.ControllerStub(_identity_channel(args, cfg, cfg.controller.grpc, "controller"))
    victim = args.target
    rules = [pb.CacheRule(key_hash=(0x5A5A000000 + i) & ((1 << 40) - 1), cache_node=victim, load=1e9)
             for i in range(ROGUE_RULES)]
    return [stub.AddCacheRules(pb.CacheRulesRequest(rules=rules, no_wait=True), timeout=5)]


def reset(cfg, args) -> list:
    stub = rpc.CacheNodeStub(_identity_channel(args, cfg, cfg.node(args.target).grpc, args.target))
    return [stub.Reset(pb.StatsRequest(), timeout=3)]


ATTACKS = {"poison": poison, "pending_forever": pending_forever, "forget_cache_node": forget_cache_node,
           "add_rules_exhaustion": add_rules_exhaustion, "reset": reset}


def _accepted(reply) -> bool:
    """A reply that came back OK but says the server did nothing is not a success either."""
    if isinstance(reply, pb.TxReply):
        return reply.ok
    if isinstance(reply, pb.CacheRulesReply):
        return reply.accepted > 0
    return True


def run(cfg, args) -> dict:
    out = {"attack": args.attack, "identity": args.identity, "target": args.target}
    try:
        replies = ATTACKS[args.attack](cfg, args)
    except grpc.RpcError as err:
        out.update(succeeded=False, code=err.code().name, details=(err.details() or "")[:300])
        return out
    out.update(succeeded=all(_accepted(r) for r in replies), code="OK",
               details="; ".join(str(r).replace("\n", " ")[:150] for r in replies))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, type=Path)
    ap.add_argument("--attack", required=True, choices=sorted(ATTACKS))
    ap.add_argument("--identity", required=True, help=f"{', '.join(IDENTITIES)} or peer:<name>")
    ap.add_argument("--target", required=True, help="node name the attack is aimed at")
    ap.add_argument("--key", default="")
    ap.add_argument("--rogue-dir", default="/tmp/exo/attack/rogue")
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args(argv)
    cfg = load_config(a.config)
    a.out.write_text(json.dumps(run(cfg, a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
