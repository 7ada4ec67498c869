// Cached-key tracking: Fetch marks, Evict unmarks, only for the cache node that holds the key.
#include <gtest/gtest.h>

#include <thread>

#include "cached_keys.h"
#include "keyhash.h"
#include "test_util.h"

namespace exo::db {
namespace {

using testing::B;

TEST(CachedKeys, MarkThenUnmark) {
  CachedKeys ck;
  {
    auto g = ck.lock_key(B("k"));
    EXPECT_EQ(g.holder("k"), nullptr);
    g.mark("k", "cache0");
    ASSERT_NE(g.holder("k"), nullptr);
    EXPECT_EQ(*g.holder("k"), "cache0");
  }
  EXPECT_EQ(ck.size(), 1u);
  {
    auto g = ck.lock_key(B("k"));
    EXPECT_TRUE(g.unmark("k", "cache0"));
    EXPECT_EQ(g.holder("k"), nullptr);
    EXPECT_FALSE(g.unmark("k", "cache0"));  // already gone
  }
  EXPECT_EQ(ck.size(), 0u);
}

TEST(CachedKeys, EvictByAnotherCacheNodeDoesNothing) {
  CachedKeys ck;
  ck.lock_key(B("k")).mark("k", "cache0");
  EXPECT_FALSE(ck.lock_key(B("k")).unmark("k", "cache1"));
  auto g = ck.lock_key(B("k"));
  ASSERT_NE(g.holder("k"), nullptr);
  EXPECT_EQ(*g.holder("k"), "cache0");
  EXPECT_EQ(ck.size(), 1u);
}

TEST(CachedKeys, RemarkDoesNotDoubleCountAndLastFetchWins) {
  CachedKeys ck;
  ck.lock_key(B("k")).mark("k", "cache0");
  ck.lock_key(B("k")).mark("k", "cache1");
  EXPECT_EQ(ck.size(), 1u);
  EXPECT_FALSE(ck.lock_key(B("k")).unmark("k", "cache0"));
  EXPECT_TRUE(ck.lock_key(B("k")).unmark("k", "cache1"));
  EXPECT_EQ(ck.size(), 0u);
}

TEST(CachedKeys, KeysSharingAStripeAreDistinct) {
  CachedKeys ck;
  // Find two keys in the same stripe.
  const std::string a = "a";
  std::string b;
  for (int i = 0;; ++i) {
    b = "b" + std::to_string(i);
    if (key_hash(B(a)) % CachedKeys::kStripes == key_hash(B(b)) % CachedKeys::kStripes) break;
  }
  ck.lock_key(B(a)).mark(a, "cache0");
  auto g = ck.lock_key(B(b));
  EXPECT_EQ(g.holder(b), nullptr);
  EXPECT_NE(g.holder(a), nullptr);  // same stripe, same guard
}

TEST(CachedKeys, StripeLockExcludesOtherThreads) {
  CachedKeys ck;
  std::atomic<bool> entered{false};
  std::thread t;
  {
    auto g = ck.lock_key(B("k"));
    t = std::thread([&] {
      auto g2 = ck.lock_key(B("k"));
      entered = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(entered.load());  // blocked while we hold the stripe
  }
  t.join();
  EXPECT_TRUE(entered.load());
}

TEST(CachedKeys, StripesAreCacheLineSeparated) {
  EXPECT_EQ(sizeof(CachedKeys) % 64, 0u);
  EXPECT_GE(sizeof(CachedKeys), CachedKeys::kStripes * 64);
}

}  // namespace
}  // namespace exo::db
