// select_keys: the selection pseudo-code of docs/cache-fill.md section 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "fill/selector.h"

namespace {

using namespace exo::cache;
using exo::KeyRate;
using KR = std::vector<KeyRate>;

SelectInput input(KR candidates, KR held, size_t capacity, double min_rate = 1,
                  double hysteresis = 0.1) {
  SelectInput in;
  in.candidates = std::move(candidates);
  in.held = std::move(held);
  in.capacity = capacity;
  in.min_rate = min_rate;
  in.hysteresis = hysteresis;
  return in;
}

std::vector<std::string> keys(const KR& v) {
  std::vector<std::string> out;
  for (const auto& kr : v) out.push_back(kr.key);
  return out;
}

TEST(Selector, FillsEmptyMapHottestFirstUpToCapacity) {
  auto s = select_keys(input({{"a", 50}, {"b", 40}, {"c", 30}, {"d", 20}}, {}, 3));
  EXPECT_EQ(s.admit, (KR{{"a", 50}, {"b", 40}, {"c", 30}}));
  // Full now: "d" (20) would have to beat the coldest admitted key (30) by 10%.
  EXPECT_TRUE(s.evict.empty());
  EXPECT_EQ(s.threshold, 1);
}

TEST(Selector, AdmitsWithinTheRuleBudgetHottestFirstWithTheirVictims) {
  // Full: every admission displaces a victim and costs 2 (its add, the victim's delete).
  SelectInput in = input({{"a", 90}, {"b", 80}, {"c", 70}}, {{"x", 5}, {"y", 6}, {"z", 7}}, 3);
  in.rule_budget = 5;
  auto s = select_keys(in);
  EXPECT_EQ(s.admit, (KR{{"a", 90}, {"b", 80}}));
  EXPECT_EQ(keys(s.evict), (std::vector<std::string>{"x", "y"})) << "only the admitted ones' victims";
  EXPECT_EQ(s.rule_changes, 4u);
  in.rule_budget = 1;
  EXPECT_TRUE(select_keys(in).admit.empty()) << "a replacement needs 2";
  // Room for two: those cost 1 each, the third displaces a victim for 2 more.
  SelectInput room = input({{"a", 90}, {"b", 80}, {"c", 70}}, {{"x", 5}}, 3);
  room.rule_budget = 4;
  s = select_keys(room);
  EXPECT_EQ(s.admit, (KR{{"a", 90}, {"b", 80}, {"c", 70}}));
  EXPECT_EQ(s.rule_changes, 4u);
}

TEST(Selector, MinRateIsExclusiveAndStops) {
  auto s = select_keys(input({{"a", 5}, {"b", 2}, {"c", 2}, {"d", 1.5}}, {}, 10, /*min_rate=*/2));
  EXPECT_EQ(keys(s.admit), std::vector<std::string>{"a"}) << "rate <= threshold stops";
  EXPECT_EQ(s.threshold, 2);
}

TEST(Selector, EvictsColdestHeldAndThresholdIsLastVictim) {
  auto s = select_keys(input({{"n1", 100}, {"n2", 90}, {"n3", 12}},
                             {{"h1", 5}, {"h2", 80}, {"h3", 10}}, 3, 1, 0.1));
  // n1 replaces h1 (5), n2 replaces h3 (10), n3 (12) cannot beat h2 (80).
  EXPECT_EQ(keys(s.admit), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(s.evict, (KR{{"h1", 5}, {"h3", 10}}));
  EXPECT_EQ(s.threshold, 10);
}

TEST(Selector, ThresholdStopsEvenWithoutHysteresis) {
  // After evicting a victim of 10, a newcomer at exactly 10 stops (rate <= threshold).
  auto s = select_keys(input({{"n1", 50}, {"n2", 10}}, {{"h1", 10}, {"h2", 10}}, 2, 1, 0));
  EXPECT_EQ(keys(s.admit), std::vector<std::string>{"n1"});
  EXPECT_EQ(keys(s.evict), std::vector<std::string>{"h1"});
  EXPECT_EQ(s.threshold, 10);
}

TEST(Selector, HysteresisPreventsSwapOfNearEqualKeys) {
  KR held{{"h", 100}};
  auto s = select_keys(input({{"n", 109}}, held, 1, 1, 0.1));
  EXPECT_TRUE(s.admit.empty());
  EXPECT_TRUE(s.evict.empty());
  s = select_keys(input({{"n", 110}}, held, 1, 1, 0.1));
  EXPECT_TRUE(s.admit.empty()) << "must beat by more than the hysteresis";
  s = select_keys(input({{"n", 111}}, held, 1, 1, 0.1));
  EXPECT_EQ(keys(s.admit), std::vector<std::string>{"n"});
  EXPECT_EQ(keys(s.evict), std::vector<std::string>{"h"});
  // Without hysteresis a slightly hotter key swaps in.
  s = select_keys(input({{"n", 101}}, held, 1, 1, 0));
  EXPECT_EQ(keys(s.admit), std::vector<std::string>{"n"});
}

TEST(Selector, SkipSetAndHeldKeysAreNotCandidates) {
  auto in = input({{"busy", 100}, {"h", 90}, {"a", 80}, {"b", 70}}, {{"h", 3}}, 3);
  in.skip = {"busy"};
  auto s = select_keys(in);
  EXPECT_EQ(keys(s.admit), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(s.evict.empty());
}

TEST(Selector, SkippedKeyDoesNotStopTheWalk) {
  // A skipped hot key is passed over; colder keys behind it are still considered.
  auto in = input({{"x", 100}, {"y", 50}}, {}, 1);
  in.skip = {"x"};
  EXPECT_EQ(keys(select_keys(in).admit), std::vector<std::string>{"y"});
}

TEST(Selector, CapacityZeroAdmitsNothing) {
  auto s = select_keys(input({{"a", 100}}, {}, 0));
  EXPECT_TRUE(s.admit.empty());
  EXPECT_TRUE(s.evict.empty());
}

TEST(Selector, DuplicateCandidateAdmittedOnce) {
  auto s = select_keys(input({{"a", 100}, {"a", 100}, {"b", 50}}, {}, 5));
  EXPECT_EQ(keys(s.admit), (std::vector<std::string>{"a", "b"}));
}

// Property check on random inputs: capacity respected, admits sorted and disjoint from held,
// victims are the coldest held keys, every admitted key beats its victim by the hysteresis.
TEST(Selector, RandomInputsKeepInvariants) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> rate(0, 100);
  for (int round = 0; round < 500; ++round) {
    const size_t capacity = rng() % 8;
    KR held, cands;
    const size_t nheld = std::min<size_t>(capacity, rng() % 9);
    for (size_t i = 0; i < nheld; ++i) held.push_back({"h" + std::to_string(i), rate(rng)});
    for (size_t i = 0; i < rng() % 12; ++i) cands.push_back({"c" + std::to_string(i), rate(rng)});
    std::sort(cands.begin(), cands.end(),
              [](const KeyRate& a, const KeyRate& b) { return a.rate > b.rate; });
    auto in = input(cands, held, capacity, 5, 0.2);
    if (!cands.empty() && rng() % 2) in.skip.insert(cands[0].key);
    const Selection s = select_keys(in);

    EXPECT_LE(held.size() - s.evict.size() + s.admit.size(), capacity);
    for (size_t i = 1; i < s.admit.size(); ++i) EXPECT_GE(s.admit[i - 1].rate, s.admit[i].rate);
    for (const auto& a : s.admit) {
      EXPECT_GT(a.rate, 5);
      EXPECT_EQ(in.skip.count(a.key), 0u);
      EXPECT_EQ(a.key[0], 'c');
    }
    // First the held keys below the floor min_rate / (1 + hysteresis), then the victims.
    const double floor = 5 / 1.2;
    KR sorted;  // held keys above the floor, coldest first
    size_t below = 0;
    for (const auto& h : held) {
      if (h.rate < floor) ++below;
      else sorted.push_back(h);
    }
    std::sort(sorted.begin(), sorted.end(),
              [](const KeyRate& a, const KeyRate& b) { return a.rate < b.rate; });
    ASSERT_GE(s.evict.size(), below);
    for (size_t i = 0; i < below; ++i) EXPECT_LT(s.evict[i].rate, floor);
    const KR victims(s.evict.begin() + below, s.evict.end());
    ASSERT_LE(victims.size(), s.admit.size());
    // Victims are exactly the coldest remaining held keys, coldest first.
    for (size_t i = 0; i < victims.size(); ++i) EXPECT_EQ(victims[i].rate, sorted[i].rate);
    // The k-th victim pays for one of the last victims.size() admissions (the earlier ones
    // filled free room); each of those beats its victim by the hysteresis.
    const size_t free_room = s.admit.size() - victims.size();
    for (size_t i = 0; i < victims.size(); ++i)
      EXPECT_GT(s.admit[free_room + i].rate, victims[i].rate * 1.2);
    EXPECT_EQ(s.threshold, victims.empty() ? 5 : victims.back().rate);
  }
}

}  // namespace

namespace {

TEST(Selector, HeldKeysBelowTheRateFloorAreEvictedWithoutACandidate) {
  // min_rate 1, hysteresis 0.25: floor 0.8. "cold" goes, "warm" (0.9) stays: the hysteresis
  // band keeps a key hovering around min_rate from flapping.
  auto s = select_keys(input({}, {{"hot", 10}, {"cold", 0.5}, {"warm", 0.9}}, 5, 1, 0.25));
  EXPECT_EQ(keys(s.evict), (std::vector<std::string>{"cold"}));
  EXPECT_TRUE(s.admit.empty());
}

TEST(Selector, FreedSlotsOfColdKeysGoToCandidatesWithoutVictims) {
  // Full map, but one held key is below the floor: the newcomer takes its slot, and the
  // hottest held keys are not displaced.
  auto s = select_keys(input({{"new", 3}}, {{"a", 10}, {"b", 9}, {"old", 0.1}}, 3));
  EXPECT_EQ(keys(s.evict), (std::vector<std::string>{"old"}));
  EXPECT_EQ(keys(s.admit), (std::vector<std::string>{"new"}));
  EXPECT_EQ(s.threshold, 1);  // no victim was needed
}

}  // namespace
