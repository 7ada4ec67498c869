// TokenBucket on a fake nanosecond clock: never more than rate * T + burst over T.
#include "loadgen/token_bucket.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace exo::loadgen {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

// Greedy taker polling every `step` ns for `duration` ns: how many tokens it got.
uint64_t drain(TokenBucket& bucket, uint64_t start, uint64_t duration, uint64_t step) {
  uint64_t got = 0;
  for (uint64_t t = start; t <= start + duration; t += step)
    while (bucket.take(t)) ++got;
  return got;
}

TEST(TokenBucket, GrantsExactlyRateTimesTPlusBurst) {
  struct Case { double rate, burst; uint64_t step; };
  for (const Case c : {Case{1000, 10, 333}, Case{1'000'000, 32, 997},
                       Case{3, 1, 7'777'777}, Case{7, 1.5, 1'000'000}, Case{12345, 100, 100'003}}) {
    TokenBucket bucket(c.rate, c.burst, 5 * kSecond);
    const uint64_t t_ns = 3 * kSecond;
    const uint64_t got = drain(bucket, 5 * kSecond, t_ns, c.step);
    // Polling at step granularity can miss at most the tokens accruing after the last poll.
    const double max = c.rate * 3 + c.burst;
    const uint64_t last_poll = (t_ns / c.step) * c.step;
    const double min = c.rate * double(last_poll) / 1e9 + c.burst - 1;
    EXPECT_LE(got, static_cast<uint64_t>(max)) << c.rate << "/s every " << c.step << " ns";
    EXPECT_GE(double(got), std::floor(min)) << c.rate << "/s every " << c.step << " ns";
  }
}

TEST(TokenBucket, PollingEveryNanosecondIsExact) {
  // 1000/s, burst 10, T = 0.2 s polled at every ns: exactly 210 (the 200th accrued token arrives
  // at t = T exactly, which is still inside [0, T]).
  TokenBucket bucket(1000, 10, 0);
  EXPECT_EQ(drain(bucket, 0, kSecond / 5, 1), 210u);
}

TEST(TokenBucket, NeverMoreThanBurstAfterIdling) {
  TokenBucket bucket(1000, 5, 0);
  EXPECT_EQ(drain(bucket, 100 * kSecond, 0, 1), 5u);  // 100 s idle: still only burst
  EXPECT_FALSE(bucket.take(100 * kSecond));
  EXPECT_TRUE(bucket.take(100 * kSecond + 1'000'000));  // one token per ms
  EXPECT_FALSE(bucket.take(100 * kSecond + 1'000'000));
}

TEST(TokenBucket, LongRunStaysExact) {
  // An hour at 10^6/s, greedily drained every 10 ms (10^4 tokens a poll, under the burst so none
  // overflow): re-anchoring by whole seconds keeps the accounting exact, so exactly
  // rate * T + burst.
  TokenBucket bucket(1'000'000, 20'000, 0);
  uint64_t got = 0;
  const uint64_t hour = 3600 * kSecond;
  for (uint64_t t = 0; t <= hour; t += 10'000'000) {
    const double n = std::floor(bucket.available(t));
    if (n > 0 && bucket.take(t, n)) got += static_cast<uint64_t>(n);
  }
  EXPECT_EQ(got, 3'600'000'000ull + 20'000);
}

TEST(TokenBucket, NextReadyIsTheEarliestSuccessfulTake) {
  TokenBucket bucket(3, 2, 0);  // a token every 333,333,333.3 ns
  ASSERT_TRUE(bucket.take(0, 2));
  uint64_t now = 0;
  for (int i = 0; i < 50; ++i) {
    const uint64_t ready = bucket.next_ready_ns(now);
    ASSERT_NE(ready, TokenBucket::kNever);
    EXPECT_FALSE(bucket.take(ready - 1)) << i;
    EXPECT_TRUE(bucket.take(ready)) << i;
    now = ready;
  }
  // 50 tokens at 3/s after an empty start: the 50th is ready at ceil(50 / 3 s).
  EXPECT_EQ(now, 16'666'666'667ull);
  EXPECT_EQ(bucket.next_ready_ns(now, 3), TokenBucket::kNever);  // more than burst
  EXPECT_EQ(TokenBucket(0, 1, 0).next_ready_ns(0), 0u);           // the initial token
  TokenBucket stopped(0, 1, 0);
  ASSERT_TRUE(stopped.take(0));
  EXPECT_EQ(stopped.next_ready_ns(10), TokenBucket::kNever);
}

TEST(TokenBucket, ClockGoingBackwardsGrantsNothingExtra) {
  TokenBucket bucket(1000, 1, kSecond);
  EXPECT_TRUE(bucket.take(kSecond));
  EXPECT_FALSE(bucket.take(kSecond - 500'000'000));
  EXPECT_FALSE(bucket.take(kSecond + 999'999));
  EXPECT_TRUE(bucket.take(kSecond + 1'000'000));
}

TEST(TokenBucket, FractionalTakes) {
  TokenBucket bucket(10, 1, 0);
  EXPECT_TRUE(bucket.take(0, 0.25));
  EXPECT_TRUE(bucket.take(0, 0.75));
  EXPECT_FALSE(bucket.take(0, 0.25));
  EXPECT_EQ(bucket.next_ready_ns(0, 0.5), 50'000'000u);
}

TEST(TokenBucket, RejectsNegativeParameters) {
  EXPECT_THROW(TokenBucket(-1, 1), std::invalid_argument);
  EXPECT_THROW(TokenBucket(1, -1), std::invalid_argument);
}

}  // namespace
}  // namespace exo::loadgen
