#include "mcload/options.h"

#include <arpa/inet.h>
#include <sys/un.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <random>

#include "loadgen/option_checks.h"
#include "mcload/reply_parser.h"

namespace exo::mcload {

using loadgen::check_key_space;
using loadgen::fmt;
using loadgen::kMaxDuration;
namespace {

constexpr uint32_t kMaxConnections = 60'000;
constexpr uint32_t kMaxDepth = 4096;
constexpr uint32_t kMaxMcKey = 250;  // memcached's KEY_MAX_LENGTH

std::string ipv4_text(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." +
         std::to_string((ip >> 8) & 255) + "." + std::to_string(ip & 255);
}

// "A.B.C.D:PORT" with a port in 1..65535; "" or the error.
std::string parse_server(const std::string& text, Target* t) {
  const std::string want = " (got '" + text + "'; want A.B.C.D:PORT, e.g. 127.0.0.1:11211)";
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return "--server: no port" + want;
  in_addr a{};
  if (inet_pton(AF_INET, text.substr(0, colon).c_str(), &a) != 1) return "--server: not an IPv4 address" + want;
  const std::string port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "--server: not a port number" + want;
  const unsigned long p = std::stoul(port);
  if (p < 1 || p > 65535) return "--server: port must be in 1..65535" + want;
  t->ip = ntohl(a.s_addr);
  t->port = static_cast<uint16_t>(p);
  if (t->ip == 0) return "--server: must not be 0.0.0.0" + want;
  return "";
}

}  // namespace

std::string Target::describe() const {
  return is_unix ? "unix:" + path : ipv4_text(ip) + ":" + std::to_string(port);
}

ParseResult parse_options(const std::vector<std::string>& args, Options* o) {
  CLI::App app{"exo-mcload: open-loop memcached text-protocol load generator: single-key GETs "
               "over many TCP (or unix socket) connections, one JSON document of per-second results"};
  CLI::Option* server = app.add_option("--server", o->server, "memcached server, A.B.C.D:PORT")
                            ->capture_default_str();
  app.add_option("--unix", o->unix_path, "connect to this unix stream socket instead of --server");
  app.add_option("--out", o->out, "write the JSON here (atomically); default: stdout");
  app.add_option("--rate", o->rate, "GETs per second, all connections together (open loop)")->required();
  app.add_option("--duration", o->duration_s, "seconds of sending")->capture_default_str();
  app.add_option("--drain-ms", o->drain_ms, "ms to wait for replies after the last send (then unanswered = lost)")
      ->capture_default_str();
  app.add_option("--max-wait-ms", o->max_wait_ms,
                 "a request that waited this long for a free connection is dropped unsent and lost, like "
                 "a full socket buffer's (0 = wait for ever: only the drain)")
      ->capture_default_str();
  app.add_option("--connections", o->connections, "connections the requests are spread over")
      ->capture_default_str();
  app.add_option("--depth", o->depth, "requests in flight per connection (pipelining; 1 = none)")
      ->capture_default_str();
  app.add_option("--keys", o->keys, "key space size N (key ids 0..N-1)")->capture_default_str();
  app.add_option("--alpha", o->alpha, "Zipf exponent of key popularity (0 = uniform)")->capture_default_str();
  app.add_option("--key-size", o->key_size, "key bytes (\"key:\" + zero-padded id, as exo-loadgen)")
      ->capture_default_str();
  CLI::Option* evs = app.add_option("--expect-value-size", o->expect_value_size,
                                    "a hit whose value has another size counts as an error (default: any)");
  CLI::Option* seed = app.add_option("--seed", o->seed, "RNG seed (default: random, reported)");
  app.add_option("--batch", o->batch, "requests released at a time (0 = rate x 200 us, 1..64)")
      ->capture_default_str();
  app.add_option("--catch-up-ms", o->catch_up_ms, "after a stall, release up to this many ms of missed requests at once")
      ->capture_default_str();
  app.add_option("--connect-timeout-ms", o->connect_timeout_ms, "ms for all connections to be established")
      ->capture_default_str();
  app.add_option("--bin-ms", o->bin_ms, "width of the series' bins, ms")->capture_default_str();
  app.add_flag("--quiet", o->quiet, "no per-second progress on stderr");
  ParseResult r = parse_cli(app, args);
  if (!r.run) return r;
  o->has_server = server->count() > 0;
  o->has_expect_value_size = evs->count() > 0;
  o->has_seed = seed->count() > 0;
  return r;
}

std::string plan_run(const Options& o, Plan* plan) {
  if (!(o.rate > 0) || !std::isfinite(o.rate) || o.rate > 1e8)
    return "--rate: must be > 0 and <= 1e8 GETs/s (got " + fmt(o.rate) + ")";
  if (!(o.duration_s > 0) || o.duration_s > kMaxDuration)
    return "--duration: must be > 0 and <= " + fmt(kMaxDuration) + " s (got " + fmt(o.duration_s) + ")";
  if (o.drain_ms > 600'000) return "--drain-ms: must be <= 600000 (got " + std::to_string(o.drain_ms) + ")";
  if (o.max_wait_ms > 600'000) return "--max-wait-ms: must be <= 600000 (got " + std::to_string(o.max_wait_ms) + ")";
  if (o.connections < 1 || o.connections > kMaxConnections)
    return "--connections: must be in 1.." + std::to_string(kMaxConnections) + " (got " + std::to_string(o.connections) + ")";
  if (o.depth < 1 || o.depth > kMaxDepth)
    return "--depth: must be in 1.." + std::to_string(kMaxDepth) + " (got " + std::to_string(o.depth) + ")";
  if (o.key_size < 5 || o.key_size > kMaxMcKey)
    return "--key-size: must be in 5..250 (got " + std::to_string(o.key_size) + ")";
  if (std::string e = check_key_space(o.keys, o.key_size); !e.empty()) return e;
  if (!(o.alpha >= 0 && o.alpha <= 3)) return "--alpha: must be in [0, 3] (got " + fmt(o.alpha) + ")";
  if (o.has_expect_value_size && o.expect_value_size > kDefaultMaxValue)
    return "--expect-value-size: must be <= " + std::to_string(kDefaultMaxValue) + " (memcached's item limit)";
  if (o.batch > 1024) return "--batch: must be in 0..1024 (got " + std::to_string(o.batch) + ")";
  if (o.catch_up_ms > 10'000) return "--catch-up-ms: must be <= 10000";
  if (o.connect_timeout_ms < 1 || o.connect_timeout_ms > 600'000) return "--connect-timeout-ms: must be in 1..600000";
  if (o.bin_ms < 10 || o.bin_ms > 60'000) return "--bin-ms: must be in 10..60000 (got " + std::to_string(o.bin_ms) + ")";
  Target t;
  if (!o.unix_path.empty()) {
    if (o.has_server) return "--unix: give --unix or --server, not both";
    if (o.unix_path.size() >= sizeof(sockaddr_un::sun_path))
      return "--unix: path longer than " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes";
    t.is_unix = true;
    t.path = o.unix_path;
  } else if (std::string e = parse_server(o.server, &t); !e.empty()) {
    return e;
  }
  plan->target = t;
  std::random_device rd;
  plan->seed = o.has_seed ? o.seed : (uint64_t{rd()} << 32 | rd());
  plan->batch = o.batch != 0 ? o.batch : static_cast<unsigned>(std::clamp(std::llround(o.rate * 200e-6), 1LL, 64LL));
  return "";
}

nlohmann::json params_json(const Options& o, const Plan& p) {
  return {
      {"protocol", "memcached-tcp"},
      {"target", p.target.describe()},
      {"rate", o.rate},
      {"duration_s", o.duration_s},
      {"drain_ms", o.drain_ms},
      {"max_wait_ms", o.max_wait_ms},
      {"bin_ms", o.bin_ms},
      {"connections", o.connections},
      {"depth", o.depth},
      {"keys", o.keys},
      {"alpha", o.alpha},
      {"key_size", o.key_size},
      {"expect_value_size", o.has_expect_value_size ? nlohmann::json(o.expect_value_size) : nlohmann::json(nullptr)},
      {"seed", p.seed},
      {"batch", p.batch},
      {"catch_up_ms", o.catch_up_ms},
      {"connect_timeout_ms", o.connect_timeout_ms},
      {"get_ratio", 1.0},
  };
}

}  // namespace exo::mcload
