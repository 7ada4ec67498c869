// Builds the DPDK EAL argv from the cluster config (pure function, unit-tested).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cluster.h"

namespace exo::cache {

// Largest lcore id accepted in a core list (DPDK's own RTE_MAX_LCORE is smaller, typically 128).
inline constexpr unsigned kMaxLcoreId = 1023;

// Number of lcores in a DPDK -l list such as "1", "0-3" or "0,2-3". Throws std::invalid_argument
// (and nothing else) on a malformed list or a core id over kMaxLcoreId.
size_t count_lcores(const std::string& list);

// AF_PACKET ring frame size for the emulation vdev: the PMD default (2048) when a 14 + mtu frame
// fits it with the tpacket header, else the next power of two (jumbo MTUs).
size_t af_packet_framesz(uint32_t mtu);

// argv[0] = prog, then: -l <lcores> --file-prefix exo-<name> --log-level=*:warning, then either
//   the emulation default (cfg.eal_args empty): --no-huge -m 256 --no-pci
//     --vdev=net_af_packet0,iface=<iface>,qpairs=<lcore count>[,framesz=N,blocksz=N if mtu > 1500]
//   or cfg.eal_args verbatim (a NIC deployment: -a <pci> ...),
// then `extra` (everything after `--` on our command line) so an operator can override anything.
std::vector<std::string> build_eal_args(const std::string& prog, const CacheNodeInfo& cfg,
                                        uint32_t mtu, const std::vector<std::string>& extra);

}  // namespace exo::cache
