#include "replication/chain_table.h"

#include <algorithm>

namespace exo::db {

const char* to_string(ChainRole r) {
  switch (r) {
    case ChainRole::kNone: return "none";
    case ChainRole::kSole: return "sole";
    case ChainRole::kHead: return "head";
    case ChainRole::kMiddle: return "middle";
    case ChainRole::kTail: return "tail";
  }
  return "?";
}

ChainTable ChainTable::from_cluster(const Cluster& cluster) {
  ChainTable t;
  t.partition_bits = cluster.partition_bits;
  t.chains = cluster.slot_chain;
  // A resolved config without chains (older files) has each slot's owner alone.
  if (t.chains.empty())
    for (uint32_t owner : cluster.slot_owner) t.chains.push_back({owner});
  return t;
}

bool ChainTable::replicated() const {
  return std::any_of(chains.begin(), chains.end(), [](const auto& c) { return c.size() > 1; });
}

ChainRole ChainTable::role(uint32_t slot, uint32_t node) const {
  const std::vector<uint32_t>& c = chains[slot];
  const auto it = std::find(c.begin(), c.end(), node);
  if (it == c.end()) return ChainRole::kNone;
  if (c.size() == 1) return ChainRole::kSole;
  if (it == c.begin()) return ChainRole::kHead;
  if (it + 1 == c.end()) return ChainRole::kTail;
  return ChainRole::kMiddle;
}

std::optional<uint32_t> ChainTable::successor(uint32_t slot, uint32_t node) const {
  const std::vector<uint32_t>& c = chains[slot];
  const auto it = std::find(c.begin(), c.end(), node);
  if (it == c.end() || it + 1 == c.end()) return std::nullopt;
  return *(it + 1);
}

std::optional<uint32_t> ChainTable::predecessor(uint32_t slot, uint32_t node) const {
  const std::vector<uint32_t>& c = chains[slot];
  const auto it = std::find(c.begin(), c.end(), node);
  if (it == c.end() || it == c.begin()) return std::nullopt;
  return *(it - 1);
}

}  // namespace exo::db
