// The heads table's checks (heads.h). Pure except Heads::replace's swap.
#include "heads.h"

#include <unordered_map>

namespace exo::cache {

HeadsTable HeadsTable::from_cluster(const Cluster& cluster) {
  HeadsTable t;
  t.partition_bits = cluster.partition_bits;
  t.head = cluster.slot_owner;
  return t;
}

std::string build_heads(const Cluster& cluster, uint64_t version, const std::vector<std::string>& names,
                        HeadsTable* out) {
  if (version == 0) return "version: 0 is the config's own table; a pushed table has version >= 1";
  const size_t slots = size_t{1} << cluster.partition_bits;
  if (names.size() != slots)
    return "heads: " + std::to_string(names.size()) + " entries, want one per slot: " + std::to_string(slots) +
           " (2^partition_bits, partition_bits " + std::to_string(cluster.partition_bits) + ")";
  std::unordered_map<std::string, uint32_t> index;
  for (uint32_t i = 0; i < cluster.db_nodes.size(); ++i) index.emplace(cluster.db_nodes[i].name, i);
  HeadsTable t;
  t.version = version;
  t.partition_bits = cluster.partition_bits;
  t.head.reserve(slots);
  for (size_t s = 0; s < slots; ++s) {
    // Spares (member: false) are allowed: `exo node add` makes one a member, and so a head later.
    if (names[s].empty()) return "heads[" + std::to_string(s) + "]: empty; every slot has a head";
    const auto it = index.find(names[s]);
    if (it == index.end()) return "heads[" + std::to_string(s) + "]: no db node named '" + names[s] + "'";
    t.head.push_back(it->second);
  }
  *out = std::move(t);
  return "";
}

std::string check_not_older(uint64_t held, uint64_t version) {
  if (version >= held) return "";
  return "version: " + std::to_string(version) + " is older than the heads table in use (version " +
         std::to_string(held) + ")";
}

std::string Heads::replace(HeadsTable t, uint64_t* held_after) {
  std::lock_guard lock(write_mu_);
  const uint64_t held = get()->version;
  if (std::string e = check_not_older(held, t.version); !e.empty()) {
    *held_after = held;
    return e;
  }
  *held_after = t.version;
  table_.store(std::make_shared<const HeadsTable>(std::move(t)), std::memory_order_release);
  return "";
}

}  // namespace exo::cache
