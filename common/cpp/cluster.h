// The resolved cluster description the nodes run from: the JSON written by
// `exo config resolve` (common/exo_common/config.py validates the YAML and adds the
// partition table, so consistent hashing is computed in exactly one place). Its shape is the
// ResolvedCluster message of proto/exoproto/cluster.proto; these structs are the nodes' view of
// it.
//
// Member initialisers: load_cluster never uses them (it requires every field in the file, so
// a node runs on Python's defaults, config.py, only). They serve code that builds a Cluster by
// hand (tests, benches, fuzz harnesses): a member that has one carries Python's default, which
// cluster_test checks against common/cpp/tests/data/defaults.resolved.json (written by
// `exo config resolve`, kept current by tests/unit/test_config.py); members without one
// (names, addresses, capacity, lcores, ...) start empty and such code sets them.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "keyhash.h"

namespace exo {

struct ClusterError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct NodeInfo {
  std::string name;
  Mac mac{};
  uint32_t ip = 0;  // host order
  uint32_t switch_port = 0;
  std::string iface;
};

struct CacheNodeInfo : NodeInfo {
  std::string grpc;
  uint32_t capacity = 0;
  std::string lcores;
  uint32_t burst = 32;
  uint32_t idle_sleep_us = 20;
  std::vector<std::string> eal_args;
  double rate_limit_rps = 0;  // 0 = unlimited; scaled experiments cap the cache node
  std::string metrics;        // "<ipv4>:<port>" of the /metrics listener; empty: none
};

struct DbNodeInfo : NodeInfo {
  std::string grpc;
  std::string data_dir;
  uint32_t threads = 2;
  bool sync_writes = true;
  std::string cache_node;  // may be empty (no cache nodes)
  std::string emulator;    // empty: a real exo-db-node; else the emulator process hosting it
  std::string metrics;     // "<ipv4>:<port>" of the /metrics listener; empty: none
  bool member = true;      // false: a configured spare, in no partition and no chain
};

// proxies[]: an exo-proxy speaking for one client host (docs/proxy.md).
// One controller process (controller.instances[]; docs/design/replication.md, 5.4). Every
// instance presents the `controller` certificate; one of them is master at a time.
struct ControllerInstanceInfo {
  std::string name;
  std::string grpc;
  bool operator==(const ControllerInstanceInfo&) const = default;
};

struct ProxyInfo {
  std::string name;
  std::string client;   // a clients[] name
  std::string metrics;  // "<ipv4>:<port>" of the /metrics listener; empty: none
};

// security section (docs/security.md): mutual TLS and per-role checks on every gRPC call.
struct SecurityConfig {
  bool insecure_dev_mode = false;  // true: plaintext, no caller checks (a developer's laptop)
  std::string cert_dir = "/etc/exo/pki";  // ca.crt, <name>.crt, <name>.key
  std::vector<std::string> operators{"operator"};

  bool operator==(const SecurityConfig&) const = default;
};

// emulation section: the wimpy emulator (thesis 4.1.1), many db nodes in one DPDK process.
struct EmulationConfig {
  uint32_t value_size = 512;
  double db_rate_limit_rps = 0;  // per emulated node; 0 = unlimited
  std::string lcores = "0";
  uint32_t burst = 32;
  uint32_t idle_sleep_us = 20;
  std::vector<std::string> eal_args;

  bool operator==(const EmulationConfig&) const = default;
};

// hot_keys section: db nodes' sampled Space-Saving detector and REPORTs (docs/cache-fill.md).
struct HotKeysConfig {
  uint32_t top_k = 256;
  double sample_rate = 0.0625;
  double confidence_z = 1.0;  // rates reported as rate * (1 - z / sqrt(samples))
  uint32_t segment_ms = 1000;
  uint32_t segments = 4;
  std::vector<double> weights{8, 4, 2, 1};  // most recent segment first; size == segments
  double load_ewma_alpha = 0.5;
  uint32_t report_interval_ms = 250;
  uint32_t report_keys = 128;

  bool operator==(const HotKeysConfig&) const = default;
};

// cache_fill section: cache nodes' selection from REPORTs (docs/cache-fill.md).
struct CacheFillConfig {
  bool enabled = true;
  uint32_t interval_ms = 100;
  double min_rate = 1.0;
  double hysteresis = 0.3;
  uint32_t report_ttl_ms = 3000;
  double hit_ewma_alpha = 0.5;
  uint32_t max_fetch_batch = 256;

  bool operator==(const CacheFillConfig&) const = default;
};

// replication section (docs/design/replication.md): chains of db nodes per slot.
struct ReplicationConfig {
  uint32_t factor = 1;  // db nodes per chain at most; 1: each chain is the slot's owner alone

  bool operator==(const ReplicationConfig&) const = default;
};

struct Cluster {
  uint32_t mtu = 1500;
  uint16_t udp_port = 7777;
  // cluster.service_ip: parsed so older configs load, unused by requests (their IPv4 dst is
  // request_ip(key hash), keyhash.h); exo-loadgen's --dst-mac mode still defaults to it.
  uint32_t service_ip = 0;
  uint32_t partition_bits = 8;
  double rule_update_rate = 50.0;  // switch.rule_update_rate: R, flow-mods/s the switch accepts
  std::string controller_grpc;
  std::string controller_metrics;  // controller.metrics
  // Every controller process, in config order (never empty: a config without instances[]
  // resolves to its one instance). A cache node asks whichever is master (peers.cc).
  std::vector<ControllerInstanceInfo> controllers;
  SecurityConfig security;
  HotKeysConfig hot_keys;
  CacheFillConfig cache_fill;
  EmulationConfig emulation;
  std::vector<CacheNodeInfo> cache_nodes;
  std::vector<DbNodeInfo> db_nodes;
  std::vector<NodeInfo> clients;
  std::vector<ProxyInfo> proxies;
  ReplicationConfig replication;
  std::vector<uint32_t> slot_owner;  // slot -> index into db_nodes
  // slot -> its chain, head first and tail last, as indices into db_nodes: distinct member
  // nodes, at most replication.factor of them, slot_chain[s][0] == slot_owner[s]. The initial
  // layout from the resolved config's `chains`; nothing routes by it yet (at factor 1 every
  // chain is {slot_owner[s]}).
  std::vector<std::vector<uint32_t>> slot_chain;

  // Index into db_nodes of the node owning this 40-bit key hash.
  uint32_t owner_index(uint64_t hash40) const {
    return slot_owner[(hash40 & kHashMask) >> (kHashBits - partition_bits)];
  }
  const DbNodeInfo& owner(uint64_t hash40) const { return db_nodes[owner_index(hash40)]; }

  const CacheNodeInfo* find_cache(const std::string& name) const;
  const DbNodeInfo* find_db(const std::string& name) const;
  const ProxyInfo* find_proxy(const std::string& name) const;
  // The role a certificate name has in this cluster: "controller", "switch", "cache", "db",
  // "proxy", "operator", or "" for a name the config does not know (config.py roles()).
  std::string role_of(const std::string& name) const;
};

// Throws ClusterError naming the file and field on any problem.
Cluster load_cluster(const std::string& path);
// The same from the file's text; `source` names it in errors. Throws ClusterError (and nothing
// else) on any input: this is the parser the cluster_parse_fuzz target runs.
Cluster parse_cluster(std::string_view text, const std::string& source);

Mac parse_mac(const std::string& s);        // throws ClusterError
uint32_t parse_ipv4(const std::string& s);  // throws ClusterError; host order
std::string format_mac(const uint8_t* mac);

}  // namespace exo
