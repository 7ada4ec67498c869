// exo-proxy's command line (CLI11): parsing, range checks that name the option, and the plan of
// a run resolved against the cluster config (which clients[] entry it speaks as, the frame size
// limits from the MTU). Exit code 2 for every error found here.
#pragma once

#include <cstdint>
#include <optional>
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
  std::string name;    // a name in the config's proxies[]; default: the entry whose client is `client`
  std::string iface;   // default: the client's iface from the config
  std::string listen = "127.0.0.1:11211";  // "none": no TCP listener (the unix socket only)
  std::string unix_path;  // empty: no unix socket
  std::optional<std::string> unix_mode;   // octal permission bits of the socket file; kDefaultUnixMode
  std::optional<std::string> unix_group;  // group name or number the socket file gets; the proxy's own
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

// Owner and group may connect (connecting to a unix socket needs write permission), others not:
// the web user gets access by being in the socket's group (--unix-group), not by a world-open
// socket.
inline constexpr uint32_t kDefaultUnixMode = 0660;

CliResult parse_options(const std::vector<std::string>& args, Options* out);  // args[0]: program

struct Plan {
  NodeInfo client;
  std::string iface;
  bool tcp = true;  // false for --listen none
  HostPort listen;
  uint32_t unix_mode = kDefaultUnixMode;
  std::string unix_group;  // resolved to a gid by main (lookup_group, net.h): that reads /etc/group
  client::Endpoint endpoint;  // port 0 until the UDP socket has one
  client::EngineOptions engine;
  LoopConfig loop;
  std::string name;     // this proxy's proxies[] entry; empty when the config has none for it
  std::string metrics;  // its metrics address ("" = no /metrics listener)
};

// Checks the options and resolves them against `cluster`; "" or one message naming the option
// or config field at fault.
std::string plan_proxy(const Options& o, const Cluster& cluster, Plan* plan);

// "0660", "660", "0600" -> the mode; nullopt unless 1-4 octal digits naming at most 0777 (no
// setuid, setgid or sticky bits: they mean nothing on a socket).
std::optional<uint32_t> parse_unix_mode(const std::string& text);

}  // namespace exo::proxy
