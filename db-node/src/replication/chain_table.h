// Which db nodes hold a slot, in which order (docs/design/replication.md, 2.2 and 4): the slot's
// chain, head first. The head takes the slot's writes and passes them down the chain; every
// member applies and passes on; learners (new members catching up, 4.4) come after the last
// member and get every write too; one node, the read server (normally the last member), answers
// the slot's GETs. Pure data and lookups: no I/O, no locks. A table is immutable once built; a
// node swaps in a new one as a whole (ChainView), so a packet thread always reads one table.
//
// At replication factor 1 every chain is the slot's owner alone and the node behaves as it did
// before replication existed (head and read server at once, nothing forwarded).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster.h"

namespace exo::db {

enum class ChainRole : uint8_t {
  kNone,    // not in the slot's chain
  kSole,    // head and last member at once (a chain of one, no learner)
  kHead,    // takes writes, passes them on
  kMiddle,  // applies what its predecessor passes, passes it on
  kTail,    // the last member: applies, passes to learners if any, acknowledges
  kLearner, // after the last member: applies every write, copies the slot, serves nothing
};
const char* to_string(ChainRole r);

// The slot of a 40-bit key hash: its top `partition_bits` bits (Ruleset 3's partitions).
inline uint32_t slot_of_hash(uint64_t hash40, uint32_t partition_bits) {
  return static_cast<uint32_t>((hash40 & kHashMask) >> (kHashBits - partition_bits));
}

// The index into cluster.db_nodes of the db node named `name`, if there is one.
inline std::optional<uint32_t> db_index(const Cluster& cluster, const std::string& name) {
  for (uint32_t i = 0; i < cluster.db_nodes.size(); ++i)
    if (cluster.db_nodes[i].name == name) return i;
  return std::nullopt;
}

struct SlotChainInfo {
  std::vector<uint32_t> order;  // members (head first), then learners; db node indices
  uint32_t members = 0;         // how many of `order` are members (the rest are learners)
  int32_t read_server = -1;     // db node index answering GETs; -1: nobody (a hand-over)
};

struct ChainTable {
  static constexpr int32_t kNoReadServer = -1;
  uint64_t version = 0;  // grows with every change; 0: built from the resolved config
  uint32_t partition_bits = 8;
  std::vector<SlotChainInfo> slots;                      // one per slot
  std::unordered_map<uint32_t, uint64_t> incarnations;  // db node index -> incarnation named

  // The initial table of `cluster` (its resolved `chains`; the tail reads), version 0.
  static ChainTable from_cluster(const Cluster& cluster);

  uint32_t slot_of(uint64_t hash40) const { return slot_of_hash(hash40, partition_bits); }
  bool replicated() const;  // any chain longer than one node
  ChainRole role(uint32_t slot, uint32_t node) const;
  bool is_head(uint32_t slot, uint32_t node) const {
    return slots[slot].members > 0 && slots[slot].order[0] == node;
  }
  bool is_read_server(uint32_t slot, uint32_t node) const {
    return slots[slot].read_server == static_cast<int32_t>(node);
  }
  // The node after / before `node` in the slot's order (members, then learners); nullopt at
  // the ends or when `node` is not in it.
  std::optional<uint32_t> successor(uint32_t slot, uint32_t node) const;
  std::optional<uint32_t> predecessor(uint32_t slot, uint32_t node) const;
  // Slots where `node` is a learner.
  std::vector<uint32_t> learning(uint32_t node) const;
};

// The table a node acts on now, swapped as a whole (SetChains) while packet threads read it.
class ChainView {
 public:
  explicit ChainView(ChainTable initial)
      : table_(std::make_shared<const ChainTable>(std::move(initial))) {}
  std::shared_ptr<const ChainTable> get() const { return table_.load(std::memory_order_acquire); }
  void set(ChainTable t) {
    table_.store(std::make_shared<const ChainTable>(std::move(t)), std::memory_order_release);
  }

 private:
  std::atomic<std::shared_ptr<const ChainTable>> table_;
};

}  // namespace exo::db
