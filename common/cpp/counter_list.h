// Every counter a C++ program reports in its Stats RPC, declared once (Pelikan style): one
// X(name, kind, help) line per counter. Generated from these lists: the storage of each program
// (cache-node/src/counters.h, db-node/src/counters.h, the emulator's LaneCounters in
// emulator/src/emulator.h), the names and order of the Stats replies, and the counters tables
// in docs/operations.md (tests/counter_list_test.cc fails while a table differs from its list,
// and rewrites them when run with EXO_UPDATE_DOCS=1). A new counter is one line here plus its
// bump site.
//
// kind: COUNTER only grows (a rate is its difference over time; sums over threads and nodes
// make sense); GAUGE is a level (how many now), read or set at Stats time.
#pragma once

#include <atomic>
#include <cstdint>

// ---- cache node (exo-cache-node) ----

// Data-plane counters: one copy per lcore, which is its only writer; summed on read.
#define EXO_CACHE_DP_COUNTERS(X)                                                                 \
  X(rx_frames, COUNTER, "frames received")                                                       \
  X(tx_frames, COUNTER, "frames handed to the NIC (replies + forwarded misses)")                 \
  X(tx_dropped, COUNTER, "frames the NIC TX queue refused (freed)")                              \
  X(ignored, COUNTER, "frames not for us: foreign dst prefix, own src MAC, other UDP port")      \
  X(malformed_dropped, COUNTER,                                                                  \
    "frames with our prefix that failed parsing, are not GETs or are longer than 14 + mtu: "    \
    "dropped, never answered")                                                                   \
  X(gets, COUNTER, "well-formed GET requests")                                                   \
  X(hits, COUNTER, "GETs answered from memory")                                                  \
  X(forwarded_misses, COUNTER,                                                                   \
    "GETs forwarded to the db node, prefix 0xAA -> 0xAE (not cached, or pending a write)")       \
  X(requests_served, COUNTER, "replies sent by this node")                                       \
  X(rate_limited, COUNTER,                                                                       \
    "frames dropped on arrival by cache_nodes[].rate_limit_rps (scaled experiments; 0 on a "    \
    "deployment)")

// Control-plane counters: bumped by gRPC handler threads, hence atomic.
#define EXO_CACHE_CP_COUNTERS(X)                                                                  \
  X(cached_inserts, COUNTER, "keys inserted by Cache()")                                         \
  X(evictions, COUNTER, "entries removed by Evict() or LRU capacity")                            \
  X(prepares, COUNTER, "Prepare() that marked a held key pending")                               \
  X(commits, COUNTER, "Commit() applied")                                                         \
  X(aborts, COUNTER, "Abort() applied")                                                           \
  X(reports_received, COUNTER, "REPORTs from db nodes accepted into the hot list")               \
  X(reports_rejected, COUNTER, "REPORTs refused: unknown db node, bad key or rate")              \
  X(fill_rounds, COUNTER, "selection rounds run by the filler")                                  \
  X(fill_admitted, COUNTER, "keys the filler admitted (inserted, or a retirement cancelled)")    \
  X(fill_evicted, COUNTER, "keys the filler marked retiring")                                    \
  X(fill_fetch_failed, COUNTER, "keys the filler could not fetch (db node unreachable)")         \
  X(fill_rule_errors, COUNTER, "failed AddCacheRules/RemoveCacheRules calls of the filler/retirer") \
  X(fill_rules_deferred, COUNTER, "rule adds the controller turned down because Ruleset 2 was full; sent again next round") \
  X(retired, COUNTER, "retiring entries erased after their rule was removed")                    \
  X(resets, COUNTER, "Reset() calls: every entry dropped after the controller had declared us dead") \
  X(rpc_refused, COUNTER,                                                                         \
    "gRPC calls refused by the caller checks: no client certificate (UNAUTHENTICATED), a role not " \
    "in the rpc's allowed_roles, a name the config does not know, or a db node acting for a key " \
    "or node not its own (docs/security.md)")                                                     \
  X(tls_handshake_refused, COUNTER,                                                               \
    "TLS handshakes this process refused (gRPC's log line, common/cpp/grpc_log_hook.h): a "       \
    "certificate of another CA (a caller's, or as a client a server's), or a peer not speaking "  \
    "TLS (plaintext)")

// Gauges: read at Stats() time, not accumulated.
#define EXO_CACHE_GAUGES(X)                                                            \
  X(entries, GAUGE, "keys in the map")                                                 \
  X(pending, GAUGE, "keys with a prepared, uncommitted write")                         \
  X(hot_list_keys, GAUGE, "keys in the db nodes' latest REPORTs")                      \
  X(retiring, GAUGE, "entries whose rule removal is queued or in flight")              \
  X(threshold_milli, GAUGE, "the filler's last admission threshold x 1000 (req/s)")

// ---- db node (exo-db-node, and every node an exo-emulator hosts) ----

