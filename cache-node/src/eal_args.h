// Builds the DPDK EAL argv from the cluster config (pure function, unit-tested).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cluster.h"

namespace exo::cache {

// Number of lcores in a DPDK -l list such as "1", "0-3" or "0,2-3". Throws std::invalid_argument.
size_t count_lcores(const std::string& list);

// argv[0] = prog, then: -l <lcores> --file-prefix exo-<name> --log-level=*:warning, then either
//   the emulation default (cfg.eal_args empty): --no-huge -m 256 --no-pci
//     --vdev=net_af_packet0,iface=<iface>,qpairs=<lcore count>
//   or cfg.eal_args verbatim (a NIC deployment: -a <pci> ...),
// then `extra` (everything after `--` on our command line) so an operator can override anything.
std::vector<std::string> build_eal_args(const std::string& prog, const CacheNodeInfo& cfg,
                                        const std::vector<std::string>& extra);

}  // namespace exo::cache
