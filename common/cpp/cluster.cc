#include "cluster.h"

#include <arpa/inet.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "exoproto/cluster.pb.h"

// The file's shape, names and types are proto/exoproto/cluster.proto's; meanings, defaults and
// ranges are the Python schema's (common/exo_common/config.py), which validated the
// config before resolving it. This reader adds only what protects a node from a file it cannot
// run from (hand-edited, truncated, written by another version): every field present, numbers
// finite and in the range the node's code assumes, names that resolve.

namespace exo {
namespace {

namespace pb = google::protobuf;

// Every field that has presence (all the message's `optional` scalars and sections) must be
// set, so a node never falls back on a default of its own; doubles must be finite (the proto
// JSON mapping accepts "NaN" and "Infinity", which no range check below would catch).
void check_complete(const pb::Message& m, const std::string& where, const std::string& source) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    const std::string at = where.empty() ? f->name() : where + "." + f->name();
    const bool is_msg = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE;
    const bool is_double = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE;
    if (f->is_repeated()) {
      for (int k = 0, n = r->FieldSize(m, f); k < n; ++k) {
        const std::string ak = at + "[" + std::to_string(k) + "]";
        if (is_msg) check_complete(r->GetRepeatedMessage(m, f, k), ak, source);
        if (is_double && !std::isfinite(r->GetRepeatedDouble(m, f, k)))
          throw ClusterError(source + ": " + ak + ": not a finite number");
      }
      continue;
    }
    if (f->has_presence() && !r->HasField(m, f)) throw ClusterError(source + ": " + at + ": missing");
    if (is_msg) check_complete(r->GetMessage(m, f), at, source);
    if (is_double && !std::isfinite(r->GetDouble(m, f)))
      throw ClusterError(source + ": " + at + ": not a finite number");
  }
}

// Names the file and field of a failed check: bad(source, "cluster.mtu", "must be ...").
[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& why) {
  throw ClusterError(source + ": " + field + ": " + why);
}

template <typename Msg>
void fill_node(const Msg& m, NodeInfo& n, const std::string& where, const std::string& source) {
  n.name = m.name();
  try {
    n.mac = parse_mac(m.mac());
  } catch (const ClusterError& e) {
    bad(source, where + ".mac", e.what());
  }
  try {
    n.ip = parse_ipv4(m.ip());
  } catch (const ClusterError& e) {
    bad(source, where + ".ip", e.what());
  }
  n.switch_port = m.switch_port();
  n.iface = m.iface();
}

HotKeysConfig hot_keys(const config::HotKeysSection& m, const std::string& source) {
  HotKeysConfig h;
  h.top_k = m.top_k();
  h.sample_rate = m.sample_rate();
  h.confidence_z = m.confidence_z();
  h.segment_ms = m.segment_ms();
  h.segments = m.segments();
  h.weights.assign(m.weights().begin(), m.weights().end());
  h.load_ewma_alpha = m.load_ewma_alpha();
  h.report_interval_ms = m.report_interval_ms();
  h.report_keys = m.report_keys();
  // The detector divides by these and sizes its estimators and segment ring from them.
  if (h.top_k == 0) bad(source, "hot_keys.top_k", "must be >= 1");
  if (!(h.sample_rate > 0 && h.sample_rate <= 1)) bad(source, "hot_keys.sample_rate", "must be in (0, 1]");
  if (h.confidence_z < 0) bad(source, "hot_keys.confidence_z", "must be >= 0");
  if (h.segments == 0) bad(source, "hot_keys.segments", "must be >= 1");
  if (h.segment_ms == 0) bad(source, "hot_keys.segment_ms", "must be >= 1");
  if (h.weights.size() != h.segments)
    bad(source, "hot_keys.weights", "needs one entry per segment (" + std::to_string(h.segments) + ")");
  if (h.report_interval_ms == 0) bad(source, "hot_keys.report_interval_ms", "must be >= 1");
  return h;
}

CacheFillConfig cache_fill(const config::CacheFillSection& m, const std::string& source) {
  CacheFillConfig f;
  f.enabled = m.enabled();
  f.interval_ms = m.interval_ms();
  f.min_rate = m.min_rate();
  f.hysteresis = m.hysteresis();
  f.report_ttl_ms = m.report_ttl_ms();
  f.hit_ewma_alpha = m.hit_ewma_alpha();
  f.max_fetch_batch = m.max_fetch_batch();
  // A zero interval would spin the selection thread; a zero batch would never fetch.
  if (f.interval_ms == 0) bad(source, "cache_fill.interval_ms", "must be >= 1");
  if (f.max_fetch_batch == 0) bad(source, "cache_fill.max_fetch_batch", "must be >= 1");
  return f;
}

EmulationConfig emulation(const config::EmulationSection& m, const std::string& source) {
  EmulationConfig e;
  e.value_size = m.value_size();
  e.db_rate_limit_rps = m.db_rate_limit_rps();
  e.lcores = m.lcores();
  e.burst = m.burst();
  e.idle_sleep_us = m.idle_sleep_us();
  e.eal_args.assign(m.eal_args().begin(), m.eal_args().end());
  if (e.db_rate_limit_rps < 0) bad(source, "emulation.db_rate_limit_rps", "must be >= 0");
  if (e.burst == 0) bad(source, "emulation.burst", "must be >= 1");
  return e;
}

