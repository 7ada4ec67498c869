#include "loadgen/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <sstream>

#include "wire.h"

namespace exo::loadgen {
namespace {

constexpr uint64_t kMaxWindow = uint64_t{1} << 26;  // 1 GiB of send slots
constexpr double kMaxDuration = 7 * 86400.0;

// Decimal digits of n (1 for 0).
unsigned digits(uint64_t n) {
  unsigned d = 1;
  for (; n >= 10; n /= 10) ++d;
  return d;
}

std::string fmt(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

ParseResult parse_options(const std::vector<std::string>& args, Options* o) {
  CLI::App app{"exo-loadgen: open-loop load generator for an Exoskeleton cluster (raw frames on "
               "an AF_PACKET socket; one JSON document of per-second results)"};
  app.add_option("--config", o->config, "resolved cluster JSON (exo config resolve)")->required();
  app.add_option("--client", o->client, "this client's name in the config's clients[]")->required();
  app.add_option("--iface", o->iface, "interface to send on (default: the client's iface)");
  app.add_option("--out", o->out, "write the JSON here (atomically); default: stdout");
  app.add_option("--rate", o->rate, "requests per second (open loop)")->required();
  app.add_option("--duration", o->duration_s, "seconds of sending")->capture_default_str();
  app.add_option("--drain-ms", o->drain_ms, "ms to wait for replies after the last send")
      ->capture_default_str();
  app.add_option("--keys", o->keys, "key space size N (key ids 0..N-1)")->capture_default_str();
  app.add_option("--alpha", o->alpha, "Zipf exponent of key popularity (0 = uniform)")
      ->capture_default_str();
  app.add_option("--swap-every", o->swap_every_s, "hot-set swap period, seconds (0 = never)")
      ->capture_default_str();
  app.add_option("--swap-count", o->swap_count, "ranks swapped each period, H (0 = never)")
      ->capture_default_str();
  app.add_option("--key-size", o->key_size, "key bytes (\"key:\" + zero-padded id)")
      ->capture_default_str();
  app.add_option("--value-size", o->value_size, "PUT value bytes")->capture_default_str();
  app.add_option("--get-ratio", o->get_ratio, "share of GETs; the rest are PUTs")
      ->capture_default_str();
  CLI::Option* seed = app.add_option("--seed", o->seed, "RNG seed (default: random, reported)");
  CLI::Option* cid = app.add_option("--client-id", o->client_id, "wire client_id (default: random)");
  app.add_option("--batch", o->batch, "frames per sendmmsg (0 = rate x 200 us, 1..64)")
      ->capture_default_str();
  app.add_option("--catch-up-ms", o->catch_up_ms,
                 "after a stall, send up to this many ms of missed requests at once")
      ->capture_default_str();
  app.add_option("--src-port", o->src_port, "UDP source port (0 = ephemeral)")
      ->capture_default_str();
  app.add_option("--sndbuf", o->sndbuf, "TX socket buffer, bytes")->capture_default_str();
  app.add_option("--rcvbuf", o->rcvbuf, "RX socket buffer, bytes")->capture_default_str();
  app.add_option("--bin-ms", o->bin_ms, "width of the series' bins, ms (100: sub-second recovery)")
      ->capture_default_str();
  app.add_flag("--dry-run", o->dry_run, "open no socket: build and pace frames, discard them");
  app.add_flag("--quiet", o->quiet, "no per-second progress on stderr");

  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  ParseResult r;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    r.message = app.help();
    return r;
  } catch (const CLI::ParseError& e) {
    r.exit_code = 2;
    r.message = std::string(e.what()) + "\nRun with --help for the options.";
    return r;
  }
  o->has_seed = seed->count() > 0;
  o->has_client_id = cid->count() > 0;
  r.run = true;
  return r;
}

std::string check_options(const Options& o) {
  if (!(o.rate > 0) || !std::isfinite(o.rate) || o.rate > 1e8)
    return "--rate: must be > 0 and <= 1e8 requests/s (got " + fmt(o.rate) + ")";
  if (o.bin_ms < 10 || o.bin_ms > 60'000) return "--bin-ms: must be in 10..60000 (got " + std::to_string(o.bin_ms) + ")";
  if (!(o.duration_s > 0) || o.duration_s > kMaxDuration)
    return "--duration: must be > 0 and <= " + fmt(kMaxDuration) + " s (got " + fmt(o.duration_s) + ")";
  if (o.drain_ms > 600'000) return "--drain-ms: must be <= 600000";
  if (o.key_size < 9 || o.key_size > wire::kMaxKeyLen)
    return "--key-size: must be in 9..250 (got " + std::to_string(o.key_size) + ")";
  if (o.keys < 1) return "--keys: must be >= 1";
  if (digits(o.keys - 1) > o.key_size - 4)
    return "--keys: key ids up to " + std::to_string(o.keys - 1) + " need " +
           std::to_string(digits(o.keys - 1)) + " digits; --key-size " +
           std::to_string(o.key_size) + " leaves " + std::to_string(o.key_size - 4);
  if (!(o.alpha >= 0 && o.alpha <= 3)) return "--alpha: must be in [0, 3] (got " + fmt(o.alpha) + ")";
  if (!(o.get_ratio >= 0 && o.get_ratio <= 1))
    return "--get-ratio: must be in [0, 1] (got " + fmt(o.get_ratio) + ")";
  if (!(o.swap_every_s >= 0) || !std::isfinite(o.swap_every_s))
    return "--swap-every: must be >= 0 seconds";
  if ((o.swap_count == 0) != (o.swap_every_s == 0))
    return "--swap-every and --swap-count: give both (> 0) to swap hot sets, or neither";
  if (o.swap_count > o.keys / 2)
    return "--swap-count: must be <= --keys / 2 = " + std::to_string(o.keys / 2);
  if (o.batch > 1024) return "--batch: must be in 0..1024";
  if (o.catch_up_ms > 10'000) return "--catch-up-ms: must be <= 10000";
  if (o.sndbuf < 65536 || o.sndbuf > (1u << 30)) return "--sndbuf: must be in 65536..2^30";
  if (o.rcvbuf < 65536 || o.rcvbuf > (1u << 30)) return "--rcvbuf: must be in 65536..2^30";
  return "";
}

std::string plan_run(const Options& o, const Cluster& cluster, RunPlan* plan) {
  if (std::string err = check_options(o); !err.empty()) return err;
  const NodeInfo* client = nullptr;
  std::string known;
  for (const NodeInfo& c : cluster.clients) {
    if (c.name == o.client) client = &c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  if (client == nullptr)
    return "--client: no client named '" + o.client + "' in " + o.config + " clients[] (have: " +
           (known.empty() ? "none" : known) + ")";
  const size_t frame = wire::kMinFrame + o.key_size + o.value_size;
  if (frame > wire::kEthLen + cluster.mtu)
    return "--value-size: 62 + key-size + value-size = " + std::to_string(frame) +
           " bytes exceeds the largest frame, 14 + mtu = " + std::to_string(wire::kEthLen + cluster.mtu) +
           " (at most " + std::to_string(wire::max_kv_bytes(cluster.mtu) - o.key_size) +
           " value bytes with --key-size " + std::to_string(o.key_size) + ")";

  plan->client = *client;
  plan->iface = o.iface.empty() ? client->iface : o.iface;
  plan->mtu = cluster.mtu;
  plan->endpoint = Endpoint{client->mac, client->ip, o.src_port, cluster.service_ip, cluster.udp_port};
  std::random_device rd;
  plan->client_id = o.has_client_id ? o.client_id : static_cast<uint32_t>(rd());
  plan->seed = o.has_seed ? o.seed : (uint64_t{rd()} << 32 | rd());
  plan->batch = o.batch != 0 ? o.batch
                             : static_cast<unsigned>(std::clamp(std::llround(o.rate * 200e-6), 1LL, 64LL));
  // Every request stays matchable for (drain + 1 s) of sends, plus the TX loop's catch-up burst.
  const double need = o.rate * (o.drain_ms / 1000.0 + 1.0 + o.catch_up_ms / 1000.0) + plan->batch;
  if (need > static_cast<double>(kMaxWindow))
    return "--rate x (--drain-ms + 1 s): " + fmt(need) + " requests in flight exceed the reply window's limit of " +
           std::to_string(kMaxWindow);
  plan->window = std::bit_ceil(static_cast<uint64_t>(std::ceil(need)));
  return "";
}

nlohmann::json params_json(const Options& o, const RunPlan& p) {
  const auto ip = [](uint32_t v) {
    return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 255) + "." +
           std::to_string((v >> 8) & 255) + "." + std::to_string(v & 255);
  };
  return {
      {"config", o.config},         {"client", o.client},
      {"iface", p.iface},           {"client_mac", format_mac(p.client.mac.data())},
      {"client_ip", ip(p.endpoint.ip)}, {"src_port", p.endpoint.src_port},
      {"service_ip", ip(p.endpoint.service_ip)}, {"udp_port", p.endpoint.udp_port},
      {"mtu", p.mtu},               {"rate", o.rate},
      {"duration_s", o.duration_s}, {"drain_ms", o.drain_ms}, {"bin_ms", o.bin_ms},
      {"keys", o.keys},             {"alpha", o.alpha},
      {"swap_every_s", o.swap_every_s}, {"swap_count", o.swap_count},
      {"key_size", o.key_size},     {"value_size", o.value_size},
      {"get_ratio", o.get_ratio},   {"seed", p.seed},
      {"client_id", p.client_id},   {"batch", p.batch},
      {"window", p.window},         {"catch_up_ms", o.catch_up_ms},
      {"sndbuf", o.sndbuf},
      {"rcvbuf", o.rcvbuf},         {"dry_run", o.dry_run},
  };
}

}  // namespace exo::loadgen
