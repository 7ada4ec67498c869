#include "lcore_loop.h"

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <array>
#include <chrono>
#include <stdexcept>

namespace exo::cache {
namespace {

constexpr uint64_t kDrainUs = 100;  // TX buffer drain period

// Frames the TX queue refused: count them (the default callback would only free them).
void on_tx_error(rte_mbuf** pkts, uint16_t unsent, void* userdata) {
  auto* c = static_cast<DpCounters*>(userdata);
  bump(c->tx_dropped, unsent);
  rte_pktmbuf_free_bulk(pkts, unsent);
}

// Maps a burst of mbufs onto FrameRefs, processes it, and applies the actions to the mbufs.
void handle_burst(rte_mbuf** pkts, uint16_t n, LcoreState& ls, const LoopShared& sh) {
  std::array<FrameRef, kMaxBurst> frames;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    rte_prefetch0(rte_pktmbuf_mtod(m, void*));
    FrameRef& f = frames[i];
    f.data = rte_pktmbuf_mtod(m, uint8_t*);
    // Single segment only (the data room fits 14 + mtu). A chained mbuf holds a frame larger
    // than that: only its first segment is looked at (to tell ours from foreign traffic), and
    // if it is ours it is dropped and counted as malformed.
    f.len = rte_pktmbuf_data_len(m);
    f.cap = m->nb_segs == 1 ? f.len + rte_pktmbuf_tailroom(m) : f.len;
    f.truncated = m->nb_segs != 1;
  }
  process_burst(frames.data(), n, *sh.state, sh.self, ls.counters);

  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    const FrameRef& f = frames[i];
    if (f.action == Action::kDrop) {
      rte_pktmbuf_free(m);
      continue;
    }
    if (f.action == Action::kReply) {
      // The reply was written in place; fix the mbuf length (reply = request + value - padding).
      const size_t cur = rte_pktmbuf_data_len(m);
      if (f.out_len > cur) {
        rte_pktmbuf_append(m, static_cast<uint16_t>(f.out_len - cur));
      } else if (f.out_len < cur) {
        rte_pktmbuf_trim(m, static_cast<uint16_t>(cur - f.out_len));
      }
      m->ol_flags = 0;  // no offloads requested: checksums are computed in software
    }
    bump(ls.counters.tx_frames, rte_eth_tx_buffer(sh.port, ls.queue, ls.tx_buffer, m));
  }
}

// Frees the frames beyond this lcore's token budget (a capped node's RX queue overflowing),
// keeping the admitted ones in order at the front of `pkts`. Returns how many remain.
uint16_t apply_rate_limit(rte_mbuf** pkts, uint16_t n, LcoreState& ls) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  const uint64_t now_ns =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
  uint16_t kept = 0;
  for (uint16_t i = 0; i < n; ++i) {
    if (ls.limiter->take(now_ns)) {
      pkts[kept++] = pkts[i];
    } else {
      rte_pktmbuf_free(pkts[i]);
      bump(ls.counters.rate_limited, 1);
    }
  }
  return kept;
}

}  // namespace

void init_lcore_state(LcoreState& ls, uint16_t port, uint32_t burst) {
  const int socket = rte_lcore_to_socket_id(ls.lcore_id);
  ls.tx_buffer = static_cast<rte_eth_dev_tx_buffer*>(
      rte_zmalloc_socket("exo_tx_buffer", RTE_ETH_TX_BUFFER_SIZE(burst), 0, socket));
  if (!ls.tx_buffer) throw std::runtime_error("cannot allocate TX buffer");
  rte_eth_tx_buffer_init(ls.tx_buffer, static_cast<uint16_t>(burst));
  rte_eth_tx_buffer_set_err_callback(ls.tx_buffer, on_tx_error, &ls.counters);
  (void)port;
}

int lcore_main(void* arg) {
  const auto& sh = *static_cast<const LoopShared*>(arg);
  LcoreState& ls = sh.lcores[rte_lcore_id()];
  const uint64_t drain_tsc = (rte_get_tsc_hz() + US_PER_S - 1) / US_PER_S * kDrainUs;
  uint64_t prev_tsc = rte_rdtsc();
  std::array<rte_mbuf*, kMaxBurst> pkts;
  const uint16_t burst = static_cast<uint16_t>(std::min<uint32_t>(sh.burst, kMaxBurst));

  while (!sh.quit->load(std::memory_order_relaxed)) {
    const uint64_t now = rte_rdtsc();
    if (now - prev_tsc > drain_tsc) {
      bump(ls.counters.tx_frames, rte_eth_tx_buffer_flush(sh.port, ls.queue, ls.tx_buffer));
      prev_tsc = now;
    }
    uint16_t n = rte_eth_rx_burst(sh.port, ls.queue, pkts.data(), burst);
    if (n > 0 && ls.limiter) n = apply_rate_limit(pkts.data(), n, ls);
    if (n == 0) {
      // Emulation shares 2 cores with OVS and other nodes: back off instead of spinning. Flush
      // first so buffered replies do not wait out the sleep.
      if (sh.idle_sleep_us > 0) {
        bump(ls.counters.tx_frames, rte_eth_tx_buffer_flush(sh.port, ls.queue, ls.tx_buffer));
        rte_delay_us_sleep(sh.idle_sleep_us);
      }
      continue;
    }
    handle_burst(pkts.data(), n, ls, sh);
    // A short burst means the RX queue is drained: nothing will join these replies soon, so
    // send them now instead of holding them up to kDrainUs (the bench measured the drain timer
    // as most of a lone GET's latency). Full bursts keep batching into whole TX bursts.
    if (n < burst) bump(ls.counters.tx_frames, rte_eth_tx_buffer_flush(sh.port, ls.queue, ls.tx_buffer));
  }
  bump(ls.counters.tx_frames, rte_eth_tx_buffer_flush(sh.port, ls.queue, ls.tx_buffer));
  return 0;
}

}  // namespace exo::cache
