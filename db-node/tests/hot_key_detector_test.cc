// The segmented detector with a fake clock: rates checked against hand computations of
//   rate = Σ w_i·count_i/(p·len_i) / Σ w_i   (docs/cache-fill.md, 1).
#include "hot_keys/hot_key_detector.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

namespace exo::db {
namespace {

HotKeysConfig three_segments() {
  HotKeysConfig c;
  c.top_k = 10;
  c.sample_rate = 0.5;
  c.confidence_z = 0;  // exact figures; the bound has its own test
  c.segment_ms = 1000;
  c.segments = 3;
  c.weights = {4, 2, 1};
  return c;
}

void observe_n(HotKeyDetector& d, const std::string& key, int n, uint64_t now) {
  for (int i = 0; i < n; ++i) d.observe(key, now);
}

std::map<std::string, double> as_map(const std::vector<KeyRate>& v) {
  std::map<std::string, double> m;
  for (const auto& kr : v) m[kr.key] = kr.rate;
  return m;
}

// Segments [10000,11000) a×10 b×5, [11000,12000) a×4 c×8, current [12000,..) a×2; d must
// have started at 10000.
void fill(HotKeyDetector& d) {
  observe_n(d, "a", 10, 10100);
  observe_n(d, "b", 5, 10900);
  observe_n(d, "a", 4, 11000);
  observe_n(d, "c", 8, 11999);
  observe_n(d, "a", 2, 12200);
}

TEST(HotKeyDetector, WeightedMergeMatchesTheHandComputation) {
  HotKeyDetector d(three_segments(), 10000);
  fill(d);
  // At 12500 the current segment is half full: weight 4·0.5 = 2, len 0.5 s. p = 0.5.
  //   a: (2·2/(0.5·0.5) + 2·4/(0.5·1) + 1·10/(0.5·1)) / (2+2+1) = (16+16+20)/5 = 10.4
  //   c: (0 + 2·8/0.5 + 0) / 5 = 6.4
  //   b: (0 + 0 + 1·5/0.5) / 5 = 2
  const auto hot = d.hottest(10, 12500);
  ASSERT_EQ(hot.size(), 3u);
  EXPECT_EQ(hot[0].key, "a");
  EXPECT_DOUBLE_EQ(hot[0].rate, 10.4);
  EXPECT_EQ(hot[1].key, "c");
  EXPECT_DOUBLE_EQ(hot[1].rate, 6.4);
  EXPECT_EQ(hot[2].key, "b");
  EXPECT_DOUBLE_EQ(hot[2].rate, 2.0);
  EXPECT_EQ(d.sampled(12500), 29u);

  const auto top1 = d.hottest(1, 12500);
  ASSERT_EQ(top1.size(), 1u);
  EXPECT_EQ(top1[0].key, "a");
  EXPECT_TRUE(d.hottest(0, 12500).empty());
}

TEST(HotKeyDetector, SegmentsBeforeStartAreLeftOut) {
  HotKeyDetector d(three_segments(), 10000);
  observe_n(d, "a", 5, 10100);
  // Only the current segment exists: (2·5/(0.5·0.5)) / 2 = 20. Counting the two segments the
  // node never had (weights 2 and 1) would give 40/5 = 8.
  auto hot = d.hottest(10, 10500);
  ASSERT_EQ(hot.size(), 1u);
  EXPECT_DOUBLE_EQ(hot[0].rate, 20.0);
  // One full segment behind us, the current one half full and empty: (0 + 2·5/0.5) / (2+2) = 5.
  hot = d.hottest(10, 11500);
  ASSERT_EQ(hot.size(), 1u);
  EXPECT_DOUBLE_EQ(hot[0].rate, 5.0);
}

TEST(HotKeyDetector, NothingAtTheFirstInstant) {
  HotKeyDetector d(three_segments(), 10000);
  observe_n(d, "a", 5, 10000);
  // Elapsed 0 in the only segment: no weight, no rate (rather than a division by zero).
  EXPECT_TRUE(d.hottest(10, 10000).empty());
  EXPECT_EQ(d.sampled(10000), 5u);
}

TEST(HotKeyDetector, RotationDropsTheOldestSegment) {
  HotKeyDetector d(three_segments(), 10000);
  fill(d);
  // At 13500 the [10000,11000) segment (the only one with b) has left the ring:
  //   a: (0 + 2·2/0.5 + 1·4/0.5) / (2+2+1) = 16/5,  c: (0 + 0 + 1·8/0.5) / 5 = 16/5.
  auto m = as_map(d.hottest(10, 13500));
  EXPECT_EQ(m.size(), 2u);
  EXPECT_FALSE(m.count("b"));
  EXPECT_DOUBLE_EQ(m["a"], 3.2);
  EXPECT_DOUBLE_EQ(m["c"], 3.2);
  EXPECT_EQ(d.sampled(13500), 14u);  // a×4 c×8 a×2

  // At 14999 only a×2 of [12000,13000) is left, in the oldest slot:
  //   (1·2/0.5) / (4·0.999 + 2 + 1).
  m = as_map(d.hottest(10, 14999));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NEAR(m["a"], 4.0 / (4 * 0.999 + 3), 1e-12);

  EXPECT_TRUE(d.hottest(10, 15000).empty());
  EXPECT_EQ(d.sampled(15000), 0u);
}

TEST(HotKeyDetector, ATimeJumpRotatesEmptySegmentsIn) {
  HotKeyDetector d(three_segments(), 10000);
  observe_n(d, "a", 10, 10100);
  // 2.5 segments later: [12000,..) half full and empty, [11000,12000) empty (it existed, the
  // node simply saw nothing), [10000,11000) a×10:  (1·10/0.5) / (2+2+1) = 4.
  const auto hot = d.hottest(10, 12500);
  ASSERT_EQ(hot.size(), 1u);
  EXPECT_DOUBLE_EQ(hot[0].rate, 4.0);
  // Far beyond the ring: everything is gone, and new samples land in a fresh segment.
  EXPECT_TRUE(d.hottest(10, 10'000'000).empty());
  observe_n(d, "z", 3, 10'000'000);
  const auto later = d.hottest(10, 10'000'250);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].key, "z");
  // All three segments are live: (4·0.25·3/(0.5·0.25)) / (1+2+1) = 6.
  EXPECT_DOUBLE_EQ(later[0].rate, 6.0);
}

