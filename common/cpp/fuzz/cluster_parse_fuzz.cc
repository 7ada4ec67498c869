// libFuzzer target: the resolved cluster config reader (exo::parse_cluster, what load_cluster
// runs on the JSON file: protobuf's JSON parser into cluster.proto's ResolvedCluster, then the
// node-protecting checks of cluster.cc) on arbitrary text. Bad input must end in a
// ClusterError: any other exception escapes and libFuzzer reports it, as do sanitizer findings.
// An accepted config must be usable by the nodes: a complete partition table pointing at real
// db nodes, one chain per slot that holds to it (cluster.h, slot_chain), and no number a node
// cannot run on.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  exo::Cluster c;
  try {
    c = exo::parse_cluster(text, "fuzz.json");
  } catch (const exo::ClusterError&) {
    return 0;
  }
  if (c.mtu < 576 || c.mtu > 9000) std::abort();
  if (c.partition_bits < 1 || c.partition_bits > 24) std::abort();
  if (c.slot_owner.size() != (size_t{1} << c.partition_bits)) std::abort();
  for (uint32_t owner : c.slot_owner)
    if (owner >= c.db_nodes.size()) std::abort();
  // Chains: one per slot, non-empty, at most `factor` distinct member nodes, headed by the owner.
  if (c.replication.factor == 0 || c.slot_chain.size() != c.slot_owner.size()) std::abort();
  for (size_t s = 0; s < c.slot_chain.size(); ++s) {
    const auto& chain = c.slot_chain[s];
    if (chain.empty() || chain.size() > c.replication.factor || chain[0] != c.slot_owner[s]) std::abort();
    for (size_t k = 0; k < chain.size(); ++k) {
      if (chain[k] >= c.db_nodes.size() || !c.db_nodes[chain[k]].member) std::abort();
      for (size_t e = 0; e < k; ++e)
        if (chain[e] == chain[k]) std::abort();
    }
  }
  // A cache node always has a controller to ask, and never an unnamed or address-less one.
  if (c.controllers.empty()) std::abort();
  for (const auto& ctl : c.controllers)
    if (ctl.name.empty() || ctl.grpc.empty()) std::abort();
  const auto& h = c.hot_keys;
  if (h.weights.size() != h.segments || h.segments == 0 || h.segment_ms == 0 || h.top_k == 0) std::abort();
  if (!(h.sample_rate > 0 && h.sample_rate <= 1) || !(h.confidence_z >= 0)) std::abort();
  for (double w : h.weights)
    if (!std::isfinite(w)) std::abort();
  if (c.cache_fill.interval_ms == 0 || c.cache_fill.max_fetch_batch == 0) std::abort();
  if (!std::isfinite(c.cache_fill.min_rate) || !std::isfinite(c.cache_fill.hysteresis)) std::abort();
  if (!(c.emulation.db_rate_limit_rps >= 0) || !std::isfinite(c.emulation.db_rate_limit_rps)) std::abort();
  for (const auto& n : c.cache_nodes)
    if (!(n.rate_limit_rps >= 0) || !std::isfinite(n.rate_limit_rps)) std::abort();
  // What the nodes do with it: route hashes, look nodes up by name.
  for (uint64_t hash : {uint64_t{0}, exo::kHashMask, uint64_t{0x123456789a}})
    if (&c.owner(hash) < c.db_nodes.data() || &c.owner(hash) >= c.db_nodes.data() + c.db_nodes.size())
      std::abort();
  for (const auto& d : c.db_nodes)
    if (c.find_db(d.name) == nullptr) std::abort();
  for (const auto& n : c.cache_nodes)
    if (c.find_cache(n.name) == nullptr) std::abort();
  return 0;
}
