#include "cluster.h"

#include <arpa/inet.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

namespace exo {
namespace {

using json = nlohmann::json;

const json& section(const json& j, const char* name, const std::string& where) {
  if (!j.is_object() || !j.contains(name)) throw ClusterError(where + name + ": missing section");
  return j.at(name);
}

// A section that is a list of nodes.
const json& list_section(const json& j, const char* name, const std::string& where) {
  const json& s = section(j, name, where);
  if (!s.is_array()) throw ClusterError(where + name + ": not a list");
  return s;
}

// Typed field access that fails with a ClusterError, never anything else. Integers must be
// whole numbers in the target's range: nlohmann would cast a float or a negative number
// (1e20 into a uint32_t is undefined behaviour).
template <typename T>
T field(const json& j, const char* name, const std::string& where) {
  if (!j.is_object() || !j.contains(name)) throw ClusterError(where + "." + name + ": missing");
  const json& v = j.at(name);
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw ClusterError(where + "." + name + ": not true/false");
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    static_assert(std::is_unsigned_v<T>);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > std::numeric_limits<T>::max())
      throw ClusterError(where + "." + name + ": not a whole number in 0.." +
                         std::to_string(std::numeric_limits<T>::max()));
    return static_cast<T>(v.get<uint64_t>());
  } else {
    try {
      return v.get<T>();
    } catch (const json::exception& e) {
      throw ClusterError(where + "." + name + ": " + e.what());
    }
  }
}

void fill_node(const json& j, NodeInfo& n, const std::string& where) {
  n.name = field<std::string>(j, "name", where);
  try {
    n.mac = parse_mac(field<std::string>(j, "mac", where));
    n.ip = parse_ipv4(field<std::string>(j, "ip", where));
  } catch (const ClusterError& e) {
    throw ClusterError(where + ": " + e.what());
  }
  n.switch_port = field<uint32_t>(j, "switch_port", where);
  n.iface = field<std::string>(j, "iface", where);
}

// The Python schema validates ranges; these checks only guard what would break a node.
void load_hot_keys(const json& j, HotKeysConfig& h, const std::string& where) {
  h.top_k = field<uint32_t>(j, "top_k", where);
  h.sample_rate = field<double>(j, "sample_rate", where);
  if (j.contains("confidence_z")) h.confidence_z = field<double>(j, "confidence_z", where);
  h.segment_ms = field<uint32_t>(j, "segment_ms", where);
  h.segments = field<uint32_t>(j, "segments", where);
  h.weights = field<std::vector<double>>(j, "weights", where);
  h.load_ewma_alpha = field<double>(j, "load_ewma_alpha", where);
  h.report_interval_ms = field<uint32_t>(j, "report_interval_ms", where);
  h.report_keys = field<uint32_t>(j, "report_keys", where);
  if (h.top_k == 0) throw ClusterError(where + ".top_k: must be >= 1");
  if (!(h.sample_rate > 0 && h.sample_rate <= 1)) throw ClusterError(where + ".sample_rate: must be in (0, 1]");
  if (h.confidence_z < 0) throw ClusterError(where + ".confidence_z: must be >= 0");
  if (h.segments == 0 || h.segment_ms == 0) throw ClusterError(where + ".segments: must be >= 1");
  if (h.weights.size() != h.segments)
    throw ClusterError(where + ".weights: needs one entry per segment (" + std::to_string(h.segments) + ")");
  if (h.report_interval_ms == 0) throw ClusterError(where + ".report_interval_ms: must be >= 1");
}

void load_cache_fill(const json& j, CacheFillConfig& f, const std::string& where) {
  f.enabled = field<bool>(j, "enabled", where);
  f.interval_ms = field<uint32_t>(j, "interval_ms", where);
  f.min_rate = field<double>(j, "min_rate", where);
  f.hysteresis = field<double>(j, "hysteresis", where);
  f.report_ttl_ms = field<uint32_t>(j, "report_ttl_ms", where);
  f.hit_ewma_alpha = field<double>(j, "hit_ewma_alpha", where);
  f.max_fetch_batch = field<uint32_t>(j, "max_fetch_batch", where);
  if (f.interval_ms == 0) throw ClusterError(where + ".interval_ms: must be >= 1");
  if (f.max_fetch_batch == 0) throw ClusterError(where + ".max_fetch_batch: must be >= 1");
}

