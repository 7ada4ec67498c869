"""`exo stats`: a running cluster at a glance, from three independent sources:
- every node's gRPC Stats (its counters, docs/operations.md "Counters"): up or down, requests/s,
  hits;
- the controller's Stats: its view of each cache node (UP / DOWN / REJOINING), the rule budget
  (flow-mods in the last 1 s against R, changes queued for budget, flow-mods the switch refused)
  and the Ruleset 2 size it believes the switch holds;
- the switch itself: Ruleset 2's size by `ovs-ofctl dump-aggregate` (exo_topo.switch_audit).

Rates need two samples: `view(prev, cur)` turns two snapshots taken `interval` apart into the
table's figures; it is pure (no I/O) and unit-tested. `collect` takes one snapshot.

Definitions (per interval):
  requests/s  requests the node received: a cache node's GETs (hits and forwarded misses), a db
              node's GETs, PUTs and DELETEs
  hit ratio   share of GETs answered by cache nodes: cache hits / (cache hits + db node GETs); a
              GET a cache node forwards is counted once, at the db node (as in the demo)
A counter that went down (a restarted node) counts from zero again.
"""
from __future__ import annotations

import time
from typing import Optional

CONTROLLER_STATE = {0: "up", 1: "down", 2: "rejoining"}  # `cache_node_state <name>` values


def collect(cfg, stubs, timeout: float = 2.0) -> dict:
    """One snapshot: {"t", "nodes": {name: counters or None}, "errors": {name: why}, "controller":
    counters or None, "ruleset2_switch": int or None}."""
    from exo_topo.switch_audit import AuditError, ruleset2_count

    snap: dict = {"t": time.monotonic(), "nodes": {}, "errors": {}, "controller": None, "ruleset2_switch": None}
    for n in [*cfg.cache_nodes, *cfg.db_nodes]:
        try:
            snap["nodes"][n.name] = stubs.stats(n.name, timeout=timeout)
        except Exception as err:  # noqa: BLE001 - any failure means "down"; the reason is shown
            snap["nodes"][n.name] = None
            snap["errors"][n.name] = _why(err)
    try:
        snap["controller"] = stubs.controller_stats(timeout=timeout)
    except Exception as err:  # noqa: BLE001
        snap["errors"]["controller"] = _why(err)
    try:
        snap["ruleset2_switch"] = ruleset2_count(cfg.switch.bridge)
    except (AuditError, OSError, TimeoutError) as err:
        snap["errors"]["switch"] = str(err)
    return snap


def _why(err: Exception) -> str:
    code = getattr(err, "code", None)
    if callable(code):  # a grpc.RpcError
        return f"{code().name}: {err.details()}"  # type: ignore[attr-defined]
    return str(err)


def _requests(role: str, c: dict) -> int:
    if role == "cache":
        return c.get("gets", 0)
    return c.get("gets", 0) + c.get("puts", 0) + c.get("deletes", 0)


def _delta(cur: int, prev: int) -> int:
    return cur - prev if cur >= prev else cur


def view(prev: dict, cur: dict, roles: dict[str, str], rule_update_rate: float, capacity: int) -> dict:
    """The figures `exo stats` shows (and prints with --json) from two snapshots; roles: node
    name -> "cache" or "db", in display order."""
    dt = cur["t"] - prev["t"]
    if dt <= 0:
        raise ValueError(f"the snapshots are {dt:g} s apart: the second must be later")
    ctl = cur.get("controller")
    nodes = []
    d_hits = d_db_gets = 0
    hits = db_gets = 0
    for name, role in roles.items():
        c, p = cur["nodes"].get(name), prev["nodes"].get(name)
        ctl_state = None
        if role == "cache" and ctl is not None and f"cache_node_state {name}" in ctl:
            ctl_state = CONTROLLER_STATE.get(ctl[f"cache_node_state {name}"], "?")
        state = "down" if c is None else (ctl_state if ctl_state not in (None, "up") else "up")
        row = {"name": name, "role": role, "state": state, "controller_view": ctl_state,
               "requests_per_s": None, "hits_per_s": None, "hits": None, "cached_keys": None,
               "error": cur.get("errors", {}).get(name)}
        if c is not None:
            if role == "cache":
                row["hits"] = c.get("hits", 0)
                row["cached_keys"] = c.get("entries", 0)
                hits += c.get("hits", 0)
            else:
                db_gets += c.get("gets", 0)
        if c is not None and p is not None:
            row["requests_per_s"] = round(_delta(_requests(role, c), _requests(role, p)) / dt, 1)
            if role == "cache":
                dh = _delta(c.get("hits", 0), p.get("hits", 0))
                row["hits_per_s"] = round(dh / dt, 1)
                d_hits += dh
            else:
                d_db_gets += _delta(c.get("gets", 0), p.get("gets", 0))
        nodes.append(row)
    budget = None
    if ctl is not None:
        budget = {"rule_update_rate": rule_update_rate,
                  **{k: ctl.get(k, 0) for k in ("rule_updates_last_1s", "rule_updates_per_s_max",
                                                "rule_adds_queued", "rule_deletes_queued", "flow_mods_refused")}}
    return {
        "interval_s": round(dt, 3),
        "nodes": nodes,
        "nodes_up": sum(1 for n in nodes if n["state"] == "up"),
        "gets_per_s": round((d_hits + d_db_gets) / dt, 1),
        "hit_ratio": round(d_hits / (d_hits + d_db_gets), 4) if d_hits + d_db_gets else None,
        "hit_ratio_lifetime": round(hits / (hits + db_gets), 4) if hits + db_gets else None,
        "rule_budget": budget,
        "ruleset2": {"switch": cur.get("ruleset2_switch"),
                     "controller": None if ctl is None else ctl.get("ruleset2_installed"),
                     "capacity": capacity},
        "controller_up": ctl is not None,
        "errors": dict(cur.get("errors", {})),
    }


