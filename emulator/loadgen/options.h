// exo-loadgen's command line: parsing (CLI11), range checks that name the option, and the
// resolved plan of a run (client endpoint from the cluster config, client id, seed, batch and
// reply-window sizes), which also goes into the output JSON as "params".
#pragma once

#include "cli_parse.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster.h"
#include "loadgen/protocol.h"
#include "loadgen/request_builder.h"

namespace exo::loadgen {

struct Options {
  std::string config;  // resolved cluster JSON
  std::string client;  // a name in the config's clients[]
  std::string iface;   // default: the client's iface from the config
  std::string out;     // default: the JSON goes to stdout
  double rate = 0;     // requests per second
  double duration_s = 10;
  uint32_t drain_ms = 500;
  uint64_t keys = 100'000'000;
  double alpha = 0.99;
  double swap_every_s = 0;
  uint64_t swap_count = 0;
  uint32_t key_size = 16;
  uint32_t value_size = 512;
  double get_ratio = 1.0;
  bool has_seed = false;
  uint64_t seed = 0;
  bool has_client_id = false;
  uint32_t client_id = 0;
  uint32_t batch = 0;      // 0: rate x 200 us, in 1..64
  uint32_t catch_up_ms = 10;  // lateness the TX loop makes up for after a stall
  uint16_t src_port = 0;   // 0: an ephemeral port
  uint32_t sndbuf = 4u << 20;
  uint32_t rcvbuf = 16u << 20;
  uint32_t bin_ms = 1000;  // width of the series' bins
  bool dry_run = false;    // no sockets: frames are built, paced and discarded (a TX benchmark)
  bool quiet = false;      // no progress lines
  // --protocol and the address overrides (empty / has_dst_port false: not given).
  std::string protocol = "exo";  // exo, reflect or memcached (protocol.h)
  std::string dst_mac;     // every request to this MAC instead of the key-hash MAC
  std::string dst_ip;      // every request to this IPv4 address instead of request_ip(key hash)
  bool has_dst_port = false;
  uint32_t dst_port = 0;   // instead of the config's udp_port (memcached: 11211)
  std::string src_mac;     // instead of the client's MAC from the config
  std::string src_ip;      // instead of the client's IP from the config
};

using ParseResult = exo::CliResult;  // cli_parse.h

ParseResult parse_options(const std::vector<std::string>& args, Options* out);  // args[0]: program

// Checks that need no cluster config. Returns "" or one message naming the option.
std::string check_options(const Options& o);

struct RunPlan {
  Protocol protocol = Protocol::kExo;
  NodeInfo client;
  std::string iface;
  Endpoint endpoint;  // src_port 0 until the sockets pick one; the overrides applied
  uint32_t mtu = 1500;
  uint32_t client_id = 0;
  uint64_t seed = 0;
  unsigned batch = 1;
  uint64_t window = 0;  // reply-matching window, requests (a power of two; memcached: <= 65536)
};

// The largest reply window of --protocol memcached: its request ids have 16 bits.
inline constexpr uint64_t kMemcachedMaxWindow = uint64_t{1} << 16;

// check_options plus everything that needs the cluster (client name, MTU); fills *plan,
// drawing the client id and seed when not given. Returns "" or the error.
std::string plan_run(const Options& o, const Cluster& cluster, RunPlan* plan);

// Every option and the resolved plan, for the output's "params".
nlohmann::json params_json(const Options& o, const RunPlan& plan);

}  // namespace exo::loadgen