// One block per packet thread (its only writer) plus shared blocks; summed on read.
#define EXO_DB_COUNTERS(X)                                                                          \
  X(rx_frames, COUNTER, "frames read from the packet sockets")                                      \
  X(ignored, COUNTER, "frames that are not Exoskeleton requests (dst MAC prefix or UDP port)")      \
  X(malformed_dropped, COUNTER, "request frames that failed validation (or were replies); dropped") \
  X(gets, COUNTER, "GET requests")                                                                  \
  X(puts, COUNTER, "PUT requests")                                                                  \
  X(deletes, COUNTER, "DELETE requests")                                                            \
  X(not_found, COUNTER, "GETs answered NOT_FOUND")                                                  \
  X(misrouted, COUNTER,                                                                             \
    "requests for keys this node does not own: GETs are served anyway, writes refused "            \
    "(wrong_owner_dropped)")                                                                        \
  X(wrong_owner_dropped, COUNTER,                                                                   \
    "writes for keys of another node's partition: refused (BAD_REQUEST), never applied")           \
  X(forwarded_gets, COUNTER,                                                                        \
    "GETs a cache node forwarded (FORWARDED flag): a rule that outlived its entry, or a pending "  \
    "write")                                                                                        \
  X(forwarded_unmarked_dropped, COUNTER,                                                            \
    "GETs with prefix 0xAE, 0xBA or FORWARDED but without the DSCP the switch writes on "          \
    "cache-node ports: a client posing as a cache node; refused (BAD_REQUEST)")                     \
  X(errors, COUNTER, "requests answered ERROR, and failed reads or marks during Fetch")             \
  X(writes_propagated, COUNTER, "writes to cached keys committed on the cache node (Prepare/Commit)") \
  X(requests_served, COUNTER, "replies sent")                                                       \
  X(tx_errors, COUNTER, "replies the socket did not accept")                                        \
  X(fetched_keys, COUNTER, "keys handed to a cache node by Fetch (and now tracked)")                \
  X(evicted_keys, COUNTER, "keys untracked by Evict")                                               \
  X(hot_sampled, COUNTER, "GETs sampled into the hot-key detector")                                 \
  X(reports_sent, COUNTER, "REPORTs the cache node accepted")                                       \
  X(report_errors, COUNTER, "REPORTs that failed or were refused")                                  \
  X(duplicate_writes, COUNTER,                                                                      \
    "writes whose request id was already seen: answered with the recorded status (none while the "  \
    "first copy is still in progress), never applied again")                                        \
  X(duplicate_id_conflicts, COUNTER,                                                                \
    "of those, copies whose content (opcode, key, value) differs from the first: a reused id, not " \
    "applied")                                                                                       \
  X(busy_writes, COUNTER, "writes answered BUSY: not applied, the client retries")                  \
  X(commits_deferred, COUNTER,                                                                      \
    "writes committed here whose Commit RPC failed: answered OK, Commit left to the resolver")     \
  X(txns_recovered, COUNTER, "undelivered Commit/Abort decisions found at start-up")                \
  X(resolver_pending, GAUGE,                                                                        \
    "Commit/Abort decisions the resolver still has to deliver (set in the resolver's block only)") \
  X(resolver_resolved, COUNTER, "Commit/Abort decisions the resolver delivered (definitive answer)") \
  X(rate_limited, COUNTER,                                                                          \
    "requests the wimpy emulator dropped on arrival: over the node's "                             \
    "emulation.db_rate_limit_rps (always 0 on a real db node)")                                    \
  X(rpc_refused, COUNTER,                                                                           \
    "gRPC calls refused by the caller checks: no client certificate (UNAUTHENTICATED), a role not " \
    "in the rpc's allowed_roles, a name the config does not know, or a cache node acting for "     \
    "another (docs/security.md)")                                                                   \
  X(tls_handshake_refused, COUNTER,                                                                 \
    "TLS handshakes this process refused (gRPC's log line, common/cpp/grpc_log_hook.h): a "         \
    "certificate of another CA (a caller's, or as a client a server's), or a peer not speaking "    \
    "TLS (plaintext); in an exo-emulator the whole process's, the same in every hosted node")      \
  X(not_head_dropped, COUNTER,                                                                      \
    "writes of a slot this node replicates but is not the head of (replication.factor > 1): "      \
    "dropped without a reply; the client resends, and the switch sends writes to the head")        \
  X(not_reader_busy, COUNTER,                                                                       \
    "GETs of a slot whose read server (the chain's tail) is another node: answered BUSY")          \
  X(chain_writes, COUNTER,                                                                          \
    "writes this node passed down a chain as head and had acknowledged by every later member")     \
  X(chain_forward_failed, COUNTER,                                                                  \
    "forwards to the next chain member that failed or timed out: the write stays uncommitted "     \
    "here (no reply) until a resend or the replication resolver gets it acknowledged")            \
  X(chain_batches, COUNTER,                                                                         \
    "ReplicateBatch calls this node sent as head to a next chain member (chain_writes / "          \
    "chain_batches: how many of a burst's writes shared one round trip, on average)")              \
  X(replicated_applied, COUNTER, "writes applied from the predecessor's Replicate")                 \
  X(replicated_duplicates, COUNTER,                                                                 \
    "Replicate calls whose request id this node had applied already: passed on, not applied again") \
  X(replicate_refused, COUNTER,                                                                     \
    "Replicate calls from a node that is not this node's predecessor for the slot: refused, "     \
    "nothing applied")                                                                              \
  X(replication_pending, GAUGE,                                                                     \
    "writes applied here whose acknowledgement from the rest of the chain is outstanding (set in " \
    "the chain runtime's block only)")                                                              \
  X(chain_writes_abandoned, COUNTER,                                                                \
    "uncommitted writes dropped because this node left their slot's chain: the client's resend "   \
    "reaches the slot's new head")                                                                  \
  X(copied_keys, COUNTER, "keys this node copied from a read server while catching up as a learner") \
  X(slots_copied, COUNTER, "slots this node finished copying as a learner (then caught up)")      \
  X(chain_inactive_dropped, COUNTER,                                                                \
    "requests this node did not serve because no chain table naming its incarnation has been "     \
    "pushed yet (replication.factor > 1, after a start): writes dropped, GETs answered BUSY")

