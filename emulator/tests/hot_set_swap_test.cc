// HotSetSwap: every hot set is new, each state is a bijection, ids stay in range; key names.
#include "loadgen/hot_set_swap.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace exo::loadgen {
namespace {

std::set<uint64_t> hot_set(const HotSetSwap& m, uint64_t swaps) {
  std::set<uint64_t> out;
  for (uint64_t r = 1; r <= m.hot(); ++r) out.insert(m.key_for_rank(r, swaps));
  return out;
}

TEST(HotSetSwap, EachHotSetIsDisjointFromEveryEarlierOne) {
  const HotSetSwap m(1000, 37);
  ASSERT_EQ(m.max_swaps(), 1000u / 37 - 1);
  std::set<uint64_t> ever_hot;
  for (uint64_t s = 0; s <= m.max_swaps(); ++s) {
    const auto hot = hot_set(m, s);
    ASSERT_EQ(hot.size(), 37u);
    for (uint64_t k : hot) EXPECT_FALSE(ever_hot.count(k)) << "key " << k << " hot again at " << s;
    ever_hot.insert(hot.begin(), hot.end());
  }
}

TEST(HotSetSwap, EveryStateIsABijectionInRange) {
  for (uint64_t n : {1ull, 2ull, 7ull, 10ull, 64ull, 101ull}) {
    for (uint64_t h = 0; h <= n / 2; ++h) {
      const HotSetSwap m(n, h);
      for (uint64_t s = 0; s <= m.max_swaps(); ++s) {
        std::vector<bool> seen(n, false);
        for (uint64_t r = 1; r <= n; ++r) {
          const uint64_t k = m.key_for_rank(r, s);
          ASSERT_LT(k, n) << "n " << n << " h " << h << " s " << s << " r " << r;
          EXPECT_FALSE(seen[k]) << "n " << n << " h " << h << " s " << s << " r " << r;
          seen[k] = true;
        }
      }
    }
  }
}

TEST(HotSetSwap, FirstSwapMatchesThePythonKeyspace) {
  // harness/exo_harness/keyspace.py, test_swap_exchanges_hottest_and_coldest (0-based ranks).
  const HotSetSwap m(1000, 50);
  EXPECT_EQ(m.key_for_rank(1, 0), 0u);
  EXPECT_EQ(m.key_for_rank(1, 1), 999u);
  EXPECT_EQ(m.key_for_rank(2, 1), 998u);
  EXPECT_EQ(m.key_for_rank(1000, 1), 0u);  // the old hottest is now the coldest
  EXPECT_EQ(m.key_for_rank(501, 1), 500u);  // the middle does not move
  // Second swap: a fresh block, and the first hot block stays at the bottom.
  EXPECT_EQ(m.key_for_rank(1, 2), 949u);
  EXPECT_EQ(m.key_for_rank(1000, 2), 0u);
  EXPECT_EQ(m.key_for_rank(951, 2), 49u);   // the first hot set stays at P_1, reversed
  EXPECT_EQ(m.key_for_rank(901, 2), 950u);  // block C_1 sits at P_2, in order
}

TEST(HotSetSwap, ScheduleAndLimits) {
  const HotSetSwap m(100, 10, 5'000'000'000);  // swap every 5 s, 9 swaps available
  EXPECT_EQ(m.swaps_at(0), 0u);
  EXPECT_EQ(m.swaps_at(4'999'999'999), 0u);
  EXPECT_EQ(m.swaps_at(5'000'000'000), 1u);
  EXPECT_EQ(m.swaps_at(1'000'000'000'000), 9u);  // held once the cold blocks run out
  EXPECT_EQ(HotSetSwap(100, 10).swaps_at(1'000'000'000'000), 0u);
  EXPECT_THROW(m.key_for_rank(1, 10), std::out_of_range);
  EXPECT_THROW(m.key_for_rank(0, 0), std::out_of_range);
  EXPECT_THROW(m.key_for_rank(101, 0), std::out_of_range);
  EXPECT_THROW(HotSetSwap(10, 6), std::invalid_argument);
  EXPECT_THROW(HotSetSwap(0, 0), std::invalid_argument);
}

TEST(HotSetSwap, LargeKeySpaceWithoutTables) {
  const uint64_t n = 1'000'000'000;
  const HotSetSwap m(n, 100'000);
  EXPECT_EQ(m.max_swaps(), 9'999u);
  EXPECT_EQ(m.key_for_rank(1, 9'999), 100'000u + 99'999u);  // the last cold block, reversed
  EXPECT_EQ(m.key_for_rank(n, 9'999), 0u);                   // the original hottest, coldest
  EXPECT_EQ(m.key_for_rank(n - 99'999, 9'999), 99'999u);
  EXPECT_EQ(m.key_for_rank(n - 100'000, 9'999), n - 1);      // C_1, now at P_2, in order (last)
}

TEST(KeyName, FixedWidthDeterministicDistinct) {
  EXPECT_EQ(key_name(0), "key:000000000000");
  EXPECT_EQ(key_name(42), "key:000000000042");
  EXPECT_EQ(key_name(999'999'999'999ull), "key:999999999999");
  EXPECT_EQ(key_name(42).size(), 16u);
  EXPECT_EQ(key_name(7, 8), "key:0007");
  EXPECT_THROW(key_name(1'000'000'000'000ull), std::out_of_range);
  EXPECT_THROW(key_name(1, 4), std::invalid_argument);
  std::set<std::string> names;
  for (uint64_t i = 0; i < 10'000; ++i) names.insert(key_name(i * 7919));
  EXPECT_EQ(names.size(), 10'000u);
}

}  // namespace
}  // namespace exo::loadgen
