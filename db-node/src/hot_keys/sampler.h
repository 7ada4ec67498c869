// Which GETs feed the hot-key detector (docs/cache-fill.md, 1, "Sampling").
//
// Bernoulli(p) sampling done as geometric skips: after each sampled call, draw how many calls
// to skip before the next one (the number of failures before a success, floor(ln U / ln(1-p))).
// An unsampled call therefore costs one compare and one decrement, and the RNG runs only once
// per sampled call. One Sampler per packet thread, each with its own RNG state: no sharing,
// not thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace exo::db {

// splitmix64 (Steele, Lea, Flood 2014): tiny state, good enough for sampling decisions, and
// any seed (0 included) works.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so log() is finite.
  double unit() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

class Sampler {
 public:
  // p <= 0 never samples, p >= 1 samples every call.
  Sampler(double p, uint64_t seed) : rng_(seed), p_(p) {
    if (p_ > 0 && p_ < 1) log_q_ = std::log1p(-p_);
    skip_ = draw();  // so the first call is not always sampled
  }

  bool sample() {
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    skip_ = draw();
    return true;
  }

  double rate() const { return p_; }

 private:
  uint64_t draw() {
    if (p_ >= 1) return 0;
    if (p_ <= 0) return std::numeric_limits<uint64_t>::max();
    const double skip = std::floor(std::log(rng_.unit()) / log_q_);
    // Tiny p and an unlucky U could exceed the integer range; cap rather than overflow.
    return skip >= 1e18 ? uint64_t{1000000000000000000ULL} : static_cast<uint64_t>(skip);
  }

  SplitMix64 rng_;
  double p_;
  double log_q_ = 0;  // ln(1 - p)
  uint64_t skip_ = 0;
};

}  // namespace exo::db
