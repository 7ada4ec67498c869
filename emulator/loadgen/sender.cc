#include "loadgen/sender.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "loadgen/clock.h"
#include "loadgen/token_bucket.h"

namespace exo::loadgen {

Sender::Sender(const SenderConfig& cfg, const RequestWriter& builder, FrameSink& sink,
               SendRing& ring, Series& series)
    : cfg_(cfg), builder_(builder), sink_(sink), ring_(ring), series_(series),
      zipf_(cfg.keys, cfg.alpha), swap_(cfg.keys, cfg.swap_count, cfg.swap_every_ns),
      rng_(cfg.seed) {
  if (!(cfg.rate > 0.0) || cfg.batch < 1) throw std::invalid_argument("Sender: rate and batch");
  const size_t stride = builder.max_frame_len();
  buf_.resize(stride * cfg.batch);
  iov_.resize(cfg.batch);
  msgs_.resize(cfg.batch);
  for (unsigned i = 0; i < cfg.batch; ++i) {
    iov_[i].iov_base = buf_.data() + i * stride;
    std::memset(&msgs_[i], 0, sizeof msgs_[i]);
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
  }
}

void Sender::send_batch(unsigned n, uint64_t now, TxStats& st) {
  const uint64_t swaps = swap_.swaps_at(now - series_.start_ns());
  for (unsigned i = 0; i < n; ++i) {
    const bool put = cfg_.get_ratio < 1.0 && uniform01(rng_) >= cfg_.get_ratio;
    const uint64_t id = swap_.key_for_rank(zipf_(rng_), swaps);
    iov_[i].iov_len = builder_.write(static_cast<uint8_t*>(iov_[i].iov_base), put, id, seq_ + i);
  }
  // Book the send times before the frames leave, so even an instant reply finds its slot.
  const uint64_t t = mono_ns();
  for (unsigned i = 0; i < n; ++i) ring_.on_send(seq_ + i, t);
  unsigned done = 0;
  while (done < n) {
    const int r = sink_.send(std::span<mmsghdr>(msgs_.data() + done, n - done));
    if (r > 0) {
      series_.on_sent(t, static_cast<uint64_t>(r));
      st.sent += static_cast<uint64_t>(r);
      done += static_cast<unsigned>(r);
      continue;
    }
    // The first remaining frame was refused (ENOBUFS, interface down, ...): drop it, go on.
    if (st.tx_errors++ == 0) st.first_error = std::string("send: ") + std::strerror(-r);
    ring_.cancel(seq_ + done);
    ++done;
  }
  seq_ += n;
  ++st.batches;
}

TxStats Sender::run(const std::atomic<bool>& stop,
                    const std::function<void(uint64_t)>& each_second) {
  TxStats st;
  const uint64_t start = series_.start_ns();
  const uint64_t end = start + cfg_.duration_ns;
  const double burst = std::max<double>(cfg_.batch, std::ceil(cfg_.rate * cfg_.catch_up_s));
  TokenBucket bucket(cfg_.rate, burst, start);
  bucket.take(start, burst);  // start empty: no burst at t = 0
  uint64_t tick = 0, next_tick = start + kNsPerSec;
  uint64_t now = mono_ns();
  while (!stop.load(std::memory_order_relaxed)) {
    now = mono_ns();
    for (; now >= next_tick; next_tick += kNsPerSec) each_second(tick++);
    if (now >= end) break;
    const auto avail = static_cast<uint64_t>(std::max(0.0, std::floor(bucket.available(now))));
    const unsigned n = static_cast<unsigned>(std::min<uint64_t>(avail, cfg_.batch));
    if (n < cfg_.batch) {
      const uint64_t ready = bucket.next_ready_ns(now, cfg_.batch);
      // Wait for a whole batch, unless the run ends first: then send what there is.
      if (ready < end || n == 0) {
        const uint64_t wake = std::min({ready, end, next_tick});
        if (wake > now) {
          ++st.sleeps;
          sleep_until_ns(wake);  // EINTR: a signal; the loop re-checks `stop`
          continue;
        }
      }
    }
    if (n == 0) continue;
    if (!bucket.take(now, n)) continue;  // cannot happen: `available` said so
    send_batch(n, now, st);
  }
  st.send_elapsed_ns = std::min(now, end) - start;
  return st;
}

}  // namespace exo::loadgen
