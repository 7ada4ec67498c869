// The time series of a run, in bins of `bin_ns` (1 s by default; --bin-ms makes them finer, e.g.
// 100 ms to see a sub-second recovery). Requests are booked to the bin they were SENT in
// (bin i = [start + i bin, start + (i+1) bin)): sent by the TX thread; answered, from_cache,
// not_found, errors and the latency histogram by the RX thread when the reply comes, so after
// the drain `lost = sent - answered` is final for every second. `rx` is booked by ARRIVAL
// second instead: replies received during that wall second (throughput as the client sees it).
// Every counter has one writing thread; the atomics only let the progress line read them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "loadgen/log_histogram.h"

namespace exo::loadgen {

struct SecondRow {
  double t = 0;  // bin start, seconds since the run's start
  uint64_t sent = 0, answered = 0, lost = 0, from_cache = 0, not_found = 0, errors = 0, rx = 0;
  // Latency of the second's answered requests, microseconds; empty when none was answered.
  std::optional<double> p50_us, p90_us, p99_us, p999_us;
};

class Series {
 public:
  // `bins` rows of bin_ns from start_ns; later events go to the last row.
  Series(uint64_t start_ns, uint64_t bins, uint64_t bin_ns = 1'000'000'000ULL);

  uint64_t start_ns() const { return start_ns_; }
  uint64_t second_of(uint64_t ns) const;

  // TX thread: n requests left at send_ns.
  void on_sent(uint64_t send_ns, uint64_t n);
  // RX thread: the first reply to a request sent at send_ns arrived at recv_ns.
  void on_reply(uint64_t send_ns, uint64_t recv_ns, uint8_t status, uint8_t flags);

  // Running totals, readable from any thread.
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }
  uint64_t answered() const { return answered_.load(std::memory_order_relaxed); }

  // After the TX and RX threads have finished: seconds 0 .. the last second with a send or an
  // arrival, and the latency of every answered request.
  std::vector<SecondRow> rows() const;
  LogHistogram overall() const;

 private:
  struct Second {
    std::atomic<uint64_t> sent{0}, answered{0}, from_cache{0}, not_found{0}, errors{0}, rx{0};
    std::unique_ptr<LogHistogram> latency;  // RX thread; made at the second's first answer
  };

  uint64_t start_ns_;
  uint64_t bin_ns_;
  std::unique_ptr<Second[]> seconds_;
  uint64_t n_;
  std::atomic<uint64_t> sent_{0}, answered_{0};
};

}  // namespace exo::loadgen