def _num(v, fmt: str = ",.1f") -> str:
    return "-" if v is None else format(v, fmt)


def render(v: dict, title: str) -> list[str]:
    """The table as lines of text."""
    lines = [title,
             f"{'node':<12} {'role':<6} {'state':<10} {'requests/s':>11} {'hits/s':>9} {'hits':>12} {'cached keys':>12}"]
    for n in v["nodes"]:
        lines.append(f"{n['name']:<12} {n['role']:<6} {n['state']:<10} {_num(n['requests_per_s']):>11} "
                     f"{_num(n['hits_per_s']):>9} {_num(n['hits'], ',d'):>12} {_num(n['cached_keys'], ',d'):>12}")
    ratio = "- (no GETs)" if v["hit_ratio"] is None else f"{100 * v['hit_ratio']:.1f}%"
    life = "-" if v["hit_ratio_lifetime"] is None else f"{100 * v['hit_ratio_lifetime']:.1f}%"
    lines.append(f"GETs answered by cache nodes: {ratio} of {_num(v['gets_per_s'])} GETs/s "
                 f"(since the nodes started: {life})")
    b = v["rule_budget"]
    if b is None:
        lines.append("rule budget: - (controller not answering)")
    else:
        lines.append(f"rule budget: {b['rule_updates_last_1s']} of R = {b['rule_update_rate']:g} flow-mods in the last 1 s "
                     f"(busiest 1 s: {b['rule_updates_per_s_max']}); queued {b['rule_adds_queued']} adds, "
                     f"{b['rule_deletes_queued']} deletes; refused by the switch {b['flow_mods_refused']}")
    r = v["ruleset2"]
    lines.append(f"Ruleset 2: {_num(r['switch'], ',d')} rules on the switch (controller: {_num(r['controller'], ',d')}) "
                 f"of capacity C = {r['capacity']:,}")
    for who, why in v["errors"].items():
        lines.append(f"  {who}: {why}")
    return lines


def roles_of(cfg) -> dict[str, str]:
    return {**{n.name: "cache" for n in cfg.cache_nodes}, **{n.name: "db" for n in cfg.db_nodes}}


def header(cluster: str, v: dict, at: Optional[float] = None) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(at or time.time()))
    return f"cluster {cluster!r} at {when}: {v['nodes_up']}/{len(v['nodes'])} nodes up, over {v['interval_s']:g} s"


def run(st, interval: float, watch: bool, as_json: bool) -> int:
    """Print one table from two snapshots `interval` apart; with watch, a new one every interval
    until Ctrl-C (a terminal is redrawn in place; JSON is one object per line)."""
    import json
    import signal
    import sys

    from exo_common.config import load_config
    from exo_topo.grpc_clients import Stubs

    live = None
    stubs = None
    try:
        cfg = load_config(st.data["cluster_yaml"])
        roles = roles_of(cfg)
        stubs = Stubs(cfg)
        stubs.check_identity()  # a missing operator certificate is one clear error, not every node "down"
        prev = collect(cfg, stubs)
        while True:
            time.sleep(max(0.0, prev["t"] + interval - time.monotonic()))
            cur = collect(cfg, stubs)
            v = view(prev, cur, roles, cfg.switch.rule_update_rate, cfg.switch.cache_rule_capacity)
            if as_json:
                print(json.dumps({"cluster": st.cluster, "time": round(time.time(), 3), **v}), flush=True)
            elif watch and sys.stdout.isatty():
                from rich.live import Live
                from rich.text import Text
                text = Text("\n".join(render(v, header(st.cluster, v)) + ["(Ctrl-C ends)"]))
                if live is None:
                    live = Live(text, auto_refresh=False)
                    live.start()
                live.update(text, refresh=True)
            else:
                print("\n".join(render(v, header(st.cluster, v))) + ("\n" if watch else ""), flush=True)
            if not watch:
                return 0
            prev = cur
    except KeyboardInterrupt:
        # The way to end --watch. A second SIGINT (`timeout` signals its child and then its
        # process group) must not turn the clean exit below into a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return 0
    finally:
        if live is not None:
            live.stop()
        if stubs is not None:
            stubs.close()
