// DPDK EAL argv building, shared by the cache node and the wimpy emulator (pure functions,
// DPDK-free, unit-tested in cache-node/tests/eal_args_test.cc and emulator/tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace exo::dpdk {

// Largest lcore id accepted in a core list (DPDK's own RTE_MAX_LCORE is smaller, typically 128).
inline constexpr unsigned kMaxLcoreId = 1023;

// Number of lcores in a DPDK -l list such as "1", "0-3" or "0,2-3". Throws std::invalid_argument
// (and nothing else) on a malformed list or a core id over kMaxLcoreId.
size_t count_lcores(const std::string& list);

// AF_PACKET ring frame size for the emulation vdev: the PMD default (2048) when a 14 + mtu frame
// fits it with the tpacket header, else the next power of two (jumbo MTUs).
size_t af_packet_framesz(uint32_t mtu);

// What a DPDK process of the cluster needs from its config section.
struct EalSpec {
  std::string file_prefix;            // unique per process on the machine (--file-prefix)
  std::string lcores;                 // -l list
  std::string iface;                  // kernel interface of the AF_PACKET vdev (emulation)
  std::vector<std::string> eal_args;  // empty: emulation default; else verbatim (NIC deployment)
};

// argv[0] = prog, then: -l <lcores> --file-prefix <file_prefix> --log-level=*:warning, then either
//   the emulation default (spec.eal_args empty): --no-huge -m 256 --no-pci
//     --vdev=net_af_packet0,iface=<iface>,qpairs=<lcore count>[,framesz=N,blocksz=N if mtu > 1500]
//   or spec.eal_args verbatim (a NIC deployment: -a <pci> ...),
// then `extra` (everything after `--` on the program's command line) so an operator can
// override anything. Throws std::invalid_argument on a bad lcores list (emulation default only).
std::vector<std::string> build_eal_args(const std::string& prog, const EalSpec& spec, uint32_t mtu,
                                        const std::vector<std::string>& extra);

}  // namespace exo::dpdk
