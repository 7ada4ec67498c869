// Ethernet port, queues and mempool setup (DPDK), shared by the cache node and the wimpy
// emulator. One RX/TX queue pair per lcore.
#pragma once

#include <sched.h>

#include <cstdint>
#include <string>
#include <vector>

#include <rte_ethdev.h>
#include <rte_mempool.h>

namespace exo::dpdk {

struct PortConfig {
  uint16_t nb_queues = 1;
  uint32_t mtu = 1500;  // cluster IP MTU; frames are 14 + mtu bytes
  uint32_t burst = 32;
  uint32_t min_data_room = 2048;  // e.g. the af_packet ring frame size, which the PMD requires
};

struct Port {
  uint16_t id = 0;
  uint16_t nb_queues = 0;
  rte_mempool* pool = nullptr;
  rte_ether_addr mac{};
};

// Picks the first ethdev, creates the mempool, configures nb_queues RX/TX queues (RSS when the
// PMD supports it and there is more than one queue) and starts the port in promiscuous mode
// (request frames are addressed to key-hash MACs, not to ours). Every mbuf's data room holds a
// whole 14 + mtu frame. Throws std::runtime_error.
Port open_port(const PortConfig& cfg);

// Stops and closes the port; the mempool is freed by rte_eal_cleanup.
void close_port(Port& port);

// Pins the calling thread (and so the threads it starts later: gRPC, reporters) to the CPUs of
// `original` (the process's set before EAL pinned the main thread) minus those of the lcores,
// or to all of `original` when the lcores took every CPU (emulation on a small machine).
void pin_to_non_lcore_cpus(const cpu_set_t& original, const std::vector<unsigned>& lcore_ids);

}  // namespace exo::dpdk