TEST(HotKeyDetector, APartialCurrentSegmentCannotSwingTheEstimate) {
  HotKeyDetector d(three_segments(), 10000);
  for (uint64_t t = 10000; t < 13000; t += 10) d.observe("steady", t);  // 100 per segment
  observe_n(d, "burst", 50, 13005);  // 50 samples in the first 10 ms of a segment
  // Current weight 4·0.01: burst (0.04·50/(0.5·0.01)) / 3.04 = 400/3.04 ≈ 132/s, steady
  // (2·100/0.5 + 1·100/0.5) / 3.04 = 600/3.04 ≈ 197/s. Unscaled, burst would read 40000/7.
  const auto m = as_map(d.hottest(10, 13010));
  EXPECT_NEAR(m.at("burst"), 400 / 3.04, 1e-9);
  EXPECT_NEAR(m.at("steady"), 600 / 3.04, 1e-9);
  EXPECT_LT(m.at("burst"), m.at("steady"));
}

TEST(HotKeyDetector, ANewHotKeyOvertakesTheOldOneWithinOneSegment) {
  HotKeysConfig c;  // defaults: 4 segments of 1000 ms, weights 8:4:2:1
  c.sample_rate = 1;
  c.confidence_z = 0;
  HotKeyDetector d(c, 0);
  for (uint64_t t = 0; t < 4000; t += 10) d.observe("old", t);  // 100/s for four segments
  uint64_t overtaken_at = 0;
  for (uint64_t t = 4000; t < 5000; t += 10) {
    d.observe("new", t);  // the hot set moves: 100/s of "new", no more "old"
    const auto hot = d.hottest(2, t + 5);
    ASSERT_FALSE(hot.empty());
    if (hot[0].key == "new" && !overtaken_at) overtaken_at = t + 5;
  }
  // new: 800f, old: 700, both over 8f + 7 (f = share of the segment elapsed): new leads once
  // f > 7/8, i.e. about 875 ms into the segment.
  EXPECT_GT(overtaken_at, 4800u);
  EXPECT_LT(overtaken_at, 5000u);
  // The old key decays by the weights and is gone after `segments` segments.
  const auto m = as_map(d.hottest(10, 6500));
  EXPECT_GT(m.at("new"), m.at("old"));
  const auto gone = as_map(d.hottest(10, 7500));
  EXPECT_FALSE(gone.count("old"));
  EXPECT_TRUE(gone.count("new"));
}

TEST(HotKeyDetector, ConcurrentObserversLoseNoSample) {
  HotKeysConfig c = three_segments();
  HotKeyDetector d(c, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&d, t] {
      for (int i = 0; i < 5000; ++i) d.observe("k" + std::to_string((i * 7 + t) % 50), 100);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(d.sampled(100), 20000u);
}

}  // namespace
}  // namespace exo::db

namespace exo::db {
namespace {

TEST(HotKeyDetector, RatesAreALowerConfidenceBound) {
  // One segment, p = 1: a key seen once is not reported at all at z = 1; one seen 100 times is
  // reported at 90% of its estimate, one seen 4 times at 50%.
  HotKeysConfig c;
  c.sample_rate = 1;
  c.segments = 2;  // queried at 1000 ms: the just-started segment weighs 0, the full one counts
  c.weights = {1, 1};
  c.segment_ms = 1000;
  c.confidence_z = 1;
  HotKeyDetector d(c, 0);
  d.observe("once", 0);
  for (int i = 0; i < 4; ++i) d.observe("four", 0);
  for (int i = 0; i < 100; ++i) d.observe("hundred", 0);
  const auto top = d.hottest(10, 1000);  // one full 1 s segment: rate = count
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].key, "hundred");
  EXPECT_NEAR(top[0].rate, 90, 1e-9);
  EXPECT_EQ(top[1].key, "four");
  EXPECT_NEAR(top[1].rate, 2, 1e-9);
}

}  // namespace
}  // namespace exo::db
