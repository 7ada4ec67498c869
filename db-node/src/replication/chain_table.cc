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
    case ChainRole::kLearner: return "learner";
  }
  return "?";
}

ChainTable ChainTable::from_cluster(const Cluster& cluster) {
  ChainTable t;
  t.partition_bits = cluster.partition_bits;
  std::vector<std::vector<uint32_t>> chains = cluster.slot_chain;
  // A resolved config without chains (older files) has each slot's owner alone.
  if (chains.empty())
    for (uint32_t owner : cluster.slot_owner) chains.push_back({owner});
  for (auto& c : chains) {
    SlotChainInfo s;
    s.members = static_cast<uint32_t>(c.size());
    s.read_server = c.empty() ? kNoReadServer : static_cast<int32_t>(c.back());
    s.order = std::move(c);
    t.slots.push_back(std::move(s));
  }
  return t;
}

bool ChainTable::replicated() const {
  return std::any_of(slots.begin(), slots.end(), [](const auto& s) { return s.order.size() > 1; });
}

ChainRole ChainTable::role(uint32_t slot, uint32_t node) const {
  const SlotChainInfo& s = slots[slot];
  const auto it = std::find(s.order.begin(), s.order.end(), node);
  if (it == s.order.end()) return ChainRole::kNone;
  const size_t i = static_cast<size_t>(it - s.order.begin());
  if (i >= s.members) return ChainRole::kLearner;
  if (s.order.size() == 1) return ChainRole::kSole;
  if (i == 0) return ChainRole::kHead;
  if (i + 1 == s.members) return ChainRole::kTail;
  return ChainRole::kMiddle;
}

std::optional<uint32_t> ChainTable::successor(uint32_t slot, uint32_t node) const {
  const std::vector<uint32_t>& c = slots[slot].order;
  const auto it = std::find(c.begin(), c.end(), node);
  if (it == c.end() || it + 1 == c.end()) return std::nullopt;
  return *(it + 1);
}

std::optional<uint32_t> ChainTable::predecessor(uint32_t slot, uint32_t node) const {
  const std::vector<uint32_t>& c = slots[slot].order;
  const auto it = std::find(c.begin(), c.end(), node);
  if (it == c.end() || it == c.begin()) return std::nullopt;
  return *(it - 1);
}

std::vector<uint32_t> ChainTable::learning(uint32_t node) const {
  std::vector<uint32_t> out;
  for (uint32_t s = 0; s < slots.size(); ++s)
    if (role(s, node) == ChainRole::kLearner) out.push_back(s);
  return out;
}

}  // namespace exo::db
