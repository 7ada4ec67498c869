// libFuzzer target: the resolved cluster config parser (exo::parse_cluster, what load_cluster
// runs on the JSON file) on arbitrary text. Bad input must end in a ClusterError: any other
// exception escapes and libFuzzer reports it, as do sanitizer findings. An accepted config must
// be usable by the nodes: a complete partition table pointing at real db nodes.
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
  if (c.slot_owner.size() != (size_t{1} << c.partition_bits)) std::abort();
  for (uint32_t owner : c.slot_owner)
    if (owner >= c.db_nodes.size()) std::abort();
  if (c.hot_keys.weights.size() != c.hot_keys.segments) std::abort();
  // What the nodes do with it: route hashes, look nodes up by name.
  for (uint64_t h : {uint64_t{0}, exo::kHashMask, uint64_t{0x123456789a}})
    if (&c.owner(h) < c.db_nodes.data() || &c.owner(h) >= c.db_nodes.data() + c.db_nodes.size())
      std::abort();
  for (const auto& d : c.db_nodes)
    if (c.find_db(d.name) == nullptr) std::abort();
  for (const auto& n : c.cache_nodes)
    if (c.find_cache(n.name) == nullptr) std::abort();
  return 0;
}
