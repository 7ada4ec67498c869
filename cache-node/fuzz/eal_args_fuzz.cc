// libFuzzer target: the cache node's EAL argv builder on arbitrary config text. The lcores core
// list (cache_nodes[].lcores in the cluster config) is the only text it parses: count_lcores must
// refuse a bad list with std::invalid_argument (anything else escapes and is reported), and an
// accepted one must give an argv whose AF_PACKET vdev has one queue pair per lcore.
// Input: [mtu selector:2][core list...].
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "eal_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t mtu = 576 + (uint32_t{data[0]} << 8 | data[1]) % (9000 - 576 + 1);
  exo::CacheNodeInfo node;
  node.name = "cache0";
  node.iface = "cache0-eth0";
  node.lcores.assign(reinterpret_cast<const char*>(data + 2), size - 2);
  size_t n = 0;
  try {
    n = exo::cache::count_lcores(node.lcores);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  if (n == 0 || n > size_t{exo::cache::kMaxLcoreId + 1} * node.lcores.size()) std::abort();
  const auto args = exo::cache::build_eal_args("exo-cache-node", node, mtu, {"--extra"});
  if (args.size() < 4 || args[2] != node.lcores || args.back() != "--extra") std::abort();
  const std::string& vdev = args[args.size() - 2];
  const size_t q = vdev.find(",qpairs=");
  if (q == std::string::npos || std::stoul(vdev.substr(q + 8)) != n) std::abort();
  if (exo::cache::af_packet_framesz(mtu) < 14 + size_t{mtu}) std::abort();
  return 0;
}
