// Which db node heads each slot, as this cache node knows it (docs/replication.md, "Failover";
// design step 6). The head of a key's slot is where the cache node sends the key's Fetch and
// Evict (peers.cc) and the only db node whose Prepare/Commit/Abort of the key it accepts
// (control_tx.cc). It starts as the config's owners (version 0) and is replaced as a whole by
// the controller's CacheNode.SetHeads when a head changes (control_heads.cc).
//
// Only control threads (gRPC handlers, the filler) read it; the lcores' GET path never does, so
// a read is one atomic shared_ptr load and a reader keeps the table it loaded for its whole call.
// The pure part (build_heads, HeadsTable) is separate from the holder and tested on its own
// (tests/heads_test.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster.h"

namespace exo::cache {

struct HeadsTable {
  uint64_t version = 0;         // the controller's chain table version; 0: the config's owners
  uint32_t partition_bits = 8;  // cluster.partition_bits
  std::vector<uint32_t> head;   // slot -> index into cluster.db_nodes; 2^partition_bits entries

  // The config's owners (cluster.slot_owner), version 0.
  static HeadsTable from_cluster(const Cluster& cluster);
  // Index into cluster.db_nodes of the head of the slot of this 40-bit key hash.
  uint32_t head_index(uint64_t hash40) const {
    return head[(hash40 & kHashMask) >> (kHashBits - partition_bits)];
  }
};

// A SetHeads request (`version`, one db node name per slot) checked against `cluster`: "" and
// the table in *out, or why not, naming the field ("version", "heads", "heads[i]"). Pure.
std::string build_heads(const Cluster& cluster, uint64_t version, const std::vector<std::string>& names,
                        HeadsTable* out);

// "" when a table of `version` may replace one of `held` (not older: an equal version is the
// controller repeating itself, e.g. a new master adopting the table), else why not. Pure.
std::string check_not_older(uint64_t held, uint64_t version);

// The table in use, swapped as a whole. Thread-safe.
class Heads {
 public:
  explicit Heads(HeadsTable initial)
      : table_(std::make_shared<const HeadsTable>(std::move(initial))) {}
  std::shared_ptr<const HeadsTable> get() const { return table_.load(std::memory_order_acquire); }
  // Installs `t` unless it is older than the table held: "" or why not. *held_after is the
  // version in use once the call returns (either way).
  std::string replace(HeadsTable t, uint64_t* held_after);

 private:
  std::mutex write_mu_;  // replace()'s check and swap are one step; readers never take it
  std::atomic<std::shared_ptr<const HeadsTable>> table_;
};

}  // namespace exo::cache
