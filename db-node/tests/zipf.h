// Zipf(s) key indices for the hot-key tests and benchmark: rank i (0-based) has probability
// proportional to 1/(i+1)^s. A precomputed CDF and a binary search per draw: exact, and fast
// enough for the few million draws the tests and benchmark need.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "hot_keys/sampler.h"

namespace exo::db::testing {

class Zipf {
 public:
  Zipf(size_t n, double s, uint64_t seed) : cdf_(n), rng_(seed) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) cdf_[i] = (sum += 1.0 / std::pow(static_cast<double>(i + 1), s));
    for (double& c : cdf_) c /= sum;
    cdf_.back() = 1.0;
  }
  uint32_t next() {
    const double u = rng_.unit();
    const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
    return static_cast<uint32_t>(std::min<size_t>(it - cdf_.begin(), cdf_.size() - 1));
  }

 private:
  std::vector<double> cdf_;
  SplitMix64 rng_;
};

}  // namespace exo::db::testing
