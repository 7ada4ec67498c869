// HitRates: EWMA of hits/s per held key, seeded at admission, forgetting dropped keys.
#include <gtest/gtest.h>

#include <cmath>

#include "fill/hit_rates.h"

namespace {

using exo::cache::HitRates;

TEST(HitRates, EwmaOfHitsPerSecond) {
  HitRates r(0.5);
  r.sample({{"a", 0}}, 1000);  // first sight: a baseline only
  EXPECT_EQ(r.rate("a"), 0);
  r.sample({{"a", 100}}, 2000);  // 100/s: 0.5*100 + 0.5*0
  EXPECT_DOUBLE_EQ(r.rate("a"), 50);
  r.sample({{"a", 150}}, 2500);  // 50 hits in 0.5 s = 100/s, weighted 1-(1-0.5)^0.5
  const double a = 1 - std::sqrt(0.5);
  EXPECT_DOUBLE_EQ(r.rate("a"), a * 100 + (1 - a) * 50);
  const double before = r.rate("a");
  r.sample({{"a", 150}}, 3500);  // no hits for one second
  EXPECT_DOUBLE_EQ(r.rate("a"), 0.5 * before);
}

TEST(HitRates, AdmittedKeyStartsAtItsReportedRate) {
  HitRates r(0.3);
  r.admitted("n", 200, 1000);
  EXPECT_DOUBLE_EQ(r.rate("n"), 200);
  r.sample({{"n", 10}}, 1100);  // 10 hits in 100 ms = 100/s, counted from the insert
  const double a = 1 - std::pow(0.7, 0.1);
  EXPECT_DOUBLE_EQ(r.rate("n"), a * 100 + (1 - a) * 200);
}

TEST(HitRates, ForgetsKeysNoLongerHeld) {
  HitRates r(0.5);
  r.admitted("a", 10, 0);
  r.admitted("b", 20, 0);
  r.sample({{"b", 0}}, 100);
  EXPECT_EQ(r.rate("a"), 0);
  EXPECT_EQ(r.size(), 1u);
  // Back again (re-inserted): a new baseline, not the old rate.
  r.sample({{"a", 7}, {"b", 0}}, 200);
  EXPECT_EQ(r.rate("a"), 0);
}

TEST(HitRates, CounterResetAndNoElapsedTime) {
  HitRates r(1.0);
  r.sample({{"a", 500}}, 0);
  r.sample({{"a", 600}}, 1000);
  EXPECT_DOUBLE_EQ(r.rate("a"), 100);
  r.sample({{"a", 700}}, 1000);  // same instant: no measurement
  EXPECT_DOUBLE_EQ(r.rate("a"), 100);
  r.sample({{"a", 700}}, 2000);  // 100 hits since the last measurement at t=1000 (600 -> 700)
  EXPECT_DOUBLE_EQ(r.rate("a"), 100);
  r.sample({{"a", 30}}, 3000);  // erased and re-inserted: counts from 0
  EXPECT_DOUBLE_EQ(r.rate("a"), 30);
}

TEST(HitRates, TimeConstantDoesNotDependOnTheRoundLength) {
  // Ten 100 ms rounds of silence decay a rate exactly as much as one 1 s round.
  HitRates fine(0.5), coarse(0.5);
  fine.admitted("k", 100, 0);
  coarse.admitted("k", 100, 0);
  for (uint64_t t = 100; t <= 1000; t += 100) fine.sample({{"k", 0}}, t);
  coarse.sample({{"k", 0}}, 1000);
  EXPECT_NEAR(fine.rate("k"), 50, 1e-9);
  EXPECT_NEAR(coarse.rate("k"), 50, 1e-9);
}

TEST(HitRates, ClearForgetsEveryKey) {
  HitRates r(0.5, 1);
  r.admitted("a", 10, 0);
  r.sample({{"a", 50}, {"b", 3}}, 100);
  r.clear();
  EXPECT_EQ(r.size(), 0u);
  EXPECT_EQ(r.rate("a"), 0);
  r.sample({{"a", 0}}, 200);  // seen again: a fresh baseline at `initial`
  EXPECT_EQ(r.rate("a"), 1);
}

}  // namespace
