// Ethernet port, queues and mempool setup (DPDK). One RX/TX queue pair per lcore.
#pragma once

#include <cstdint>
#include <string>

#include <rte_ethdev.h>
#include <rte_mempool.h>

namespace exo::cache {

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
// (request frames are addressed to key-hash MACs, not to ours). Throws std::runtime_error.
Port open_port(const PortConfig& cfg);

// Stops and closes the port; the mempool is freed by rte_eal_cleanup.
void close_port(Port& port);

}  // namespace exo::cache
