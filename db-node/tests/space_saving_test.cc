// Space-Saving against exact counts (Zipf stream), hand-made eviction sequences, and a naive
// reference implementation of the same rules.
#include "hot_keys/space_saving.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "zipf.h"

namespace exo::db {
namespace {

using testing::Zipf;

std::string key_of(uint32_t i) { return "key" + std::to_string(i); }

TEST(SpaceSaving, ZipfStreamKeepsTheGuarantees) {
  constexpr size_t kKeys = 10000, kOffers = 200000, kK = 100;
  Zipf zipf(kKeys, 0.99, 42);
  SpaceSaving ss(kK);
  std::unordered_map<std::string, uint64_t> exact;
  for (size_t i = 0; i < kOffers; ++i) {
    const std::string k = key_of(zipf.next());
    ++exact[k];
    ss.offer(k);
  }
  EXPECT_EQ(ss.total(), kOffers);
  ASSERT_EQ(ss.size(), kK);

  // count - error <= true count <= count, and the counts sum to the stream length (each offer
  // adds exactly one to one counter; an eviction hands the counter over with its count).
  uint64_t sum = 0;
  size_t visited = 0;
  ss.for_each([&](std::string_view key, uint64_t count, uint64_t error) {
    ++visited;
    sum += count;
    const uint64_t truth = exact[std::string(key)];
    EXPECT_LE(count - error, truth) << key;
    EXPECT_LE(truth, count) << key;
    EXPECT_LE(error, ss.min_count()) << key;  // an error is the min at the time of entry
  });
  EXPECT_EQ(visited, kK);
  EXPECT_EQ(sum, kOffers);

  // Every key above N/k is tracked.
  size_t heavy = 0;
  for (const auto& [k, n] : exact) {
    if (n <= kOffers / kK) continue;
    ++heavy;
    EXPECT_GT(ss.get(k).count, 0u) << k << " occurs " << n << " times but is not tracked";
  }
  EXPECT_GT(heavy, 5u);  // the check above is not vacuous

  // The top 10 by estimate are the true top 10.
  std::vector<std::pair<uint64_t, std::string>> truth;
  for (const auto& [k, n] : exact) truth.push_back({n, k});
  std::sort(truth.rbegin(), truth.rend());
  std::set<std::string> true_top, est_top;
  for (int i = 0; i < 10; ++i) true_top.insert(truth[i].second);
  const auto top = ss.top(10);
  ASSERT_EQ(top.size(), 10u);
  for (const auto& e : top) est_top.insert(e.key);
  size_t overlap = 0;
  for (const auto& k : est_top) overlap += true_top.count(k);
  EXPECT_GE(overlap, 9u);
  EXPECT_EQ(top[0].key, truth[0].second);  // rank 1 is far ahead of rank 2
  for (size_t i = 1; i < top.size(); ++i) EXPECT_GE(top[i - 1].count, top[i].count);
}

TEST(SpaceSaving, EvictsTheLeastRecentlyVisitedKeyOfTheLowestBucket) {
  SpaceSaving ss(3);
  for (const char* k : {"a", "b", "c"}) ss.offer(k);  // bucket 1: c b a (a least recent)
  EXPECT_EQ(ss.min_count(), 1u);

  ss.offer("d");  // evicts a: d = 2, error 1
  EXPECT_EQ(ss.get("a").count, 0u);
  auto d = ss.get("d");
  EXPECT_EQ(d.count, 2u);
  EXPECT_EQ(d.error, 1u);
  EXPECT_EQ(ss.get("b").count, 1u);
  EXPECT_EQ(ss.get("c").count, 1u);

  ss.offer("b");  // b = 2; bucket 1: c, bucket 2: b d
  ss.offer("e");  // evicts c, the only key of bucket 1: e = 2, error 1; bucket 2: e b d
  EXPECT_EQ(ss.get("c").count, 0u);
  EXPECT_EQ(ss.get("e").count, 2u);
  EXPECT_EQ(ss.get("e").error, 1u);
  EXPECT_EQ(ss.min_count(), 2u);

  // d entered bucket 2 first (visited least recently) although b was tracked before it.
  ss.offer("f");
  EXPECT_EQ(ss.get("d").count, 0u);
  EXPECT_EQ(ss.get("b").count, 2u);
  EXPECT_EQ(ss.get("e").count, 2u);
  const auto f = ss.get("f");
  EXPECT_EQ(f.count, 3u);
  EXPECT_EQ(f.error, 2u);
  EXPECT_EQ(ss.size(), 3u);
  EXPECT_EQ(ss.total(), 7u);

  // Order: highest count first, then most recently visited first.
  const auto top = ss.top(3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].key, "f");
  EXPECT_EQ(top[1].key, "e");
  EXPECT_EQ(top[2].key, "b");

