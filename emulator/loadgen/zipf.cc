// Generalized harmonic numbers for zipf.h: exact sums and Euler-Maclaurin.
#include "loadgen/zipf.h"

#include <algorithm>

namespace exo::loadgen {

namespace {

// Ranks below this are summed exactly inside generalized_harmonic_em; the Euler-Maclaurin
// remainder after the x^(-a-5) term is of order x^(-a-7) / 10^4 there, i.e. below 1e-25.
constexpr uint64_t kEmPrefix = 1000;

double term(uint64_t i, double alpha) { return std::pow(static_cast<double>(i), -alpha); }

// (b^(1-a) - m^(1-a)) / (1-a), the integral of x^-a over [m, b], continuous through a = 1.
double integral_power(double m, double b, double alpha) {
  const double l = std::log(b / m);
  const double t = (1.0 - alpha) * l;
  const double expm1_over_t = std::fabs(t) > 1e-8 ? std::expm1(t) / t
                                                  : 1.0 + t * 0.5 * (1.0 + t / 3.0 * (1.0 + 0.25 * t));
  return std::pow(m, 1.0 - alpha) * l * expm1_over_t;
}

}  // namespace

double generalized_harmonic_exact(uint64_t n, double alpha) {
  // Neumaier's variant of Kahan summation; smallest terms first keeps the compensation small.
  double sum = 0.0, comp = 0.0;
  for (uint64_t i = n; i >= 1; --i) {
    const double x = term(i, alpha);
    const double t = sum + x;
    comp += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  return sum + comp;
}

double generalized_harmonic_em(uint64_t n, double alpha) {
  if (n < kEmPrefix) return generalized_harmonic_exact(n, alpha);
  // sum_{i=m..n} f(i) = int_m^n f + (f(m) + f(n))/2 + sum_k B_2k/(2k)! (f^(2k-1)(n) - f^(2k-1)(m))
  // with f(x) = x^-a: f' = -a x^(-a-1), f''' = -a(a+1)(a+2) x^(-a-3), f^(5) = -a..(a+4) x^(-a-5).
  const double a = alpha;
  const double m = static_cast<double>(kEmPrefix), b = static_cast<double>(n);
  const double f_m = std::pow(m, -a), f_b = std::pow(b, -a);
  const auto d1 = [&](double x) { return -a * std::pow(x, -a - 1.0); };
  const auto d3 = [&](double x) { return -a * (a + 1) * (a + 2) * std::pow(x, -a - 3.0); };
  const auto d5 = [&](double x) {
    return -a * (a + 1) * (a + 2) * (a + 3) * (a + 4) * std::pow(x, -a - 5.0);
  };
  const double tail = integral_power(m, b, a) + 0.5 * (f_m + f_b) + (d1(b) - d1(m)) / 12.0 -
                      (d3(b) - d3(m)) / 720.0 + (d5(b) - d5(m)) / 30240.0;
  return generalized_harmonic_exact(kEmPrefix - 1, a) + tail;
}

double generalized_harmonic(uint64_t n, double alpha) {
  return n <= kExactHarmonicLimit ? generalized_harmonic_exact(n, alpha)
                                  : generalized_harmonic_em(n, alpha);
}

double zipf_pmf(uint64_t rank, uint64_t n, double alpha) {
  if (rank < 1 || rank > n) return 0.0;
  return term(rank, alpha) / generalized_harmonic(n, alpha);
}

double zipf_top_share(uint64_t k, uint64_t n, double alpha) {
  if (k == 0 || n == 0) return 0.0;
  if (k >= n) return 1.0;
  return generalized_harmonic(k, alpha) / generalized_harmonic(n, alpha);
}

}  // namespace exo::loadgen
