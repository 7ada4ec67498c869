#include "options.h"

#include <CLI/CLI.hpp>

#include "cli_parse.h"

#include "wire.h"

namespace exo::proxy {
namespace {

std::string range(const char* option, uint64_t v, uint64_t lo, uint64_t hi) {
  if (v >= lo && v <= hi) return "";
  return std::string(option) + ": must be in " + std::to_string(lo) + ".." + std::to_string(hi) + " (got " +
         std::to_string(v) + ")";
}

}  // namespace

CliResult parse_options(const std::vector<std::string>& args, Options* o) {
  CLI::App app{"exo-proxy: memcached protocol (TCP and a unix socket) in front of an Exoskeleton "
               "cluster; one per web host, needs CAP_NET_RAW"};
  app.add_option("--config", o->config, "resolved cluster JSON (exo config resolve)")->required();
  app.add_option("--client", o->client, "which clients[] entry of the config this proxy is (MAC, IP, iface)")
      ->required();
  app.add_option("--name", o->name,
                 "this proxy's proxies[] entry (its certificate name and metrics address); default: the "
                 "entry whose client is --client, if any");
  app.add_option("--iface", o->iface, "interface to send on (default: the client's iface)");
  app.add_option("--listen", o->listen,
                 "TCP address for memcached clients, IPv4:port; 'none': no TCP listener (needs --unix)")
      ->capture_default_str();
  app.add_option("--unix", o->unix_path, "also listen on this unix socket path");
  app.add_option("--unix-mode", o->unix_mode,
                 "octal permissions of the unix socket file (default 0660: its owner and group may connect)");
  app.add_option("--unix-group", o->unix_group,
                 "group (name or number) of the unix socket file, e.g. the web workers' group (default: the "
                 "proxy's own group)");
  app.add_option("--max-conns", o->max_conns, "client connections at most; more are closed at once")
      ->capture_default_str();
  app.add_option("--window", o->window, "cluster requests in flight at most, all connections together")
      ->capture_default_str();
  app.add_option("--timeout-ms", o->timeout_ms, "resend a cluster request after this long without a reply")
      ->capture_default_str();
  app.add_option("--retries", o->retries, "resends before a request counts as unanswered")->capture_default_str();
  app.add_option("--max-pending", o->max_pending, "requests in progress per connection before reading pauses")
      ->capture_default_str();
  app.add_option("--max-output", o->max_output, "unsent reply bytes per connection before it is closed")
      ->capture_default_str();
  app.add_option("--rcvbuf", o->rcvbuf, "reply socket receive buffer, bytes")->capture_default_str();
  app.add_option("--log-level", o->log_level, "debug, info, warn or error")->capture_default_str();

  return parse_cli(app, args);
}

std::string plan_proxy(const Options& o, const Cluster& cluster, Plan* plan) {
  for (const std::string& e : {range("--max-conns", o.max_conns, 1, 1'000'000), range("--window", o.window, 1, 1 << 20),
                               range("--timeout-ms", o.timeout_ms, 1, 60'000), range("--retries", o.retries, 0, 100),
                               range("--max-pending", o.max_pending, 1, 1 << 20),
                               range("--max-output", o.max_output, 4096, uint64_t{1} << 32),
                               range("--rcvbuf", o.rcvbuf, 65536, 1u << 30)}) {
    if (!e.empty()) return e;
  }
  const bool tcp = o.listen != "none";
  const auto listen = tcp ? parse_host_port(o.listen) : std::optional<HostPort>(HostPort{});
  if (!listen) return "--listen: want IPv4:port, e.g. 127.0.0.1:11211, or none (got '" + o.listen + "')";
  if (!tcp && o.unix_path.empty()) return "--listen none: needs --unix (else nothing would listen)";
  if (o.unix_path.empty() && o.unix_mode) return "--unix-mode: needs --unix";
  if (o.unix_path.empty() && o.unix_group) return "--unix-group: needs --unix";
  const auto mode = o.unix_mode ? parse_unix_mode(*o.unix_mode) : std::optional<uint32_t>(kDefaultUnixMode);
  if (!mode) return "--unix-mode: want an octal mode 0..0777, e.g. 0660 (got '" + *o.unix_mode + "')";
  if (o.unix_group && o.unix_group->empty()) return "--unix-group: empty group name";
  const NodeInfo* client = nullptr;
  std::string known;
  for (const NodeInfo& c : cluster.clients) {
    if (c.name == o.client) client = &c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  if (client == nullptr)
    return "--client: no client named '" + o.client + "' in " + o.config + " clients[] (have: " +
           (known.empty() ? "none" : known) + ")";
  const std::string field = o.config + ": clients[" + o.client + "].";
  if (client->mac == Mac{} || (client->mac[0] & 1)) return field + "mac: must be a unicast MAC";
  if (client->ip == 0) return field + "ip: must not be 0.0.0.0";
  if (o.iface.empty() && client->iface.empty()) return field + "iface: empty (or give --iface)";
  // The smallest useful frame holds a 1-byte key and a 1-byte value.
  if (cluster.mtu < wire::kIpLen + wire::kUdpLen + wire::kHdrLen + 2)
    return o.config + ": cluster.mtu: " + std::to_string(cluster.mtu) + " is too small for a request";

  const ProxyInfo* self = nullptr;
  if (!o.name.empty()) {
    self = cluster.find_proxy(o.name);
    if (self == nullptr) return "--name: no proxies[] entry named '" + o.name + "' in " + o.config;
    if (self->client != o.client)
      return "--name: proxies[" + o.name + "].client is '" + self->client + "', not --client '" + o.client + "'";
  } else {
    for (const ProxyInfo& p : cluster.proxies)
      if (p.client == o.client && self == nullptr) self = &p;
  }

  plan->client = *client;
  plan->name = self != nullptr ? self->name : "";
  plan->metrics = self != nullptr ? self->metrics : "";
  plan->iface = o.iface.empty() ? client->iface : o.iface;
  plan->tcp = tcp;
  plan->listen = *listen;
  plan->unix_mode = *mode;
  plan->unix_group = o.unix_group.value_or("");
  plan->endpoint = client::Endpoint{client->mac, client->ip, 0, cluster.service_ip, cluster.udp_port};
  plan->engine = client::EngineOptions{o.window, o.timeout_ms / 1000.0, static_cast<int>(o.retries)};
  plan->loop.max_conns = o.max_conns;
  SessionConfig& s = plan->loop.session;
  s.max_kv = wire::max_kv_bytes(cluster.mtu);
  s.limits.max_value = s.max_kv - 1;  // with the shortest key; Session checks key + value
  s.max_pending = o.max_pending;
  s.max_output = o.max_output;
  return "";
}

std::optional<uint32_t> parse_unix_mode(const std::string& text) {
  if (text.empty() || text.size() > 4) return std::nullopt;
  uint32_t mode = 0;
  for (const char c : text) {
    if (c < '0' || c > '7') return std::nullopt;
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  if (mode > 0777) return std::nullopt;
  return mode;
}

}  // namespace exo::proxy
