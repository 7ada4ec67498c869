// LogHistogram: bucket arithmetic, and percentiles within 0.4% of a sorted-vector reference.
#include "loadgen/log_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace exo::loadgen {
namespace {

// Nearest-rank percentile of a sorted sample: the ceil(q n)-th smallest (the smallest for q 0).
uint64_t reference(const std::vector<uint64_t>& sorted, double q) {
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  if (rank < 1) rank = 1;
  return sorted[rank - 1];
}

TEST(LogHistogram, BucketsCoverEveryValueNarrowly) {
  std::mt19937_64 g(5);
  std::vector<uint64_t> values;
  for (uint64_t v = 0; v < 5000; ++v) values.push_back(v);
  for (int i = 0; i < 100000; ++i) values.push_back(g() >> (g() % 64));
  for (int e = 0; e < 40; ++e) {
    values.push_back(uint64_t{1} << e);
    values.push_back((uint64_t{1} << e) - 1);
  }
  for (uint64_t v : values) {
    const uint64_t c = std::min(v, LogHistogram::kMaxValue);
    const size_t i = LogHistogram::index_of(v);
    ASSERT_LT(i, LogHistogram::kBuckets) << v;
    const uint64_t lo = LogHistogram::bucket_low(i), w = LogHistogram::bucket_width(i);
    ASSERT_LE(lo, c) << v;
    ASSERT_LT(c, lo + w) << v;
    if (c >= LogHistogram::kSub) ASSERT_LE(w * 128, lo) << v;  // at most 1/128 of the value
    else ASSERT_EQ(w, 1u) << v;
  }
  // Buckets tile the range with no gap or overlap.
  for (size_t i = 1; i < LogHistogram::kBuckets; ++i)
    ASSERT_EQ(LogHistogram::bucket_low(i), LogHistogram::bucket_low(i - 1) + LogHistogram::bucket_width(i - 1)) << i;
  EXPECT_EQ(LogHistogram::index_of(LogHistogram::kMaxValue), LogHistogram::kBuckets - 1);
}

TEST(LogHistogram, PercentilesMatchASortedReference) {
  std::mt19937_64 g(11);
  for (double sigma : {0.1, 1.0, 2.5}) {
    std::lognormal_distribution<double> latency(std::log(200'000.0), sigma);  // ~200 us median
    LogHistogram h;
    std::vector<uint64_t> sample;
    for (int i = 0; i < 200'000; ++i) {
      const auto v = static_cast<uint64_t>(std::min(latency(g), 6e10));
      sample.push_back(v);
      h.record(v);
    }
    std::sort(sample.begin(), sample.end());
    ASSERT_EQ(h.count(), sample.size());
    EXPECT_EQ(h.max(), sample.back());
    for (double q : {0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0}) {
      const double ref = static_cast<double>(reference(sample, q));
      EXPECT_NEAR(h.percentile(q), ref, ref / 256.0 + 0.5) << "sigma " << sigma << " q " << q;
    }
  }
}

TEST(LogHistogram, SmallValuesAreExact) {
  LogHistogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.record(v);
  EXPECT_EQ(h.percentile(0.5), 50.0);
  EXPECT_EQ(h.percentile(0.9), 90.0);
  EXPECT_EQ(h.percentile(0.0), 1.0);
  EXPECT_EQ(h.percentile(1.0), 100.0);
  EXPECT_EQ(LogHistogram().percentile(0.5), 0.0);
}

TEST(LogHistogram, MergeEqualsRecordingEverything) {
  LogHistogram a, b, all;
  for (uint64_t v = 1; v < 100'000'000; v = v * 3 + 7) {
    (v % 2 ? a : b).record(v);
    all.record(v);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.max(), all.max());
  for (double q : {0.1, 0.5, 0.77, 0.99, 1.0}) EXPECT_EQ(a.percentile(q), all.percentile(q)) << q;
}

TEST(LogHistogram, HugeValuesClampToTheTopBucketButMaxIsExact) {
  LogHistogram h;
  h.record(uint64_t{1} << 50);
  EXPECT_EQ(h.max(), uint64_t{1} << 50);
  EXPECT_GE(h.percentile(0.5), static_cast<double>(LogHistogram::bucket_low(LogHistogram::kBuckets - 1)));
}

}  // namespace
}  // namespace exo::loadgen
