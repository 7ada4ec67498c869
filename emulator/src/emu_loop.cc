#include "emu_loop.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_prefetch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>

namespace exo::emu {
namespace {

constexpr uint64_t kDrainUs = 100;  // TX buffer drain period

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Hands the buffered replies to the NIC: each one the queue takes counts as served for its
// node, each one it refuses (after one retry) as a tx_error, and is freed.
void flush(EmuLane& ln, const EmuShared& sh) {
  uint16_t done = 0;
  for (int attempt = 0; attempt < 2 && done < ln.ntx; ++attempt)
    done += rte_eth_tx_burst(sh.port, ln.queue, ln.tx + done, static_cast<uint16_t>(ln.ntx - done));
  for (uint16_t i = 0; i < ln.ntx; ++i) sh.emu->sent(ln.queue, ln.tx_node[i], i < done);
  if (done < ln.ntx) rte_pktmbuf_free_bulk(ln.tx + done, ln.ntx - done);
  ln.ntx = 0;
}

void handle_burst(rte_mbuf** pkts, uint16_t n, EmuLane& ln, const EmuShared& sh) {
  const uint64_t t = now_ns();
  const std::span<uint8_t> out(ln.scratch.data(), ln.scratch.size());
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
    rte_mbuf* m = pkts[i];
    // Single segment only (the data room fits 14 + mtu); a chained mbuf holds a larger frame:
    // its first segment is enough to route it, and it is then dropped as malformed.
    const bool chained = m->nb_segs != 1;
    const std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*),
                                         rte_pktmbuf_data_len(m));
    const Emulator::Result r = sh.emu->handle(ln.queue, frame, chained, out, t);
    if (r.kind != Emulator::Result::kReply) {
      rte_pktmbuf_free(m);
      continue;
    }
    // The reply replaces the request in the same mbuf (its data room holds 14 + mtu bytes, the
    // handler's cap), so no allocation: reset the data to the headroom and copy it in.
    rte_pktmbuf_reset(m);
    char* dst = rte_pktmbuf_append(m, static_cast<uint16_t>(r.len));
    if (!dst) {  // cannot happen with our pool; count it as a reply not sent
      sh.emu->sent(ln.queue, r.node, false);
      rte_pktmbuf_free(m);
      continue;
    }
    std::memcpy(dst, ln.scratch.data(), r.len);
    ln.tx[ln.ntx] = m;
    ln.tx_node[ln.ntx] = r.node;
    ++ln.ntx;
  }
  if (ln.ntx >= sh.burst) flush(ln, sh);
}

}  // namespace

int emu_lcore_main(void* arg) {
  const auto& sh = *static_cast<const EmuShared*>(arg);
  EmuLane& ln = sh.lanes[rte_lcore_id()];
  const uint64_t drain_tsc = (rte_get_tsc_hz() + US_PER_S - 1) / US_PER_S * kDrainUs;
  uint64_t prev_tsc = rte_rdtsc();
  std::array<rte_mbuf*, kMaxBurst> pkts;
  const uint16_t burst = static_cast<uint16_t>(std::clamp<uint32_t>(sh.burst, 1, kMaxBurst));

  while (!sh.quit->load(std::memory_order_relaxed)) {
    const uint64_t now = rte_rdtsc();
    if (now - prev_tsc > drain_tsc) {
      if (ln.ntx > 0) flush(ln, sh);
      prev_tsc = now;
    }
    const uint16_t n = rte_eth_rx_burst(sh.port, ln.queue, pkts.data(), burst);
    if (n == 0) {
      // Emulation shares 2 cores with OVS, the cache node and the clients: back off instead of
      // spinning, after sending what is buffered so replies do not wait out the sleep.
      if (sh.idle_sleep_us > 0) {
        if (ln.ntx > 0) flush(ln, sh);
        rte_delay_us_sleep(sh.idle_sleep_us);
      }
      continue;
    }
    handle_burst(pkts.data(), n, ln, sh);
  }
  if (ln.ntx > 0) flush(ln, sh);
  return 0;
}

}  // namespace exo::emu
