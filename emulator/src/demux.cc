#include "demux.h"

#include "keyhash.h"
#include "wire.h"

namespace exo::emu {

uint64_t Demux::mac_key(const uint8_t* m) {
  uint64_t k = 0;
  for (int i = 0; i < 6; ++i) k = k << 8 | m[i];
  return k;
}

Demux::Demux(const Cluster& cluster, const std::vector<uint32_t>& hosted)
    : cluster_(cluster), slot_of_db_(cluster.db_nodes.size(), -1) {
  for (uint32_t slot = 0; slot < hosted.size(); ++slot) {
    const uint32_t db = hosted[slot];
    if (db >= slot_of_db_.size()) continue;  // the caller's bug; never routed to
    slot_of_db_[db] = static_cast<int>(slot);
    macs_.emplace(mac_key(cluster.db_nodes[db].mac.data()), slot);
  }
}

Route Demux::route(std::span<const uint8_t> frame) const {
  if (frame.size() < wire::kEthLen) return {};
  const uint8_t* dst = frame.data();
  if (macs_.count(mac_key(dst + 6))) return {Route::kOwnTx, 0};
  if (wire::is_request_mac(dst)) {
    // slot_owner has 2^partition_bits entries (checked when the config is loaded); an empty
    // table (a hand-made config) routes nothing rather than reading out of bounds.
    if (cluster_.slot_owner.empty()) return {};
    const uint32_t owner = cluster_.owner_index(hash_from_mac(dst));
    const int slot = slot_of(owner);
    if (slot < 0) return {};
    return {Route::kNode, static_cast<uint32_t>(slot)};
  }
  if (auto it = macs_.find(mac_key(dst)); it != macs_.end()) return {Route::kNode, it->second};
  return {};
}

}  // namespace exo::emu