// `chains`, checked against the slot table `c.slot_owner` already read from `partitions`: one
// chain per slot, each non-empty, of at most replication.factor distinct member db nodes,
// headed by the slot's owner (the checks of partitions.check_chains in Python).
std::vector<std::vector<uint32_t>> slot_chains(const config::ResolvedCluster& m, const Cluster& c,
                                               const std::string& source) {
  if (static_cast<size_t>(m.chains_size()) != c.slot_owner.size())
    bad(source, "chains", "expected one chain per slot (" + std::to_string(c.slot_owner.size()) + "), found " +
                              std::to_string(m.chains_size()));
  std::vector<std::vector<uint32_t>> chains(c.slot_owner.size());
  for (int s = 0; s < m.chains_size(); ++s) {
    const auto& nodes = m.chains(s).nodes();
    const std::string where = "chains[" + std::to_string(s) + "]";
    if (nodes.empty()) bad(source, where, "empty");
    if (static_cast<size_t>(nodes.size()) > c.replication.factor)
      bad(source, where,
          std::to_string(nodes.size()) + " nodes, more than replication.factor " + std::to_string(c.replication.factor));
    auto& chain = chains[s];
    for (int k = 0; k < nodes.size(); ++k) {
      const std::string at = where + ".nodes[" + std::to_string(k) + "]";
      const DbNodeInfo* d = c.find_db(nodes[k]);
      if (d == nullptr) bad(source, at, "unknown db node '" + nodes[k] + "'");
      if (!d->member) bad(source, at, "db node '" + nodes[k] + "' is a spare (member false)");
      const auto index = static_cast<uint32_t>(d - c.db_nodes.data());
      for (uint32_t earlier : chain)
        if (earlier == index) bad(source, where, "repeats db node '" + nodes[k] + "'");
      chain.push_back(index);
    }
    if (chain[0] != c.slot_owner[s])
      bad(source, where + ".nodes[0]",
          "head '" + nodes[0] + "', but partitions[" + std::to_string(s) + "] is '" + c.db_nodes[c.slot_owner[s]].name + "'");
  }
  return chains;
}

