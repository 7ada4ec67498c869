// ZipfSampler against the exact pmf; generalized harmonic numbers and top shares.
#include "loadgen/zipf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace exo::loadgen {
namespace {

struct Fit {
  // Pearson's chi-square over the ranks expected >= 5 times plus one pooled bin for the rest
  // (the usual validity condition; at alpha 3 the tail ranks expect 0.01 hits each).
  double chi2 = 0;
  int df = -1;  // bins - 1
  double tvd = 0;
  // Largest relative error on those of ranks 1..10 expected >= 25,000 times (where 2% is over
  // 3 standard deviations; at alpha 0 each rank expects only 2000, i.e. 2.2% noise).
  double max_top10_rel_err = 0;
  double max_z = 0;  // largest |observed - expected| / sqrt(expected) over the chi-square bins
};

Fit fit(uint64_t n, double alpha, uint64_t samples, uint64_t seed) {
  const ZipfSampler zipf(n, alpha);
  Xoshiro256ss rng(seed);
  std::vector<uint64_t> counts(n + 1, 0);
  for (uint64_t i = 0; i < samples; ++i) {
    const uint64_t k = zipf(rng);
    EXPECT_GE(k, 1u);
    EXPECT_LE(k, n);
    if (k >= 1 && k <= n) ++counts[k];
  }
  const double h = generalized_harmonic_exact(n, alpha);
  Fit f;
  const auto add_bin = [&f](double observed, double expected) {
    const double diff = observed - expected;
    f.chi2 += diff * diff / expected;
    f.max_z = std::max(f.max_z, std::fabs(diff) / std::sqrt(expected));
    ++f.df;
  };
  double pooled_observed = 0, pooled_expected = 0;
  for (uint64_t k = 1; k <= n; ++k) {
    const double p = std::pow(static_cast<double>(k), -alpha) / h;
    const double expected = p * static_cast<double>(samples);
    const double observed = static_cast<double>(counts[k]);
    const double diff = observed - expected;
    f.tvd += std::fabs(diff) / (2.0 * static_cast<double>(samples));
    if (k <= 10 && expected >= 25'000)
      f.max_top10_rel_err = std::max(f.max_top10_rel_err, std::fabs(diff) / expected);
    if (expected >= 5) {
      add_bin(observed, expected);
    } else {
      pooled_observed += observed;
      pooled_expected += expected;
    }
  }
  if (pooled_expected > 0) add_bin(pooled_observed, pooled_expected);
  return f;
}

class ZipfFit : public ::testing::TestWithParam<double> {};

// 2e6 samples over 1000 ranks. Chi-square with df degrees of freedom has mean df and standard
// deviation sqrt(2 df); df + 6 sd is a p-value near 1e-7, so a correct sampler does not fail by
// luck while a wrong shape (off by even 1% on the top ranks) lands in the thousands.
double chi2_limit(int df) { return df + 6 * std::sqrt(2.0 * df); }

TEST_P(ZipfFit, MatchesPmfOnThousandRanks) {
  const double alpha = GetParam();
  const Fit f = fit(1000, alpha, 2'000'000, 12345);
  EXPECT_LT(f.chi2, chi2_limit(f.df)) << "alpha " << alpha << " df " << f.df;
  EXPECT_LT(f.max_z, 5.5) << "alpha " << alpha;
  // Total variation: sampling noise alone gives ~0.009 for uniform over 1000 ranks at 2e6
  // samples (sum of |N(0, sqrt(2000))| / 4e6), less for skewed alphas, so bound it a bit above.
  EXPECT_LT(f.tvd, alpha == 0.0 ? 0.0105 : 0.01) << "alpha " << alpha;
  if (alpha == 0.99) {
    EXPECT_GT(f.df, 990);  // (all thousand ranks are their own bin here)
  }
  EXPECT_LT(f.max_top10_rel_err, 0.02) << "alpha " << alpha;
}

INSTANTIATE_TEST_SUITE_P(Alphas, ZipfFit, ::testing::Values(0.0, 0.5, 0.99, 1.0, 1.2, 3.0));

TEST(Zipf, AlphaJustAroundOneIsContinuous) {
  // The expm1/log1p forms must not blow up for 1 - alpha ~ 1e-12.
  for (double alpha : {1.0 - 1e-12, 1.0 + 1e-12}) {
    const Fit f = fit(1000, alpha, 500'000, 7);
    EXPECT_LT(f.chi2, chi2_limit(f.df)) << "alpha " << alpha << " df " << f.df;
  }
}

TEST(Zipf, TinyDomains) {
  Xoshiro256ss rng(1);
  const ZipfSampler one(1, 0.99);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(one(rng), 1u);
  const ZipfSampler two(2, 1.0);  // P(1) = 2/3
  uint64_t ones = 0;
  for (int i = 0; i < 300'000; ++i) ones += two(rng) == 1;
  EXPECT_NEAR(ones / 300'000.0, 2.0 / 3.0, 0.005);
}

TEST(Zipf, RejectsBadParameters) {
  EXPECT_THROW(ZipfSampler(0, 1.0), std::invalid_argument);
  EXPECT_THROW(ZipfSampler(10, -0.1), std::invalid_argument);
  EXPECT_THROW(ZipfSampler(10, 3.5), std::invalid_argument);
  EXPECT_THROW(ZipfSampler(10, std::nan("")), std::invalid_argument);
}

TEST(Zipf, BillionKeysInRangeAndTopRankFrequency) {
  const uint64_t n = 1'000'000'000;
  const ZipfSampler zipf(n, 0.99);
  Xoshiro256ss rng(99);
  const uint64_t samples = 2'000'000;
  uint64_t top = 0, bad = 0, beyond_million = 0;
  for (uint64_t i = 0; i < samples; ++i) {
    const uint64_t k = zipf(rng);
    bad += k < 1 || k > n;
    top += k == 1;
    beyond_million += k > 1'000'000;
  }
  EXPECT_EQ(bad, 0u);
  const double p1 = zipf_pmf(1, n, 0.99);
  EXPECT_NEAR(static_cast<double>(top) / samples, p1, 0.05 * p1);
  // The deep tail must be reached too: share of ranks beyond 10^6 is 1 - top_share(10^6).
  const double tail = 1.0 - zipf_top_share(1'000'000, n, 0.99);
  EXPECT_NEAR(static_cast<double>(beyond_million) / samples, tail, 0.02 * tail);
}

TEST(Zipf, DeterministicForASeed) {
  const ZipfSampler zipf(1'000'000, 0.99);
  Xoshiro256ss a(42), b(42), c(43);
  std::vector<uint64_t> xa, xb, xc;
  for (int i = 0; i < 1000; ++i) {
    xa.push_back(zipf(a));
    xb.push_back(zipf(b));
    xc.push_back(zipf(c));
  }
  EXPECT_EQ(xa, xb);
  EXPECT_NE(xa, xc);
}

TEST(Zipf, WorksWithStdMt19937_64) {
  const ZipfSampler zipf(1000, 0.99);
  std::mt19937_64 g(5);
  uint64_t ones = 0;
  for (int i = 0; i < 200'000; ++i) ones += zipf(g) == 1;
  const double p1 = zipf_pmf(1, 1000, 0.99);
  EXPECT_NEAR(ones / 200'000.0, p1, 0.05 * p1);
}

TEST(ZipfPmf, SumsToOneAndKnownValues) {
  double sum = 0;
  for (uint64_t k = 1; k <= 1000; ++k) sum += zipf_pmf(k, 1000, 0.99);
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(zipf_pmf(7, 10, 0.0), 0.1);
  EXPECT_NEAR(zipf_pmf(1, 2, 1.0), 2.0 / 3.0, 1e-15);
  EXPECT_EQ(zipf_pmf(0, 10, 1.0), 0.0);
  EXPECT_EQ(zipf_pmf(11, 10, 1.0), 0.0);
}

TEST(Harmonic, EulerMaclaurinMatchesExactSums) {
  for (double alpha : {0.0, 0.5, 0.99, 1.0, 1.0 + 1e-10, 1.2, 2.0, 3.0}) {
    for (uint64_t n : {999ull, 1000ull, 1001ull, 54321ull, 1'000'000ull, 10'000'000ull}) {
      const double exact = generalized_harmonic_exact(n, alpha);
      EXPECT_NEAR(generalized_harmonic_em(n, alpha), exact, 1e-12 * exact)
          << "n " << n << " alpha " << alpha;
    }
  }
  // Known closed forms: H(n, 0) = n; H(inf, 2) = pi^2/6 and H(n, 2) ~ pi^2/6 - 1/n.
  EXPECT_DOUBLE_EQ(generalized_harmonic_em(1'000'000'000ull, 0.0), 1e9);
  EXPECT_NEAR(generalized_harmonic_em(1'000'000'000ull, 2.0), M_PI * M_PI / 6 - 1e-9, 1e-15);
}

TEST(TopShare, ExactOnAHundredThousandKeys) {
  const uint64_t n = 100'000;
  for (double alpha : {0.0, 0.5, 0.99, 1.0, 1.2}) {
    // Reference: a plain running sum, independent of the library's summation.
    std::vector<double> prefix(n + 1, 0.0);
    for (uint64_t i = 1; i <= n; ++i) prefix[i] = prefix[i - 1] + std::pow(double(i), -alpha);
    for (uint64_t k : {1ull, 10ull, 100ull, 1000ull, 12345ull, 99'999ull}) {
      EXPECT_NEAR(zipf_top_share(k, n, alpha), prefix[k] / prefix[n], 1e-6)
          << "k " << k << " alpha " << alpha;
    }
  }
  EXPECT_EQ(zipf_top_share(0, n, 0.99), 0.0);
  EXPECT_EQ(zipf_top_share(n, n, 0.99), 1.0);
  EXPECT_EQ(zipf_top_share(2 * n, n, 0.99), 1.0);
}

TEST(TopShare, ApproximationAtAHundredMillionKeys) {
  // One slow exact pass over 10^8 terms (about a second), checkpointed at the k's we ask about;
  // n = 10^8 and k = 2 * 10^7 are above kExactHarmonicLimit, so this checks Euler-Maclaurin.
  const uint64_t n = 100'000'000;
  const double alpha = 0.99;
  const std::vector<uint64_t> ks = {1'000, 100'000, 10'000'000, 20'000'000};
  std::vector<double> at_k;
  double sum = 0.0, comp = 0.0;
  for (uint64_t i = 1, next = 0; i <= n; ++i) {
    const double x = std::pow(static_cast<double>(i), -alpha);
    const double t = sum + x;
    comp += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
    if (next < ks.size() && i == ks[next]) {
      at_k.push_back(sum + comp);
      ++next;
    }
  }
  const double h_n = sum + comp;
  EXPECT_NEAR(generalized_harmonic(n, alpha), h_n, 1e-12 * h_n);
  for (size_t i = 0; i < ks.size(); ++i)
    EXPECT_NEAR(zipf_top_share(ks[i], n, alpha), at_k[i] / h_n, 1e-10) << "k " << ks[i];
}

}  // namespace
}  // namespace exo::loadgen
