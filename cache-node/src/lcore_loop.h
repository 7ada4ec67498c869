// The run-to-completion loop each lcore runs (l2fwd/l3fwd style): burst RX from its own queue,
// process the burst, buffer TX, drain the TX buffer every ~100 us.
#pragma once

#include <atomic>
#include <cstdint>

#include <rte_common.h>
#include <rte_ethdev.h>

#include "cache_state.h"
#include "counters.h"
#include "request_handler.h"
#include "token_bucket.h"

namespace exo::cache {

// Per-lcore state on its own cache lines: written only by its lcore. The Stats thread reads the
// counters concurrently (relaxed atomics, see counters.h).
struct alignas(RTE_CACHE_LINE_SIZE) LcoreState {
  unsigned lcore_id = 0;
  uint16_t queue = 0;
  rte_eth_dev_tx_buffer* tx_buffer = nullptr;
  // This lcore's share of cache_nodes[].rate_limit_rps; null when unlimited. A scaled
  // experiment caps the cache node to keep the thesis's cache : db capacity ratio.
  TokenBucket* limiter = nullptr;
  DpCounters counters;
};

struct LoopShared {
  uint16_t port = 0;
  uint32_t burst = 32;
  uint32_t idle_sleep_us = 20;  // 0 = spin
  SelfInfo self;
  CacheState* state = nullptr;
  const std::atomic<bool>* quit = nullptr;
  LcoreState* lcores = nullptr;  // indexed by lcore id (RTE_MAX_LCORE entries)
};

// Allocates the TX buffer of `ls` on the lcore's socket; throws std::runtime_error.
void init_lcore_state(LcoreState& ls, uint16_t port, uint32_t burst);

// rte_eal_mp_remote_launch entry point; `arg` is a LoopShared*.
int lcore_main(void* arg);

}  // namespace exo::cache
