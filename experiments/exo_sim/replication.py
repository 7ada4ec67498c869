"""The replicated layout (issue 15, outcome 5; docs/design/replication.md, sections 2.1, 2.3
and 7): what chains of `rf` db nodes cost on the switch and how they spread the load, from the
cluster's own chain table (exo_common.partitions.chain_table), for the design's Appendix A
clusters and 1,024 db nodes.

Per cluster (N db nodes, partition_bits) and placement (plain ring: max_load 0; bounded loads
with the tail cap: max_load 1):

    heads        slots each node heads (takes the writes of): max / mean / min
    tails        slots each node is the read server of (GETs that miss the cache): max / min
    rules        Ruleset 3 rules: 2^bits at rf 1, 2 * 2^bits at rf > 1 (a read and a write
                 rule per slot, section 2.3)
    flow-mods    per db node failure: heads(X) + tails(X) rules move (the write rule of each
                 slot X headed, the read rule of each slot X served; a middle moves nothing);
                 0 at rf 1, where nothing fails over. Mean and max over the nodes.
    failover     flow-mods / R seconds on the switch (a model: the rate window alone, R = 50/s
                 on the thesis's Pica8; no controller or etcd time)
    throughput   a fluid model with no cache and uniform keys: a node's load is the GET share
                 of the slots it serves reads of plus rf x the PUT share of the slots it holds;
                 the cluster saturates when its busiest node does. In node capacities.

Pure: layout_figures() and throughput_by_write_share() compute from a chain table, after
partitions.check_chains accepts it (a layout that repeats a node, or is empty, is refused).

    python -m exo_sim.replication [--replication 3] [--quick] [--out results/sim]
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

from exo_common.config import SwitchSection
from exo_common.partitions import chain_table, check_chains

from .common import progress, write_result

# The design's Appendix A clusters, then the 1,024-node layout the issue asks for.
CLUSTERS = ((4, 8), (4, 4), (32, 8), (1024, 12))
PLACEMENTS = {"plain_ring": 0.0, "bounded_tail_cap": 1.0}  # name -> max_load (1: heads and tails capped)
WRITE_SHARES = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0)
VNODES = SwitchSection().virtual_nodes


def names_of(n: int) -> list[str]:
    return [f"db{i}" for i in range(n)]


def _stats(counts: list[int]) -> dict:
    return {"max": max(counts), "mean": round(statistics.fmean(counts), 3), "min": min(counts)}


def layout_figures(chains: list[list[str]], names: list[str], rf: int, rule_rate: float) -> dict:
    """The figures of one chain table (slot -> [head, ..., tail]) over db nodes `names`."""
    if not rule_rate > 0:
        raise ValueError(f"rule_rate: must be > 0 rule updates/s (got {rule_rate})")
    check_chains(chains, [c[0] if c else "" for c in chains], rf, names)  # refuses an empty chain by name
    slots = len(chains)
    if slots & (slots - 1):
        raise ValueError(f"chains: {slots} slots, not a power of two (2^partition_bits)")
    heads = collections.Counter(c[0] for c in chains)
    tails = collections.Counter(c[-1] for c in chains)
    replicated = any(len(c) > 1 for c in chains)
    per_failure = [heads[x] + tails[x] if replicated else 0 for x in names]
    return {
        "db_nodes": len(names), "slots": slots, "rf": rf,
        "chain_length": _stats([len(c) for c in chains]),
        "heads": _stats([heads[x] for x in names]),
        "tails": _stats([tails[x] for x in names]),
        "ruleset3_rules": 2 * slots if replicated else slots,
        "flow_mods_per_db_failure": {"mean": round(statistics.fmean(per_failure), 2), "max": max(per_failure)},
        "failover_s_on_switch_model": {"mean": round(statistics.fmean(per_failure) / rule_rate, 2),
                                       "max": round(max(per_failure) / rule_rate, 2), "R": rule_rate,
                                       "model": "flow-mods / R: the switch's rate window alone"},
    }


def throughput_by_write_share(chains: list[list[str]], names: list[str],
                              write_shares=WRITE_SHARES) -> dict[str, float]:
    """Write share -> cluster throughput in node capacities (uniform keys, no cache): the
    offered rate at which the busiest node reaches its capacity. Every slot gets 1/slots of
    the requests; its read server answers the GETs, every member applies the PUTs."""
    slots = len(chains)
    reads = collections.Counter(c[-1] for c in chains)
    holds = collections.Counter(x for c in chains for x in c)
    out = {}
    for w in write_shares:
        if not 0 <= w <= 1:
            raise ValueError(f"write share: must be in [0, 1] (got {w})")
        busiest = max(((1 - w) * reads[x] + w * holds[x]) / slots for x in names)
        out[f"{w:g}"] = round(1 / busiest, 2)
    return out


def study(rf: int, clusters=CLUSTERS, rule_rate: float = SwitchSection().rule_update_rate,
          vnodes: int = VNODES) -> dict:
    rows = []
    for n, bits in clusters:
        names = names_of(n)
        for placement, max_load in PLACEMENTS.items():
            progress(f"replication: N={n} bits={bits} rf={rf} {placement}")
            chains = chain_table(names, bits, vnodes, max_load, rf)
            row = {"partition_bits": bits, "placement": placement, "max_load": max_load, "vnodes": vnodes,
                   **layout_figures(chains, names, min(rf, n), rule_rate),
                   "throughput_node_capacities_by_write_share": throughput_by_write_share(chains, names)}
            if rf > 1:  # the same nodes without replication, for the throughput comparison
                row["throughput_node_capacities_by_write_share_rf1"] = throughput_by_write_share(
                    chain_table(names, bits, vnodes, max_load, 1), names)
            rows.append(row)
    return {"rf": rf, "rule_rate": rule_rate, "vnodes": vnodes, "rows": rows,
            "notes": ["Layouts are exo_common.partitions.chain_table's, the initial table of a cluster config "
                      "(replication.factor, switch.partition_bits, switch.virtual_nodes, switch.max_partition_load).",
                      "flow-mods per failure = slots the node heads + slots it serves reads of; failover seconds "
                      "= that / R: a model of the switch's rate window, nothing else.",
                      "Throughput: fluid model, uniform keys, no cache, every node one unit of capacity, "
                      "a PUT costs each chain member one unit (as a GET costs the read server)."]}


def table(doc: dict) -> str:
    rows = [f"replicated layout, rf {doc['rf']}, vnodes {doc['vnodes']}, R = {doc['rule_rate']:g}/s",
            f"{'N':>5} {'bits':>4} {'placement':>17} {'heads max/mean':>15} {'tails max/min':>14} "
            f"{'R3 rules':>9} {'flow-mods/failure mean/max':>27} {'failover s (model) mean/max':>28} "
            f"{'thru w=0/0.1/0.5 (rf1)':>30}"]
    for r in doc["rows"]:
        t, t1 = r["throughput_node_capacities_by_write_share"], r.get("throughput_node_capacities_by_write_share_rf1")
        thru = f"{t['0']:g}/{t['0.1']:g}/{t['0.5']:g}" + (f" ({t1['0']:g}/{t1['0.1']:g}/{t1['0.5']:g})" if t1 else "")
        fm, fs = r["flow_mods_per_db_failure"], r["failover_s_on_switch_model"]
        rows.append(f"{r['db_nodes']:>5} {r['partition_bits']:>4} {r['placement']:>17} "
                    f"{r['heads']['max']:>7} / {r['heads']['mean']:<6g} {r['tails']['max']:>6} / {r['tails']['min']:<5} "
                    f"{r['ruleset3_rules']:>9} {fm['mean']:>15g} / {fm['max']:<9} {fs['mean']:>16g} / {fs['max']:<9g} "
                    f"{thru:>30}")
    return "\n".join(rows)


def plot(doc: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    big = [r for r in doc["rows"] if r["db_nodes"] == max(x["db_nodes"] for x in doc["rows"])]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r, style in zip(big, ("--", "-")):
        t = r["throughput_node_capacities_by_write_share"]
        ws = [float(w) for w in t]
        a1.plot(ws, list(t.values()), style, marker="o", label=f"rf {doc['rf']}, {r['placement']}")
        if "throughput_node_capacities_by_write_share_rf1" in r:
            t1 = r["throughput_node_capacities_by_write_share_rf1"]
            a1.plot(ws, list(t1.values()), style, marker="x", label=f"rf 1, {r['placement']}")
    a1.set_xlabel("PUT share of requests")
    a1.set_ylabel("throughput, node capacities (model)")
    a1.set_title(f"{big[0]['db_nodes']} db nodes, {big[0]['slots']} slots, uniform keys, no cache")
    a1.legend(fontsize=8)
    labels = [f"N={r['db_nodes']} b={r['partition_bits']}\n{r['placement'].replace('_', ' ')}" for r in doc["rows"]]
    xs = range(len(labels))
    a2.bar([x - 0.2 for x in xs], [r["failover_s_on_switch_model"]["mean"] for r in doc["rows"]], 0.4, label="mean")
    a2.bar([x + 0.2 for x in xs], [r["failover_s_on_switch_model"]["max"] for r in doc["rows"]], 0.4, label="max")
    a2.set_xticks(list(xs), labels, fontsize=7, rotation=30)
    a2.set_ylabel(f"s at R = {doc['rule_rate']:g}/s (model)")
    a2.set_title("Ruleset 3 flow-mods per db node failure / R")
    a2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parser(prog: str = "python -m exo_sim.replication") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--replication", type=int, default=3, help="db nodes per chain (default 3)")
    ap.add_argument("--rule-rate", type=float, default=SwitchSection().rule_update_rate,
                    help="R, switch rule updates/s")
    ap.add_argument("--quick", action="store_true", help="accepted for `make sim QUICK=1`; the study takes seconds")
    ap.add_argument("--out", type=Path, default=Path("results/sim"))
    ap.add_argument("--no-plot", action="store_true")
    return ap


def run(replication: int, rule_rate: float, out: Path, no_plot: bool = False) -> dict:
    if replication < 1:
        raise SystemExit(f"exo_sim: --replication: must be >= 1 (got {replication})")
    if not rule_rate > 0:
        raise SystemExit(f"exo_sim: --rule-rate: must be > 0 (got {rule_rate})")
    doc = study(replication, rule_rate=rule_rate)
    path = write_result(out, "replication", doc)
    if not no_plot:
        plot(doc, out / "replication.png")
    progress(f"wrote {path}")
    return doc


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    print(table(run(args.replication, args.rule_rate, args.out, args.no_plot)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