Cluster to_cluster(const config::ResolvedCluster& m, const std::string& source) {
  Cluster c;
  c.mtu = m.cluster().mtu();
  // A smaller MTU would leave no room for a key, a larger one overflows the db node's receive
  // buffer.
  if (c.mtu < 576 || c.mtu > 9000) bad(source, "cluster.mtu", "must be in 576..9000");
  if (m.cluster().udp_port() > 65535) bad(source, "cluster.udp_port", "must be in 0..65535");
  c.udp_port = static_cast<uint16_t>(m.cluster().udp_port());
  try {
    c.service_ip = parse_ipv4(m.cluster().service_ip());
  } catch (const ClusterError& e) {
    bad(source, "cluster.service_ip", e.what());
  }
  c.partition_bits = m.switch_().partition_bits();
  // The schema allows 1..12; beyond 24 the partition table alone would be absurd (and a shift by
  // more than the hash's 40 bits undefined).
  if (c.partition_bits < 1 || c.partition_bits > 24) bad(source, "switch.partition_bits", "must be in 1..24");
  if (m.switch_().has_rule_update_rate()) c.rule_update_rate = m.switch_().rule_update_rate();
  if (!(c.rule_update_rate > 0)) bad(source, "switch.rule_update_rate", "must be > 0");
  c.controller_grpc = m.controller().grpc();
  c.controller_metrics = m.controller().metrics();
  for (int i = 0; i < m.controller().instances_size(); ++i) {
    const auto& x = m.controller().instances(i);
    const std::string where = "controller.instances[" + std::to_string(i) + "]";
    if (x.name().empty()) bad(source, where + ".name", "empty");
    if (x.grpc().empty()) bad(source, where + ".grpc", "empty");
    for (const auto& prev : c.controllers)
      if (prev.name == x.name()) bad(source, where + ".name", "'" + x.name() + "' named twice");
    c.controllers.push_back({x.name(), x.grpc()});
  }
  if (c.controllers.empty()) bad(source, "controller.instances", "empty; a resolved config lists every controller");
  c.security.insecure_dev_mode = m.security().insecure_dev_mode();
  c.security.cert_dir = m.security().cert_dir();
  c.security.operators.assign(m.security().operators().begin(), m.security().operators().end());
  c.hot_keys = hot_keys(m.hot_keys(), source);
  c.cache_fill = cache_fill(m.cache_fill(), source);
  c.emulation = emulation(m.emulation(), source);

  for (int i = 0; i < m.cache_nodes_size(); ++i) {
    const auto& x = m.cache_nodes(i);
    const std::string where = "cache_nodes[" + std::to_string(i) + "]";
    CacheNodeInfo n;
    fill_node(x, n, where, source);
    n.grpc = x.grpc();
    n.capacity = x.capacity();
    n.lcores = x.lcores();
    n.burst = x.burst();
    n.idle_sleep_us = x.idle_sleep_us();
    n.eal_args.assign(x.eal_args().begin(), x.eal_args().end());
    n.rate_limit_rps = x.rate_limit_rps();
    n.metrics = x.metrics();
    if (n.rate_limit_rps < 0) bad(source, where + ".rate_limit_rps", "must be >= 0");
    c.cache_nodes.push_back(std::move(n));
  }
  for (int i = 0; i < m.db_nodes_size(); ++i) {
    const auto& x = m.db_nodes(i);
    DbNodeInfo n;
    fill_node(x, n, "db_nodes[" + std::to_string(i) + "]", source);
    n.grpc = x.grpc();
    n.data_dir = x.data_dir();
    n.threads = x.threads();
    n.sync_writes = x.sync_writes();
    n.cache_node = x.cache_node();  // null in the file: empty, no cache node
    n.emulator = x.emulator();      // null: empty, a real exo-db-node
    n.metrics = x.metrics();
    n.member = x.member();
    c.db_nodes.push_back(std::move(n));
  }
  for (int i = 0; i < m.clients_size(); ++i) {
    NodeInfo n;
    fill_node(m.clients(i), n, "clients[" + std::to_string(i) + "]", source);
    c.clients.push_back(std::move(n));
  }
  for (int i = 0; i < m.proxies_size(); ++i) {
    const auto& x = m.proxies(i);
    c.proxies.push_back(ProxyInfo{x.name(), x.client(), x.metrics()});
  }
  // The slot table every routing decision indexes: exactly 2^partition_bits valid owners.
  if (static_cast<size_t>(m.partitions_size()) != (size_t{1} << c.partition_bits))
    bad(source, "partitions", "expected 2^partition_bits = " + std::to_string(size_t{1} << c.partition_bits) +
                                  " entries, found " + std::to_string(m.partitions_size()));
  c.slot_owner.reserve(m.partitions_size());
  for (int s = 0; s < m.partitions_size(); ++s) {
    const DbNodeInfo* owner = c.find_db(m.partitions(s));
    if (owner == nullptr)
      bad(source, "partitions[" + std::to_string(s) + "]", "unknown db node '" + m.partitions(s) + "'");
    c.slot_owner.push_back(static_cast<uint32_t>(owner - c.db_nodes.data()));
  }
  c.replication.factor = m.replication().factor();
  if (c.replication.factor == 0) bad(source, "replication.factor", "must be >= 1");
  c.slot_chain = slot_chains(m, c, source);
  return c;
}

}  // namespace

Mac parse_mac(const std::string& s) {
  Mac m{};
  unsigned b[6];
  char extra;
  if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                  &extra) != 6)
    throw ClusterError("not a MAC address: '" + s + "'");
  for (int i = 0; i < 6; ++i) m[i] = static_cast<uint8_t>(b[i]);
  return m;
}

uint32_t parse_ipv4(const std::string& s) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) throw ClusterError("not an IPv4 address: '" + s + "'");
  return ntohl(a.s_addr);
}

std::string format_mac(const uint8_t* mac) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
                mac[4], mac[5]);
  return buf;
}

const CacheNodeInfo* Cluster::find_cache(const std::string& name) const {
  for (const auto& c : cache_nodes)
    if (c.name == name) return &c;
  return nullptr;
}

const DbNodeInfo* Cluster::find_db(const std::string& name) const {
  for (const auto& d : db_nodes)
    if (d.name == name) return &d;
  return nullptr;
}

const ProxyInfo* Cluster::find_proxy(const std::string& name) const {
  for (const auto& p : proxies)
    if (p.name == name) return &p;
  return nullptr;
}

std::string Cluster::role_of(const std::string& name) const {
  if (name == "controller" || name == "switch") return name;
  if (find_cache(name) != nullptr) return "cache";
  if (find_db(name) != nullptr) return "db";
  if (find_proxy(name) != nullptr) return "proxy";
  // A wimpy emulator process speaks for every db node it hosts, with one certificate.
  for (const auto& d : db_nodes)
    if (!d.emulator.empty() && d.emulator == name) return "db";
  for (const auto& o : security.operators)
    if (o == name) return "operator";
  return "";
}

Cluster load_cluster(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ClusterError(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ClusterError(path + ": cannot read");
  return parse_cluster(text.str(), path);
}

Cluster parse_cluster(std::string_view text, const std::string& source) {
  config::ResolvedCluster m;
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a key this reader does not know: another version's file
  const auto status =
      pb::util::JsonStringToMessage(pb::StringPiece(text.data(), text.size()), &m, options);
  if (!status.ok())
    throw ClusterError(source + ": not a resolved cluster config: " + std::string(status.message()));
  check_complete(m, "", source);
  return to_cluster(m, source);
}

}  // namespace exo
