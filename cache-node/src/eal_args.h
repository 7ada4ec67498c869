// The cache node's DPDK EAL argv, built by the shared builder (common/cpp/dpdk/eal_args.h, also
// used by the wimpy emulator) from its cache_nodes[] entry. Pure function, unit-tested.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cluster.h"
#include "dpdk/eal_args.h"

namespace exo::cache {

using exo::dpdk::af_packet_framesz;
using exo::dpdk::count_lcores;
using exo::dpdk::kMaxLcoreId;

// argv[0] = prog, then: -l <lcores> --file-prefix exo-<name> --log-level=*:warning, then either
//   the emulation default (cfg.eal_args empty): --no-huge -m 256 --no-pci
//     --vdev=net_af_packet0,iface=<iface>,qpairs=<lcore count>[,framesz=N,blocksz=N if mtu > 1500]
//   or cfg.eal_args verbatim (a NIC deployment: -a <pci> ...),
// then `extra` (everything after `--` on our command line) so an operator can override anything.
std::vector<std::string> build_eal_args(const std::string& prog, const CacheNodeInfo& cfg,
                                        uint32_t mtu, const std::vector<std::string>& extra);

}  // namespace exo::cache
