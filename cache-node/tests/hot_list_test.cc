// HotList: per-db-node replacement, TTL, max across db nodes, ordering, thread safety.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "fill/hot_list.h"

namespace {

using namespace exo::cache;
using exo::KeyRate;
using KR = std::vector<KeyRate>;

TEST(HotList, NewReportReplacesThatNodesList) {
  HotList h(1000);
  h.report("db0", {{"a", 10}, {"b", 5}}, 100);
  h.report("db1", {{"z", 7}}, 100);
  h.report("db0", {{"c", 3}}, 200);  // "a" and "b" are gone, db1's list stays
  EXPECT_EQ(h.snapshot(200), (KR{{"z", 7}, {"c", 3}}));
  EXPECT_EQ(h.key_count(), 2u);
}

TEST(HotList, ListsOlderThanTtlAreDropped) {
  HotList h(1000);
  h.report("db0", {{"a", 10}}, 100);
  h.report("db1", {{"b", 5}}, 600);
  EXPECT_EQ(h.snapshot(1100), (KR{{"a", 10}, {"b", 5}})) << "exactly ttl old is still valid";
  EXPECT_EQ(h.snapshot(1101), (KR{{"b", 5}}));
  EXPECT_EQ(h.key_count(), 1u) << "the expired list is dropped, not just hidden";
  EXPECT_TRUE(h.snapshot(1601).empty());
  // A report stamped after `now` (another thread's clock read) is fresh.
  h.report("db0", {{"c", 1}}, 5000);
  EXPECT_EQ(h.snapshot(4000), (KR{{"c", 1}}));
}

TEST(HotList, KeyFromTwoNodesTakesMaxAndSortsByRate) {
  HotList h(1000);
  h.report("db0", {{"k", 3}, {"x", 4}, {"a", 4}}, 0);
  h.report("db1", {{"k", 9}, {"y", 1}}, 0);
  EXPECT_EQ(h.snapshot(0), (KR{{"k", 9}, {"a", 4}, {"x", 4}, {"y", 1}}));
  h.report("db1", {{"k", 2}}, 1);  // now db0's 3 is the larger
  EXPECT_EQ(h.snapshot(1), (KR{{"a", 4}, {"x", 4}, {"k", 3}}));
}

TEST(HotList, ConcurrentReportsAndSnapshots) {
  HotList h(1000);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 2000; ++i)
      h.report("db" + std::to_string(i % 3), {{"k" + std::to_string(i), double(i)}}, 0);
    done = true;
  });
  size_t snaps = 0;
  do {  // at least once: on a loaded machine the writer may be done before the first look
    auto s = h.snapshot(0);
    EXPECT_LE(s.size(), 3u);
    ++snaps;
  } while (!done);
  writer.join();
  EXPECT_EQ(h.snapshot(0).size(), 3u);
  EXPECT_GT(snaps, 0u);
}

}  // namespace