// Gauges read at Stats() time, after the blocks' sums.
#define EXO_DB_GAUGES(X) X(cached_keys, GAUGE, "keys a cache node currently holds from this node")

// ---- wimpy emulator (exo-emulator): process-wide, one block per lane ----
// Reported by every hosted node after the db node's counters, as emulator_<name>, with the same
// values in each (not to be summed over nodes), so an operator polling one node sees what the
// whole process received and dropped.
#define EXO_EMULATOR_COUNTERS(X)                                                        \
  X(rx_frames, COUNTER, "frames the process received, all lanes")                        \
  X(unrouted, COUNTER, "frames for no hosted node (foreign dst MAC): dropped")           \
  X(own_tx, COUNTER, "the process's own replies seen again by the capture socket: dropped")

// ---- memcached proxy (exo-proxy): its `stats` lines and /metrics; one thread writes them ----
#define EXO_PROXY_COUNTERS(X)                                                                    \
  X(curr_connections, GAUGE, "client connections open now")                                      \
  X(total_connections, COUNTER, "client connections accepted")                                   \
  X(rejected_connections, COUNTER, "connections closed at once: over --max-conns or out of descriptors") \
  X(slow_reader_closes, COUNTER, "connections closed for unsent output over --max-output")       \
  X(cmd_get, COUNTER, "keys asked for by get/gets/mg (per key, as memcached counts)")           \
  X(cmd_set, COUNTER, "keys written by set/ms")                                                  \
  X(cmd_delete, COUNTER, "keys deleted by delete/md")                                            \
  X(get_hits, COUNTER, "keys found")                                                             \
  X(get_misses, COUNTER, "keys not found")                                                       \
  X(get_hits_from_cache, COUNTER, "keys found that a cache node answered")                       \
  X(delete_hits, COUNTER, "deletes of a key that existed")                                       \
  X(delete_misses, COUNTER, "deletes of a missing key")                                          \
  X(refused, COUNTER, "requests answered CLIENT_ERROR/SERVER_ERROR before the cluster saw them") \
  X(cluster_timeouts, COUNTER, "cluster ops with no reply after every resend")                   \
  X(cluster_errors, COUNTER, "cluster ops answered ERROR, BUSY or BAD_REQUEST (or unknown)")     \
  X(outcome_unknown, COUNTER, "writes answered `SERVER_ERROR outcome unknown`")

// ---- the /metrics HTTP listener of every C++ program (common/cpp/metrics_http.h) ----
// Only on the /metrics page itself (as exo_<program>_<name>_total), not in Stats.
#define EXO_METRICS_HTTP_COUNTERS(X)                                                     \
  X(metrics_requests, COUNTER, "GET /metrics requests answered with the page")           \
  X(metrics_not_found, COUNTER, "well-formed HTTP requests for anything else: 404")      \
  X(metrics_bad_requests, COUNTER,                                                        \
    "malformed, oversized or unfinished HTTP requests on the metrics port: 400")

namespace exo {

enum class CounterKind : uint8_t { COUNTER, GAUGE };

// One list entry: what a Stats reply names, and what the docs say about it.
struct CounterDesc {
  const char* name;
  CounterKind kind;
  const char* help;
};

// X-macro helper: `EXO_COUNTER_DESC` expands a list into CounterDesc initialisers.
#define EXO_COUNTER_DESC(name, kind, help) ::exo::CounterDesc{#name, ::exo::CounterKind::kind, help},

// Single-writer increment: a plain relaxed load + store, which compiles to the same add as a
// bare uint64_t (no locked instruction) but is not a data race with concurrent readers. Only the
// counter's one writer (its lcore or packet thread) may call it.
inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// Multi-writer increment, for a block shared by gRPC handler threads.
inline void add_shared(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.fetch_add(n, std::memory_order_relaxed);
}

// Gauge update; the caller serializes the writers of this gauge.
inline void set_gauge(std::atomic<uint64_t>& c, uint64_t v) { c.store(v, std::memory_order_relaxed); }

}  // namespace exo
