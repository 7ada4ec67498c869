"""What each name of the controller's Stats is, for its Prometheus exposition (metrics.py).

The controller's Stats is a dict built from several places (app.py's event counters, the rule
updater's and the liveness monitor's metrics, the ingress drop counts read back from the switch);
this table declares each name once: COUNTER (only grows; exposed as exo_controller_<name>_total)
or GAUGE (a level; exo_controller_<name>), its help text, and for names of the form
"<name> <value>" (one entry per cache node, client or switch error) the label the value goes in.
A name with a unit abbreviation Prometheus does not accept (`_s_`, `_ms_`) has `prom`, its
exposed name in base units. tests/unit/test_controller_metrics.py fails while a name the
controller produces is missing here. Pure data and one pure function: no I/O.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

COUNTER, GAUGE = "counter", "gauge"
PREFIX = "exo_controller_"


@dataclass(frozen=True)
class Stat:
    kind: str
    help: str
    label: str = ""        # "<name> <value>" entries: the label holding <value>
    prom: str = ""         # exposed base name when it differs from the Stats name
    hidden: bool = False   # not exposed (the same figure in another unit is)


_C, _G = COUNTER, GAUGE
STATS: dict[str, Stat] = {
    # app.py: the switch connection and its OpenFlow errors
    "switch_connected": Stat(_G, "1 while the switch's OpenFlow connection is up"),
    "switch_programmed": Stat(_G, "1 once the connected switch has Rulesets 1 and 3 (and its meters)"),
    "switch_connects": Stat(_C, "OpenFlow connections of the switch (datapath features received)"),
    "switch_disconnects": Stat(_C, "OpenFlow connections of the switch that ended"),
    "switch_tables_kept": Stat(_C, "reconnects whose flow table already held our static rules: kept"),
    "switch_tables_flushed": Stat(_C, "reconnects whose flow table was not ours: flushed and reprogrammed"),
    "table_read_failures": Stat(_C, "flow-table reads of a newly connected switch that failed"),
    "batches_failed": Stat(_C, "flow-mod batches the switch did not confirm in time: resent"),
    "ofp_errors": Stat(_C, "OpenFlow error messages from the switch"),
    "ofp_error": Stat(_C, "OpenFlow error messages from the switch, by type and code", label="error"),
    "port_added": Stat(_C, "switch port-status messages: port added"),
    "port_deleted": Stat(_C, "switch port-status messages: port deleted"),
    "port_modified": Stat(_C, "switch port-status messages: port modified (link up or down)"),
    # leadership.py / failover.py: controller failover (docs/design/replication.md, 5.4)
    "controller_master": Stat(_G, "1 while this instance is master: elected and confirmed ROLE MASTER by the switch"),
    "controller_generation": Stat(_G, "this instance's election generation (OpenFlow generation_id); 0 when standby"),
    "role_master_confirmed": Stat(_C, "ROLE_REPLY(MASTER) with our generation: this instance started writing"),
    "leader_elections_won": Stat(_C, "etcd elections this instance won"),
    "leader_revokes": Stat(_C, "master leases this standby revoked after two refused Pings in a row"),
    "not_master_refusals": Stat(_C, "AddCacheRules/RemoveCacheRules refused FAILED_PRECONDITION: this instance is not the master"),
    "cache_rules_accepted": Stat(_C, "cache rules AddCacheRules/RemoveCacheRules accepted"),
    "cache_rules_rejected": Stat(_C, "cache rules AddCacheRules/RemoveCacheRules refused (full, unknown node, switch error)"),
    # docs/security.md: refusals
    "rpc_refused": Stat(_C, "gRPC calls refused by the caller checks (no or unknown certificate, role not allowed)"),
    "openflow_refused": Stat(_C, "OpenFlow peers turned away before getting a datapath (TLS failed or not the switch)"),
    "tls_handshake_refused": Stat(_C, "TLS handshakes gRPC refused (no client certificate, another CA's, no TLS; "
                                      "as a client, a server of another CA): grpc_handshake_counter.py"),
    # rule_updater.py (docs/cache-fill.md section 3)
    "rule_adds_queued": Stat(_G, "Ruleset 2 adds waiting for the rate limit"),
    "rule_deletes_queued": Stat(_G, "Ruleset 2 deletes waiting for the rate limit"),
    "rule_deletes_held": Stat(_G, "Ruleset 2 deletes held until every cache node has synced its rules"),
    "ruleset2_desired": Stat(_G, "cache rules the cache nodes asked for"),
    "ruleset2_installed": Stat(_G, "cache rules on the switch now"),
    "ruleset2_max": Stat(_G, "most cache rules on the switch at once since the controller started"),
    "ruleset2_capacity": Stat(_G, "Ruleset 2 capacity C (switch.cache_rule_capacity)"),
    "rule_updates_last_1s": Stat(_G, "flow-mods in the rate window (the last second) now"),
    "rule_updates_per_s_max": Stat(_G, "flow-mods in the busiest one-second window since the start (never above R)",
                                   prom="rule_updates_per_second_max"),
    "flow_mods_sent": Stat(_C, "flow-mods sent, every ruleset"),
    "ruleset2_flow_mods_sent": Stat(_C, "Ruleset 2 flow-mods sent (adds, deletes, withdrawals)"),
    "flow_mods_in_flight": Stat(_G, "flow-mods sent and not yet confirmed by a barrier"),
    "flow_mods_refused": Stat(_C, "flow-mods the switch refused (e.g. table full)"),
    "fault_no_rate_limit": Stat(_G, "1 when the controller runs the no-rate-limit test fault"),
    "static_pending": Stat(_G, "static rules (Rulesets 1 and 3, meters) not yet confirmed on the switch"),
    "withdrawals_queued": Stat(_G, "withdrawals of a dead cache node's rules not yet confirmed"),
    "cache_nodes_unsynced": Stat(_G, "cache nodes whose rules the controller has not rebuilt since it started"),
    # liveness.py (docs/switch-rules.md, "Cache node liveness")
    "cache_node_state": Stat(_G, "a cache node's state: 0 UP, 1 DOWN, 2 REJOINING", label="node"),
    "cache_nodes_down": Stat(_G, "cache nodes not UP"),
    "cache_node_downs": Stat(_C, "cache nodes declared DOWN"),
    "cache_node_withdrawals": Stat(_C, "withdrawals of a DOWN cache node's rules"),
    "cache_node_rejoins": Stat(_C, "cache nodes back UP after a DOWN"),
    "cache_node_heartbeat_misses": Stat(_C, "heartbeats (CacheNode.Stats) that failed or timed out"),
    "cache_node_forgets": Stat(_C, "DbNode.ForgetCacheNode calls the db nodes acknowledged"),
    "cache_node_forget_failures": Stat(_C, "DbNode.ForgetCacheNode calls that failed (retried)"),
    "cache_node_reset_failures": Stat(_C, "CacheNode.Reset calls that failed (retried)"),
    "withdraw_s_last": Stat(_G, "seconds the last withdrawal took, from DOWN to the switch's confirmation",
                            prom="withdraw_seconds_last"),
    "withdraw_s_max": Stat(_G, "longest withdrawal since the start, seconds", prom="withdraw_seconds_max"),
    "withdraw_ms_last": Stat(_G, "withdraw_s_last in milliseconds", hidden=True),
    # db_liveness.py / chain_exec.py: db nodes at replication.factor > 1 (docs/replication.md, "Failover")
    "db_node_state": Stat(_G, "a db node's state: 0 UP, 1 DOWN, 2 not yet heard from", label="node"),
    "db_nodes_down": Stat(_G, "member db nodes DOWN"),
    "db_node_downs": Stat(_C, "db nodes declared DOWN (restarts included)"),
    "db_node_restarts": Stat(_C, "db nodes that answered with another incarnation: restarted"),
    "db_node_heartbeat_misses": Stat(_C, "db node heartbeats (DbNode.ChainStatus) that failed or timed out"),
    "db_members": Stat(_G, "db nodes that are members (exo node add/remove)"),
    "chain_table_version": Stat(_G, "version of the chain table the master pushed last"),
    "learners_catching_up": Stat(_G, "learners in the chain table (slot copies not yet handed over)"),
    "slots_without_reader": Stat(_G, "slots whose GETs nobody answers now (a hand-over in progress)"),
    "chain_nodes_min": Stat(_G, "fewest nodes any slot's chain has (learners not counted)"),
    "chain_reconfigurations": Stat(_C, "chain plans carried out to the end"),
    "chain_plans_refused": Stat(_C, "chain plans refused (a slot would have had no node)"),
    "chain_plans_aborted": Stat(_C, "chain plans stopped halfway (a hand-over whose writes did not drain)"),
    "chain_push_failures": Stat(_C, "DbNode.SetChains calls that failed (retried while the node lives)"),
    "chain_cache_resets": Stat(_C, "CacheNode.Reset calls before a new head took writes"),
    "chain_cache_reset_failures": Stat(_C, "cache nodes not reset before a new head took writes"),
    "chain_handovers": Stat(_C, "slots a caught-up learner took over as read server"),
    "chain_adoptions": Stat(_C, "chain tables adopted (start, or becoming master)"),
    # book_store.py / ratewin_store.py: the rest of the desired state in etcd (docs/etcd.md)
    "book_sync_corrections": Stat(_C, "Ruleset 2 references a cache node's ListKeys sync added to or dropped from the book loaded from etcd (0: etcd's book was exact)"),
    "book_store_failures": Stat(_C, "writes of the Ruleset 2 book to etcd that failed (the change was undone, or is retried)"),
    "ratewin_store_failures": Stat(_C, "writes of the rate-window record to etcd that failed (a batch not sent, or left unconfirmed there)"),
    "desired_state_load_failures": Stat(_C, "reads of the book or the rate-window record from etcd that failed when becoming master (retried)"),
    "chain_store_saves": Stat(_C, "chain table and membership written to etcd (controller.etcd)"),
    "chain_store_failures": Stat(_C, "etcd writes or reads of the chain table that failed (deposed, or etcd unreachable)"),
    "last_failover_s": Stat(_G, "seconds from a db node's first missed heartbeat to its removal confirmed by the switch",
                            prom="last_failover_seconds"),
    "last_handover_s": Stat(_G, "seconds the last hand-over to a caught-up learner took", prom="last_handover_seconds"),
    "last_failover_ms": Stat(_G, "last_failover_s in milliseconds", hidden=True),
    "last_handover_ms": Stat(_G, "last_handover_s in milliseconds", hidden=True),
    # ingress.py: table 0's refusals read back from the switch (docs/switch-rules.md)
    "ingress_client_source_dropped": Stat(_C, "IPv4 or ARP frames from a client port without its own MAC + IP "
                                          "(or too malformed for the switch to read it): dropped", label="client"),
    "ingress_client_other_dropped": Stat(_C, "frames of other protocols (IPv6 neighbour discovery, ...) from a "
                                         "client port: dropped", label="client"),
    "ingress_client_forwarded_dropped": Stat(_C, "frames from a client port posing as forwarded misses: dropped",
                                             label="client"),
    "ingress_unknown_port_dropped": Stat(_C, "frames from a switch port the config does not name: dropped"),
    "ingress_meter_dropped": Stat(_C, "frames over a client port's meter: dropped", label="client"),
}

_INVALID = re.compile(r"[^a-zA-Z0-9_]")


@dataclass(frozen=True)
class Sample:
    family: str               # exposed family name without the counter's _total
    kind: str                 # counter | gauge | unknown (undeclared)
    help: str
    labels: tuple[tuple[str, str], ...]
    value: float


def samples(stats: dict[str, float]) -> list[Sample]:
    """Stats -> what the /metrics page shows: every declared name (0 when the controller has not
    produced it yet, so a rate() has a start), each "<name> <value>" entry under its label (the
    unlabeled total of such a name is left out: sum() the labeled series), undeclared names as
    untyped gauges so nothing is lost silently."""
    out: list[Sample] = []
    seen: set[str] = set()
    for key in sorted(stats):
        base, _, labelvalue = key.partition(" ")
        stat = STATS.get(base)
        if stat is None:
            name = PREFIX + _INVALID.sub("_", base)
            labels = (("name", labelvalue),) if labelvalue else ()
            out.append(Sample(name, "unknown", f"undeclared controller stat {base!r} (exo_controller/stat_kinds.py)",
                              labels, float(stats[key])))
            continue
        if stat.hidden or (stat.label and not labelvalue):
            continue
        labels = ((stat.label, labelvalue),) if stat.label and labelvalue else ()
        out.append(Sample(PREFIX + (stat.prom or base), stat.kind, stat.help, labels, float(stats[key])))
        seen.add(base)
    for base, stat in sorted(STATS.items()):
        if base not in seen and not stat.hidden and not stat.label:
            out.append(Sample(PREFIX + (stat.prom or base), stat.kind, stat.help, (), 0.0))
    return out


def declared(name: str) -> Optional[Stat]:
    """The declaration of a Stats name ("ofp_error 1.2" -> that of "ofp_error"), None if none."""
    return STATS.get(name.partition(" ")[0])
