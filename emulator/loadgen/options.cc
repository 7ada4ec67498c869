#include "loadgen/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <random>

#include "cli_parse.h"
#include "loadgen/memcached_udp.h"
#include "loadgen/option_checks.h"
#include "wire.h"

namespace exo::loadgen {
namespace {

constexpr uint64_t kMaxWindow = uint64_t{1} << 26;  // 1 GiB of send slots

// "" or the error of a MAC option: six hex pairs, not all zero; a source must be unicast.
std::string check_mac(const char* option, const std::string& text, bool source) {
  Mac m{};
  try {
    m = parse_mac(text);
  } catch (const ClusterError&) {
    return std::string(option) + ": not a MAC address (got '" + text + "'; want 02:00:00:00:03:01)";
  }
  if (m == Mac{}) return std::string(option) + ": must not be 00:00:00:00:00:00";
  if (source && (m[0] & 1)) return std::string(option) + ": must be a unicast MAC (got " + text + ")";
  return "";
}

// "" or the error of an IPv4 option: dotted quad, not 0.0.0.0.
std::string check_ip(const char* option, const std::string& text) {
  uint32_t ip = 0;
  try {
    ip = parse_ipv4(text);
  } catch (const ClusterError&) {
    return std::string(option) + ": not an IPv4 address (got '" + text + "')";
  }
  if (ip == 0) return std::string(option) + ": must not be 0.0.0.0";
  return "";
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
  app.add_option("--protocol", o->protocol,
                 "server kind: exo (the cluster), reflect (a MAC-swapping reflector), memcached "
                 "(memcached over UDP, GETs only)")
      ->capture_default_str();
  app.add_option("--dst-mac", o->dst_mac,
                 "send every request to this MAC (default: the key-hash MAC; required for memcached)");
  app.add_option("--dst-ip", o->dst_ip,
                 "send every request to this IPv4 address (default: the key hash's request_ip; "
                 "with --dst-mac the config's service_ip; required for memcached)");
  CLI::Option* dport = app.add_option(
      "--dst-port", o->dst_port, "destination UDP port (default: the config's udp_port; memcached: 11211)");
  app.add_option("--src-mac", o->src_mac, "source MAC of the requests (default: the client's from the config)");
  app.add_option("--src-ip", o->src_ip, "source IPv4 of the requests (default: the client's from the config)");

  ParseResult r = parse_cli(app, args);
  if (!r.run) return r;
  o->has_seed = seed->count() > 0;
  o->has_client_id = cid->count() > 0;
  o->has_dst_port = dport->count() > 0;
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
  if (std::string e = check_key_space(o.keys, o.key_size); !e.empty()) return e;
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
  const std::optional<Protocol> proto = parse_protocol(o.protocol);
  if (!proto) return "--protocol: must be exo, reflect or memcached (got '" + o.protocol + "')";
  if (!o.dst_mac.empty())
    if (std::string e = check_mac("--dst-mac", o.dst_mac, false); !e.empty()) return e;
  if (!o.src_mac.empty())
    if (std::string e = check_mac("--src-mac", o.src_mac, true); !e.empty()) return e;
  if (!o.dst_ip.empty())
    if (std::string e = check_ip("--dst-ip", o.dst_ip); !e.empty()) return e;
  if (!o.src_ip.empty())
    if (std::string e = check_ip("--src-ip", o.src_ip); !e.empty()) return e;
  if (o.has_dst_port && (o.dst_port < 1 || o.dst_port > 65535))
    return "--dst-port: must be in 1..65535 (got " + std::to_string(o.dst_port) + ")";
  if (*proto == Protocol::kMemcached) {
    // The generator writes raw frames and does not ARP: it must be told where the server is.
    if (o.dst_mac.empty()) return "--dst-mac: --protocol memcached needs the server's MAC";
    if (o.dst_ip.empty()) return "--dst-ip: --protocol memcached needs the server's IPv4 address";
    if (o.get_ratio < 1)
      return "--get-ratio: --protocol memcached sends GETs only; give --get-ratio 1 (got " +
             fmt(o.get_ratio) + ")";
  }
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
  const Protocol proto = *parse_protocol(o.protocol);
  const size_t frame = wire::kMinFrame + o.key_size + o.value_size;
  // (memcached sends no PUT, so no value: its GETs fit any MTU with a key of <= 250 bytes)
  if (proto != Protocol::kMemcached && frame > wire::kEthLen + cluster.mtu)
    return "--value-size: 62 + key-size + value-size = " + std::to_string(frame) +
           " bytes exceeds the largest frame, 14 + mtu = " + std::to_string(wire::kEthLen + cluster.mtu) +
           " (at most " + std::to_string(wire::max_kv_bytes(cluster.mtu) - o.key_size) +
           " value bytes with --key-size " + std::to_string(o.key_size) + ")";

  plan->protocol = proto;
  plan->client = *client;
  plan->iface = o.iface.empty() ? client->iface : o.iface;
  plan->mtu = cluster.mtu;
  plan->endpoint = Endpoint{client->mac, client->ip, o.src_port, cluster.service_ip, cluster.udp_port};
  Endpoint& ep = plan->endpoint;  // the overrides (check_options has parsed each once already)
  if (!o.src_mac.empty()) ep.mac = parse_mac(o.src_mac);
  if (!o.src_ip.empty()) ep.ip = parse_ipv4(o.src_ip);
  if (!o.dst_ip.empty()) {
    ep.service_ip = parse_ipv4(o.dst_ip);
    ep.fixed_dst_ip = true;
  }
  if (o.has_dst_port) ep.udp_port = static_cast<uint16_t>(o.dst_port);
  else if (proto == Protocol::kMemcached) ep.udp_port = kMemcachedPort;
  if (!o.dst_mac.empty()) {
    ep.fixed_dst_mac = true;
    ep.dst_mac = parse_mac(o.dst_mac);
  }
  std::random_device rd;
  plan->client_id = o.has_client_id ? o.client_id : static_cast<uint32_t>(rd());
  plan->seed = o.has_seed ? o.seed : (uint64_t{rd()} << 32 | rd());
  plan->batch = o.batch != 0 ? o.batch
                             : static_cast<unsigned>(std::clamp(std::llround(o.rate * 200e-6), 1LL, 64LL));
  // Every request stays matchable for (drain + 1 s) of sends, plus the TX loop's catch-up burst.
  const double need = o.rate * (o.drain_ms / 1000.0 + 1.0 + o.catch_up_ms / 1000.0) + plan->batch;
  if (proto == Protocol::kMemcached) {
    // 16-bit request ids: a larger window would hold two requests with one id. A reply that
    // comes after 65,536 newer requests counts as lost (memcached_udp.h).
    plan->window = std::min(kMemcachedMaxWindow, std::bit_ceil(static_cast<uint64_t>(std::ceil(need))));
    return "";
  }
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
  const auto opt = [](const std::string& v) { return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v); };
  return {
      {"protocol", protocol_name(p.protocol)},
      {"dst_mac", p.endpoint.fixed_dst_mac ? nlohmann::json(format_mac(p.endpoint.dst_mac.data()))
                                           : nlohmann::json(nullptr)},
      {"dst_ip", opt(o.dst_ip)},
      {"dst_port", o.has_dst_port ? nlohmann::json(o.dst_port) : nlohmann::json(nullptr)},
      {"src_mac", opt(o.src_mac)},  {"src_ip", opt(o.src_ip)},
      {"config", o.config},         {"client", o.client},
      {"iface", p.iface},           {"client_mac", format_mac(p.endpoint.mac.data())},
      {"client_ip", ip(p.endpoint.ip)}, {"src_port", p.endpoint.src_port},
      {"service_ip", ip(p.endpoint.service_ip)}, {"udp_port", p.endpoint.udp_port},
      // where the requests went: one fixed IPv4 dst, or each key's request_ip (the key hash)
      {"ip_dst", p.endpoint.ip_dst_fixed() ? nlohmann::json(ip(p.endpoint.service_ip))
                                           : nlohmann::json("key hash")},
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