void load_emulation(const json& j, EmulationConfig& e, const std::string& where) {
  e.value_size = field<uint32_t>(j, "value_size", where);
  e.db_rate_limit_rps = field<double>(j, "db_rate_limit_rps", where);
  e.lcores = field<std::string>(j, "lcores", where);
  e.burst = field<uint32_t>(j, "burst", where);
  e.idle_sleep_us = field<uint32_t>(j, "idle_sleep_us", where);
  e.eal_args = field<std::vector<std::string>>(j, "eal_args", where);
  if (e.db_rate_limit_rps < 0) throw ClusterError(where + ".db_rate_limit_rps: must be >= 0");
  if (e.burst == 0) throw ClusterError(where + ".burst: must be >= 1");
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

Cluster load_cluster(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ClusterError(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ClusterError(path + ": cannot read");
  return parse_cluster(text.str(), path);
}

namespace {

Cluster parse_json(const json& j, const std::string& path) {
  Cluster c;
  const std::string w = path + ": ";
  const json& cl = section(j, "cluster", w);
  c.mtu = field<uint32_t>(cl, "mtu", w + "cluster");
  // As the schema (controller/exo_controller/config.py); a smaller MTU would leave no room for a
  // key, a larger one overflows the db node's receive buffer.
  if (c.mtu < 576 || c.mtu > 9000) throw ClusterError(w + "cluster.mtu: must be in 576..9000");
  c.udp_port = field<uint16_t>(cl, "udp_port", w + "cluster");
  c.service_ip = parse_ipv4(field<std::string>(cl, "service_ip", w + "cluster"));
  c.partition_bits = field<uint32_t>(section(j, "switch", w), "partition_bits", w + "switch");
  // The schema allows 1..12; beyond 24 the partition table alone would be absurd (and a shift by
  // more than the hash's 40 bits undefined).
  if (c.partition_bits < 1 || c.partition_bits > 24)
    throw ClusterError(w + "switch.partition_bits: must be in 1..24");
  c.controller_grpc = field<std::string>(section(j, "controller", w), "grpc", w + "controller");
  // Optional (defaults in cluster.h): `exo config resolve` always writes them.
  if (j.contains("hot_keys")) load_hot_keys(j.at("hot_keys"), c.hot_keys, w + "hot_keys");
  if (j.contains("cache_fill")) load_cache_fill(j.at("cache_fill"), c.cache_fill, w + "cache_fill");
  if (j.contains("emulation")) load_emulation(j.at("emulation"), c.emulation, w + "emulation");

  const json& caches = list_section(j, "cache_nodes", w);
  for (size_t i = 0; i < caches.size(); ++i) {
    const std::string where = w + "cache_nodes[" + std::to_string(i) + "]";
    CacheNodeInfo n;
    fill_node(caches[i], n, where);
    n.grpc = field<std::string>(caches[i], "grpc", where);
    n.capacity = field<uint32_t>(caches[i], "capacity", where);
    n.lcores = field<std::string>(caches[i], "lcores", where);
    n.burst = field<uint32_t>(caches[i], "burst", where);
    n.idle_sleep_us = field<uint32_t>(caches[i], "idle_sleep_us", where);
    n.eal_args = field<std::vector<std::string>>(caches[i], "eal_args", where);
    if (caches[i].contains("rate_limit_rps"))
      n.rate_limit_rps = field<double>(caches[i], "rate_limit_rps", where);
    if (n.rate_limit_rps < 0) throw ClusterError(where + ".rate_limit_rps: must be >= 0");
    c.cache_nodes.push_back(std::move(n));
  }
  const json& dbs = list_section(j, "db_nodes", w);
  for (size_t i = 0; i < dbs.size(); ++i) {
    const std::string where = w + "db_nodes[" + std::to_string(i) + "]";
    DbNodeInfo n;
    fill_node(dbs[i], n, where);
    n.grpc = field<std::string>(dbs[i], "grpc", where);
    n.data_dir = field<std::string>(dbs[i], "data_dir", where);
    n.threads = field<uint32_t>(dbs[i], "threads", where);
    n.sync_writes = field<bool>(dbs[i], "sync_writes", where);
    if (dbs[i].contains("cache_node") && !dbs[i].at("cache_node").is_null())
      n.cache_node = field<std::string>(dbs[i], "cache_node", where);
    if (dbs[i].contains("emulator") && !dbs[i].at("emulator").is_null())
      n.emulator = field<std::string>(dbs[i], "emulator", where);
    c.db_nodes.push_back(std::move(n));
  }
  const json& clients = list_section(j, "clients", w);
  for (size_t i = 0; i < clients.size(); ++i) {
    NodeInfo n;
    fill_node(clients[i], n, w + "clients[" + std::to_string(i) + "]");
    c.clients.push_back(std::move(n));
  }
  const auto owners = field<std::vector<std::string>>(j, "partitions", w.substr(0, w.size() - 2));
  if (owners.size() != (size_t{1} << c.partition_bits))
    throw ClusterError(w + "partitions: expected 2^partition_bits entries");
  for (size_t s = 0; s < owners.size(); ++s) {
    uint32_t idx = UINT32_MAX;
    for (size_t d = 0; d < c.db_nodes.size(); ++d)
      if (c.db_nodes[d].name == owners[s]) idx = static_cast<uint32_t>(d);
    if (idx == UINT32_MAX)
      throw ClusterError(w + "partitions[" + std::to_string(s) + "]: unknown db node '" + owners[s] + "'");
    c.slot_owner.push_back(idx);
  }
  return c;
}

}  // namespace

Cluster parse_cluster(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw ClusterError(source + ": not valid JSON: " + e.what());
  }
  try {
    return parse_json(j, source);
  } catch (const json::exception& e) {  // a shape the checks above missed: still a config error
    throw ClusterError(source + ": " + e.what());
  }
}

}  // namespace exo
