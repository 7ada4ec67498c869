// exo-mcload's command line: parsing (CLI11, common/cpp/cli_parse.h), range checks that name the
// option, and the resolved plan of a run (where to connect, seed, release batch), which also goes
// into the output JSON as "params".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_parse.h"

namespace exo::mcload {

struct Options {
  std::string server = "127.0.0.1:11211";  // TCP: IPv4 address and port
  bool has_server = false;                 // --server given (then --unix must not be)
  std::string unix_path;                   // a unix stream socket instead of TCP
  std::string out;                         // default: the JSON goes to stdout
  double rate = 0;                         // GETs per second over all connections
  double duration_s = 10;
  uint32_t drain_ms = 500;
  uint32_t max_wait_ms = 0;  // > 0: a request waiting this long for a free connection is dropped
  uint32_t connections = 64;
  uint32_t depth = 1;  // requests in flight per connection (1: no pipelining)
  uint64_t keys = 100'000'000;
  double alpha = 0.99;
  uint32_t key_size = 16;
  bool has_expect_value_size = false;
  uint32_t expect_value_size = 0;  // a hit with another <bytes> counts as an error
  bool has_seed = false;
  uint64_t seed = 0;
  uint32_t batch = 0;         // 0: rate x 200 us, in 1..64
  uint32_t catch_up_ms = 10;  // lateness the pacing makes up for after a stall
  uint32_t connect_timeout_ms = 3000;
  uint32_t bin_ms = 1000;
  bool quiet = false;
};

using ParseResult = exo::CliResult;

ParseResult parse_options(const std::vector<std::string>& args, Options* out);  // args[0]: program

// Where the generator connects.
struct Target {
  bool is_unix = false;
  uint32_t ip = 0;  // host order (TCP)
  uint16_t port = 0;
  std::string path;  // unix
  std::string describe() const;  // "127.0.0.1:11211" or "unix:/run/x.sock"
};

struct Plan {
  Target target;
  uint64_t seed = 0;
  unsigned batch = 1;
};

// Every check, and the plan (drawing the seed when not given). Returns "" or one message that
// starts with the option at fault.
std::string plan_run(const Options& o, Plan* plan);

nlohmann::json params_json(const Options& o, const Plan& plan);

}  // namespace exo::mcload
