// Token bucket on a caller-supplied nanosecond clock: `rate` tokens per second accrue up to
// `burst`; take() spends them. No sleeping and no clock reads inside, so the same code paces the
// load generator's open loop (ask next_ready_ns(), spin or sleep outside) and limits an emulated
// node's request rate, and tests drive it with a fake clock.
//
// Why not the textbook "tokens += elapsed * rate; tokens = min(tokens, burst)" per call: adding
// many small float increments drifts, so over a long run a bucket could grant a token more (or
// less) than rate * T + burst. Here the state is an anchor time at which the bucket was full plus
// the tokens spent since, and available tokens are recomputed as
//   burst + (now - anchor) * rate / 1e9 - spent
// with one rounding per call; for integral rates and ns clocks this is exact, so over any window
// of T seconds starting full at most rate * T + burst tokens are ever granted.
//
// Not thread-safe: one bucket per sender thread or per emulated node.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace exo {

class TokenBucket {
 public:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

  // Starts full at start_ns. rate >= 0 tokens/s; burst >= 0 tokens (a take of more than burst
  // never succeeds).
  TokenBucket(double rate_per_s, double burst, uint64_t start_ns = 0)
      : rate_(rate_per_s), burst_(burst), anchor_ns_(start_ns) {
    if (!(rate_per_s >= 0.0) || !(burst >= 0.0))
      throw std::invalid_argument("TokenBucket: rate and burst must be >= 0");
  }

  double rate() const { return rate_; }
  double burst() const { return burst_; }

  // Tokens available at now_ns (a clock that runs backwards is treated as standing still).
  double available(uint64_t now_ns) {
    settle(now_ns);
    return tokens_at(now_ns);
  }

  // Spends n tokens if that many are available at now_ns.
  bool take(uint64_t now_ns, double n = 1.0) {
    settle(now_ns);
    if (tokens_at(now_ns) < n) return false;
    spent_ += n;
    return true;
  }

  // Earliest time >= now_ns at which take(t, n) would succeed if nothing else is taken;
  // kNever if n > burst or the rate is 0 and there are too few tokens.
  uint64_t next_ready_ns(uint64_t now_ns, double n = 1.0) {
    settle(now_ns);
    const uint64_t now = now_ns < anchor_ns_ ? anchor_ns_ : now_ns;
    const double deficit = n - tokens_at(now);
    if (deficit <= 0.0) return now;
    if (n > burst_ || rate_ <= 0.0) return kNever;
    const double wait = std::ceil(deficit * 1e9 / rate_);
    if (wait >= static_cast<double>(kNever - now)) return kNever;
    uint64_t t = now + static_cast<uint64_t>(wait);
    // The float estimate may be a nanosecond off either way; settle it against tokens_at itself
    // so that take(next_ready_ns()) is guaranteed to succeed and nothing earlier would.
    while (tokens_at(t) < n) ++t;
    while (t > now && tokens_at(t - 1) >= n) --t;
    return t;
  }

 private:
  double tokens_at(uint64_t now_ns) const {
    const uint64_t elapsed = now_ns > anchor_ns_ ? now_ns - anchor_ns_ : 0;
    return burst_ + static_cast<double>(elapsed) * rate_ / 1e9 - spent_;
  }

  // Re-anchors when the bucket has overflowed (tokens beyond burst are lost, as in any bucket)
  // and moves the anchor forward by whole seconds so elapsed * rate stays small and exact.
  void settle(uint64_t now_ns) {
    if (now_ns <= anchor_ns_) return;
    if (tokens_at(now_ns) >= burst_) {
      anchor_ns_ = now_ns;
      spent_ = 0.0;
      return;
    }
    const uint64_t whole_s = (now_ns - anchor_ns_) / 1'000'000'000ULL;
    if (whole_s > 0) {
      anchor_ns_ += whole_s * 1'000'000'000ULL;
      spent_ -= static_cast<double>(whole_s) * rate_;
    }
  }

  double rate_;
  double burst_;
  uint64_t anchor_ns_;
  double spent_ = 0.0;  // tokens taken since the anchor, minus whole seconds' accrual moved out
};

}  // namespace exo
