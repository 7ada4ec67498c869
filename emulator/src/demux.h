// Which emulated db node a received frame is for (the emulator's one addition in front of the
// db node's request handler). The switch already did the routing (Ruleset 3: key-hash range ->
// the emulator's port; Ruleset 1: node MAC -> port), so the emulator repeats the same decision
// locally from the frame's destination MAC:
//   0xAA/0xAE/0xBA:<hash40>  a request (wire::is_request_mac): the node owning the hash
//                            (cluster.owner_index) if hosted here
//   a hosted node's MAC      the frame goes to that node (its handler ignores what is not a
//                            request)
//   anything else            foreign (ARP, broadcast, other hosts' traffic, keys of nodes not
//                            hosted here): not any node's, dropped and counted by the caller
// A frame whose source MAC is a hosted node's is our own reply seen again by the capture
// socket (AF_PACKET delivers outgoing frames to RX too); it is dropped before routing.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "cluster.h"

namespace exo::emu {

struct Route {
  enum Kind : uint8_t { kNode, kForeign, kOwnTx };
  Kind kind = kForeign;
  uint32_t node = 0;  // index into the hosted nodes, when kind == kNode
};

class Demux {
 public:
  // `hosted`: indices into cluster.db_nodes of the nodes this process emulates, in slot order.
  Demux(const Cluster& cluster, const std::vector<uint32_t>& hosted);

  Route route(std::span<const uint8_t> frame) const;

  // The hosted slot of db_nodes[db_index], or -1.
  int slot_of(uint32_t db_index) const {
    return db_index < slot_of_db_.size() ? slot_of_db_[db_index] : -1;
  }

 private:
  static uint64_t mac_key(const uint8_t* m);

  const Cluster& cluster_;
  std::vector<int> slot_of_db_;                  // db index -> hosted slot or -1
  std::unordered_map<uint64_t, uint32_t> macs_;  // hosted node MAC -> slot
};

}  // namespace exo::emu
