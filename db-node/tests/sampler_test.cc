#include "hot_keys/sampler.h"

#include <gtest/gtest.h>

#include <cmath>

namespace exo::db {
namespace {

uint64_t count_sampled(Sampler& s, uint64_t calls) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < calls; ++i) n += s.sample();
  return n;
}

TEST(Sampler, RateIsWithinTenPercentOfP) {
  for (double p : {1.0 / 16, 0.25, 0.5}) {
    for (uint64_t seed : {1ull, 2ull, 0xdeadbeefull}) {
      Sampler s(p, seed);
      const double got = static_cast<double>(count_sampled(s, 1'000'000)) / 1e6;
      EXPECT_NEAR(got, p, 0.1 * p) << "p=" << p << " seed=" << seed;
    }
  }
}

TEST(Sampler, GapsAreGeometricNotPeriodic) {
  // A fixed period of 16 would also have rate 1/16; a geometric skip has variance
  // (1-p)/p² = 240 around the mean gap of 16.
  Sampler s(1.0 / 16, 9);
  double sum = 0, sum2 = 0;
  uint64_t gaps = 0, gap = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    ++gap;
    if (!s.sample()) continue;
    sum += static_cast<double>(gap);
    sum2 += static_cast<double>(gap * gap);
    ++gaps;
    gap = 0;
  }
  const double mean = sum / static_cast<double>(gaps);
  const double var = sum2 / static_cast<double>(gaps) - mean * mean;
  EXPECT_NEAR(mean, 16.0, 1.6);
  EXPECT_NEAR(var, 240.0, 24.0);
}

TEST(Sampler, OneSamplesEverythingAndZeroNothing) {
  Sampler all(1.0, 5);
  EXPECT_EQ(count_sampled(all, 100000), 100000u);
  Sampler none(0.0, 5);
  EXPECT_EQ(count_sampled(none, 100000), 0u);
}

TEST(Sampler, DifferentSeedsDifferentChoices) {
  Sampler a(0.5, 1), b(0.5, 2);
  int differ = 0;
  for (int i = 0; i < 1000; ++i) differ += a.sample() != b.sample();
  EXPECT_GT(differ, 100);
}

}  // namespace
}  // namespace exo::db
