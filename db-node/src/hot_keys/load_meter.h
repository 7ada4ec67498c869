// The node's load for REPORT (docs/cache-fill.md, 1, "Load"): an EWMA of the request
// throughput (GET + PUT + DELETE per second), fed once per report interval with the running
// request total. Not thread-safe: the Reporter serializes access.
#pragma once

#include <cstdint>

namespace exo::db {

class LoadMeter {
 public:
  // alpha: the weight of the newest interval's rate, in (0, 1].
  explicit LoadMeter(double alpha) : alpha_(alpha) {}

  // `total_requests` is a running total (it only grows); `now_ms` a steady clock.
  void update(uint64_t total_requests, uint64_t now_ms) {
    if (!have_base_ || total_requests < last_total_ || now_ms < last_ms_) {
      // First call, or the counters/clock went backwards: nothing to difference against.
      have_base_ = true;
      last_total_ = total_requests;
      last_ms_ = now_ms;
      return;
    }
    if (now_ms == last_ms_) return;  // no time passed: no rate; keep the base
    const double rate = static_cast<double>(total_requests - last_total_) * 1000.0 /
                        static_cast<double>(now_ms - last_ms_);
    // The first rate initialises the average; starting from 0 would under-report the load of
    // a busy node for several intervals after a restart.
    load_ = have_load_ ? alpha_ * rate + (1 - alpha_) * load_ : rate;
    have_load_ = true;
    last_total_ = total_requests;
    last_ms_ = now_ms;
  }

  double load() const { return load_; }  // requests/s; 0 until two updates were seen

 private:
  double alpha_;
  double load_ = 0;
  bool have_base_ = false, have_load_ = false;
  uint64_t last_total_ = 0, last_ms_ = 0;
};

}  // namespace exo::db
