// exo-proxy's command line (CLI11): parsing, range checks that name the option, and the plan of
// a run resolved against the cluster config (which clients[] entry it speaks as, the frame size
// limits from the MTU). Exit code 2 for every error found here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli_parse.h"
#include "cluster.h"
#include "event_loop.h"
#include "net.h"
#include "request_engine.h"

namespace exo::proxy {

struct Options {
  std::string config;  // resolved cluster JSON (exo config resolve)
  std::string client;  // a name in the config's clients[]
  std::string iface;   // default: the client's iface from the config
  std::string listen = "127.0.0.1:11211";
  std::string unix_path;  // empty: no unix socket
  uint32_t max_conns = 1024;
  uint32_t window = 256;
  uint32_t timeout_ms = 250;
  uint32_t retries = 4;
  uint32_t max_pending = 256;        // requests in progress per connection
  uint64_t max_output = 8u << 20;    // unsent reply bytes per connection
  uint32_t rcvbuf = 4u << 20;
  std::string log_level = "info";
};

using CliResult = exo::CliResult;  // cli_parse.h

CliResult parse_options(const std::vector<std::string>& args, Options* out);  // args[0]: program

struct Plan {
  NodeInfo client;
  std::string iface;
  HostPort listen;
  client::Endpoint endpoint;  // port 0 until the UDP socket has one
  client::EngineOptions engine;
  LoopConfig loop;
};

// Checks the options and resolves them against `cluster`; "" or one message naming the option
// or config field at fault.
std::string plan_proxy(const Options& o, const Cluster& cluster, Plan* plan);

}  // namespace exo::proxy
