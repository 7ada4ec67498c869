// Which db nodes hold a slot, in which order (docs/design/replication.md, 2.2): the slot's
// chain, head first and tail last. The head takes the slot's writes and passes them down the
// chain; the tail (the read server) answers the slot's GETs. Pure data and lookups: no I/O,
// no locks. A table is immutable once built; a node swaps in a new one as a whole
// (ChainView), so a packet thread always reads one consistent table.
//
// At replication factor 1 every chain is the slot's owner alone and the node behaves as it did
// before replication existed (one role: head and tail at once, nothing forwarded).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cluster.h"

namespace exo::db {

enum class ChainRole : uint8_t {
  kNone,    // not in the slot's chain
  kSole,    // head and tail at once (a chain of one)
  kHead,    // takes writes, passes them on; does not serve GETs
  kMiddle,  // applies what its predecessor passes, passes it on
  kTail,    // applies, acknowledges, serves the slot's GETs
};
const char* to_string(ChainRole r);

struct ChainTable {
  uint64_t version = 0;  // grows with every change; 0: built from the resolved config
  uint32_t partition_bits = 8;
  std::vector<std::vector<uint32_t>> chains;  // slot -> db node indices, head first

  // The initial table of `cluster` (its resolved `chains`), version 0.
  static ChainTable from_cluster(const Cluster& cluster);

  uint32_t slot_of(uint64_t hash40) const {
    return static_cast<uint32_t>((hash40 & kHashMask) >> (kHashBits - partition_bits));
  }
  bool replicated() const;  // any chain longer than one node
  ChainRole role(uint32_t slot, uint32_t node) const;
  // The node after / before `node` in the slot's chain; nullopt at the tail / head or when
  // `node` is not in the chain.
  std::optional<uint32_t> successor(uint32_t slot, uint32_t node) const;
  std::optional<uint32_t> predecessor(uint32_t slot, uint32_t node) const;
  uint32_t head(uint32_t slot) const { return chains[slot].front(); }
  uint32_t tail(uint32_t slot) const { return chains[slot].back(); }
};

// The table a node acts on now, swapped as a whole (by a SetChains push, later steps of the
// design) while packet threads read it.
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