  // b moves up to 3, leaving e alone in the lowest bucket.
  ss.offer("b");  // b = 3: buckets 2: e, 3: b f
  ss.offer("g");  // evicts e: g = 3, error 2
  EXPECT_EQ(ss.get("e").count, 0u);
  EXPECT_EQ(ss.get("g").count, 3u);
  EXPECT_EQ(ss.get("g").error, 2u);
  EXPECT_EQ(ss.min_count(), 3u);
}

// The same rules written the slow, obvious way: victim = lowest count, then oldest visit.
class NaiveSpaceSaving {
 public:
  explicit NaiveSpaceSaving(size_t k) : k_(k) {}
  void offer(const std::string& key) {
    ++clock_;
    auto it = m_.find(key);
    if (it != m_.end()) {
      ++it->second.count;
      it->second.visited = clock_;
      return;
    }
    if (m_.size() < k_) {
      m_[key] = {1, 0, clock_};
      return;
    }
    auto victim = m_.begin();
    for (auto j = m_.begin(); j != m_.end(); ++j)
      if (j->second.count < victim->second.count ||
          (j->second.count == victim->second.count && j->second.visited < victim->second.visited))
        victim = j;
    const uint64_t min = victim->second.count;
    m_.erase(victim);
    m_[key] = {min + 1, min, clock_};
  }
  struct E {
    uint64_t count, error, visited;
  };
  std::map<std::string, E> m_;

 private:
  size_t k_;
  uint64_t clock_ = 0;
};

TEST(SpaceSaving, MatchesANaiveImplementationOnARandomStream) {
  // Few keys and a small k: constant eviction, so the bucket lists and the hash index's
  // backward-shift deletes are exercised thousands of times.
  for (size_t k : {1u, 2u, 8u, 33u}) {
    SpaceSaving ss(k);
    NaiveSpaceSaving ref(k);
    Zipf zipf(60, 0.7, 7 + k);
    for (int i = 0; i < 20000; ++i) {
      const std::string key = key_of(zipf.next());
      ss.offer(key);
      ref.offer(key);
      if (i % 97 != 0) continue;
      std::map<std::string, std::pair<uint64_t, uint64_t>> got;
      ss.for_each([&](std::string_view kk, uint64_t c, uint64_t e) { got[std::string(kk)] = {c, e}; });
      ASSERT_EQ(got.size(), ref.m_.size()) << "k=" << k << " step " << i;
      for (const auto& [kk, e] : ref.m_) {
        ASSERT_TRUE(got.count(kk)) << "k=" << k << " step " << i << " missing " << kk;
        ASSERT_EQ(got[kk].first, e.count) << kk;
        ASSERT_EQ(got[kk].second, e.error) << kk;
      }
    }
  }
}

TEST(SpaceSaving, ClearForgetsEverythingAndTheSummaryIsReusable) {
  SpaceSaving ss(4);
  for (int i = 0; i < 100; ++i) ss.offer(key_of(i % 7));
  ss.clear();
  EXPECT_EQ(ss.size(), 0u);
  EXPECT_EQ(ss.total(), 0u);
  EXPECT_EQ(ss.min_count(), 0u);
  EXPECT_TRUE(ss.top(10).empty());
  EXPECT_EQ(ss.get(key_of(1)).count, 0u);
  ss.offer("x");
  ss.offer("x");
  ss.offer("y");
  EXPECT_EQ(ss.min_count(), 0u);  // not full: an untracked key was never seen
  const auto top = ss.top(10);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].key, "x");
  EXPECT_EQ(top[0].count, 2u);
  EXPECT_EQ(top[1].key, "y");
  EXPECT_EQ(top[1].count, 1u);
}

}  // namespace
}  // namespace exo::db
