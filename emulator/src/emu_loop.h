// The emulator's run-to-completion lcore loop: burst RX from the lane's queue, each frame
// through Emulator::handle() (demux, token bucket, the node's db request handler), replies
// copied into the RX mbuf and buffered for TX, the buffer drained when full, every ~100 us and
// before an idle sleep; an empty burst sleeps idle_sleep_us (2 shared cores in emulation).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <rte_common.h>
#include <rte_mbuf.h>

#include "emulator.h"

namespace exo::emu {

inline constexpr uint32_t kMaxBurst = 512;  // emulation.burst is at most 512

// One lane per lcore, on its own cache lines, written only by its lcore.
struct alignas(RTE_CACHE_LINE_SIZE) EmuLane {
  unsigned lcore_id = 0;
  uint16_t queue = 0;  // == lane index
  std::vector<uint8_t> scratch;  // the handler's output (it must not alias the RX frame)
  rte_mbuf* tx[2 * kMaxBurst] = {};
  uint32_t tx_node[2 * kMaxBurst] = {};
  uint16_t ntx = 0;
};

struct EmuShared {
  uint16_t port = 0;
  uint32_t burst = 32;          // <= kMaxBurst
  uint32_t idle_sleep_us = 20;  // 0 = spin
  Emulator* emu = nullptr;
  const std::atomic<bool>* quit = nullptr;
  EmuLane* lanes = nullptr;     // indexed by lcore id (RTE_MAX_LCORE entries)
};

// rte_eal_mp_remote_launch entry point; `arg` is an EmuShared*.
int emu_lcore_main(void* arg);

}  // namespace exo::emu
