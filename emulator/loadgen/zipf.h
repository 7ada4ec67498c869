// Zipf(alpha) over popularity ranks 1..n: P(rank = k) = k^-alpha / H(n, alpha), where
// H(n, alpha) = sum_{i=1..n} i^-alpha is the generalized harmonic number. alpha = 0 is uniform.
// The evaluation's workloads (thesis chapter 4) draw key ranks from this for n up to 10^9 keys,
// so the sampler keeps no per-rank table.
//
// ZipfSampler: rejection-inversion, W. Hörmann and G. Derflinger, "Rejection-inversion to
// generate variates from monotone discrete distributions", ACM TOMACS 6(3), 1996. The hat is the
// continuous h(x) = x^-alpha; a uniform u over the area under h on [0.5, n + 0.5] (with the
// first rank's strip shortened to exactly h(1)) is inverted through the integral of h, rounded
// to the nearest rank k, and accepted when it falls under the step of height h(k). Expected
// iterations are close to 1 for every alpha and n; memory O(1). The evaluation of H(x), H^-1(x)
// follows the numerically careful form of Apache Commons RNG's RejectionInversionZipfSampler
// ((x^(1-a) - 1)/(1-a) via expm1, its inverse via log1p), which stays exact through alpha = 1.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "loadgen/rng.h"

namespace exo::loadgen {

// ---- exact and approximate sums, for tests and for "what share does a cache of k absorb" ----

// Largest n for which generalized_harmonic() sums term by term (about 0.1 s at the limit).
inline constexpr uint64_t kExactHarmonicLimit = 10'000'000;

// sum_{i=1..n} i^-alpha by compensated (Kahan-Neumaier) summation, smallest terms first. O(n).
double generalized_harmonic_exact(uint64_t n, double alpha);

// The same by Euler-Maclaurin: an exact prefix up to 999, the integral, the end-point terms and
// three Bernoulli corrections. Relative error far below 1e-12 for alpha in [0, 3], any n. O(1).
double generalized_harmonic_em(uint64_t n, double alpha);

// Exact for n <= kExactHarmonicLimit, Euler-Maclaurin above.
double generalized_harmonic(uint64_t n, double alpha);

// P(rank) under Zipf(alpha) on 1..n; 0 outside 1..n.
double zipf_pmf(uint64_t rank, uint64_t n, double alpha);

// Share of requests that go to the k hottest ranks, H(k)/H(n): the hit ratio of a cache that
// holds exactly the k hottest keys. 0 for k = 0, 1 for k >= n.
double zipf_top_share(uint64_t k, uint64_t n, double alpha);

// ---- sampler ----

class ZipfSampler {
 public:
  // n >= 1, alpha in [0, 3] (larger alphas work numerically but nobody needs them).
  ZipfSampler(uint64_t n, double alpha) : n_(n), alpha_(alpha), one_minus_alpha_(1.0 - alpha) {
    if (n < 1) throw std::invalid_argument("ZipfSampler: n must be >= 1");
    if (!(alpha >= 0.0 && alpha <= 3.0)) throw std::invalid_argument("ZipfSampler: alpha in [0, 3]");
    // Rank 1's strip is [H(1.5) - h(1), H(1.5)], so the sampled area starts at H(1.5) - 1.
    h_integral_x1_ = h_integral(1.5) - 1.0;
    h_integral_n_ = h_integral(static_cast<double>(n) + 0.5);
    // Squeeze (Hörmann-Derflinger's constant s): if k - x <= s the point is certainly under the
    // step of rank k, which spares evaluating H(k + 0.5) on most draws.
    s_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
  }

  uint64_t n() const { return n_; }
  double alpha() const { return alpha_; }

  // One rank in 1..n. URBG: full-range 64-bit (Xoshiro256ss, std::mt19937_64).
  template <class URBG>
  uint64_t operator()(URBG& g) const {
    const double n_d = static_cast<double>(n_);
    for (;;) {
      // u in (H(1.5) - 1, H(n + 0.5)]: drawn from the top so that u never equals the left end.
      const double u = h_integral_n_ + uniform01(g) * (h_integral_x1_ - h_integral_n_);
      const double x = h_integral_inverse(u);
      // Round to the nearest rank, clamping rounding noise at both ends.
      double k_d = std::floor(x + 0.5);
      if (k_d < 1.0) k_d = 1.0;
      else if (k_d > n_d) k_d = n_d;
      if (k_d - x <= s_ || u >= h_integral(k_d + 0.5) - h(k_d)) return static_cast<uint64_t>(k_d);
    }
  }

 private:
  // h(x) = x^-alpha, the hat's density.
  double h(double x) const { return std::exp(-alpha_ * std::log(x)); }

  // H(x) = (x^(1-a) - 1) / (1-a), a primitive of h (log x at a = 1), written as
  // log(x) * expm1(t)/t with t = (1-a) log x so it is continuous and accurate around a = 1.
  double h_integral(double x) const {
    const double log_x = std::log(x);
    return expm1_over_x(one_minus_alpha_ * log_x) * log_x;
  }

  // H^-1(y) = (1 + (1-a) y)^(1/(1-a)) = exp(y * log1p(t)/t) with t = (1-a) y.
  double h_integral_inverse(double y) const {
    double t = y * one_minus_alpha_;
    if (t < -1.0) t = -1.0;  // only rounding noise can take it below; H^-1 is then ~0 -> rank 1
    return std::exp(log1p_over_x(t) * y);
  }

  // log1p(x)/x and expm1(x)/x with their limits 1 at x = 0 (Taylor terms below 1e-8, where the
  // direct quotients lose digits).
  static double log1p_over_x(double x) {
    if (std::fabs(x) > 1e-8) return std::log1p(x) / x;
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double expm1_over_x(double x) {
    if (std::fabs(x) > 1e-8) return std::expm1(x) / x;
    return 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
  }

  uint64_t n_;
  double alpha_;
  double one_minus_alpha_;
  double h_integral_x1_ = 0;
  double h_integral_n_ = 0;
  double s_ = 0;
};

}  // namespace exo::loadgen
