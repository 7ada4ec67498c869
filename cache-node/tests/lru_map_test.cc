#include <gtest/gtest.h>

#include "lru_map.h"

namespace {

using exo::cache::LruMap;
using exo::cache::PreparedWrite;
using Keys = std::vector<std::string>;

TEST(LruMap, InsertFindAndCapacity) {
  LruMap m(3);
  EXPECT_EQ(m.capacity(), 3u);
  Keys ev;
  m.insert("a", "1", &ev);
  m.insert("b", "2", &ev);
  m.insert("c", "3", &ev);
  EXPECT_TRUE(ev.empty());
  EXPECT_EQ(m.size(), 3u);
  ASSERT_NE(m.find("b"), nullptr);
  EXPECT_EQ(m.find("b")->value, "2");
  EXPECT_EQ(m.find("zz"), nullptr);
  m.insert("d", "4", &ev);  // full: evicts the LRU key "a"
  EXPECT_EQ(ev, Keys{"a"});
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m.find("a"), nullptr);
}

TEST(LruMap, EvictionOrderFollowsRecency) {
  LruMap m(3);
  Keys ev;
  for (auto k : {"a", "b", "c"}) m.insert(k, "v", &ev);
  EXPECT_EQ(m.keys(), (Keys{"c", "b", "a"}));  // MRU first
  ASSERT_NE(m.touch("a"), nullptr);            // GET hit: a becomes MRU
  EXPECT_EQ(m.keys(), (Keys{"a", "c", "b"}));
  m.insert("d", "v", &ev);
  m.insert("e", "v", &ev);
  EXPECT_EQ(ev, (Keys{"b", "c"}));
  EXPECT_EQ(m.keys(), (Keys{"e", "d", "a"}));
}

TEST(LruMap, FindDoesNotChangeRecencyButTouchDoes) {
  LruMap m(2);
  Keys ev;
  m.insert("a", "v", &ev);
  m.insert("b", "v", &ev);
  m.find("a");
  m.insert("c", "v", &ev);
  EXPECT_EQ(ev, Keys{"a"});
}

TEST(LruMap, FrequencyCounter) {
  LruMap m(4);
  m.insert("a", "v", nullptr);
  EXPECT_EQ(m.find("a")->hits, 0u);
  for (int i = 0; i < 5; ++i) m.touch("a");
  EXPECT_EQ(m.find("a")->hits, 5u);
  EXPECT_EQ(m.touch("missing"), nullptr);
  m.insert("a", "w", nullptr);  // overwrite keeps the count and updates the value
  EXPECT_EQ(m.find("a")->hits, 5u);
  EXPECT_EQ(m.find("a")->value, "w");
}

TEST(LruMap, EraseAndSlotReuse) {
  LruMap m(2);
  m.insert("a", "1", nullptr);
  m.insert("b", "2", nullptr);
  EXPECT_TRUE(m.erase("a"));
  EXPECT_FALSE(m.erase("a"));
  EXPECT_EQ(m.size(), 1u);
  Keys ev;
  m.insert("c", "3", &ev);  // a free slot: no eviction
  EXPECT_TRUE(ev.empty());
  EXPECT_EQ(m.keys(), (Keys{"c", "b"}));
  // Many insert/erase cycles must keep the free list and buckets consistent.
  for (int i = 0; i < 1000; ++i) {
    const std::string k = "k" + std::to_string(i);
    m.insert(k, k, nullptr);
    ASSERT_EQ(m.find(k)->value, k);
    if (i % 3 == 0) {
      ASSERT_TRUE(m.erase(k));
    }
  }
  EXPECT_LE(m.size(), 2u);
}

TEST(LruMap, HashCollisionsStillCompareKeys) {
  LruMap m(8);
  // Same (forced) hash for different keys: chained in one bucket, told apart by the key bytes.
  m.insert("x", "1", nullptr, 42);
  m.insert("y", "2", nullptr, 42);
  EXPECT_EQ(m.find("x", 42)->value, "1");
  EXPECT_EQ(m.find("y", 42)->value, "2");
  EXPECT_TRUE(m.erase("x", 42));
  EXPECT_EQ(m.find("x", 42), nullptr);
  EXPECT_EQ(m.find("y", 42)->value, "2");
}

TEST(LruMap, KeysAreBinarySafe) {
  LruMap m(4);
  const std::string k("a\0b", 3), k2("a\0c", 3);
  m.insert(k, std::string("\0\1", 2), nullptr);
  EXPECT_EQ(m.find(k2), nullptr);
  ASSERT_NE(m.find(k), nullptr);
  EXPECT_EQ(m.find(k)->value.size(), 2u);
}

TEST(LruMap, EvictingOrErasingPendingEntryFixesPendingCount) {
  LruMap m(1);
  m.set_pending(*m.insert("a", "v", nullptr), PreparedWrite{1, false, "w"});
  EXPECT_EQ(m.pending_count(), 1u);
  Keys ev;
  m.insert("b", "v", &ev);
  EXPECT_EQ(ev, Keys{"a"});
  EXPECT_EQ(m.pending_count(), 0u);
  EXPECT_FALSE(m.find("b")->pending);  // a reused slot starts clean
  EXPECT_TRUE(m.find("b")->prepared.value.empty());
  m.set_pending(*m.find("b"), PreparedWrite{2, true, ""});
  EXPECT_TRUE(m.erase("b"));
  EXPECT_EQ(m.pending_count(), 0u);
}

TEST(LruMap, PendingWriteIsKeptBesideTheValue) {
  LruMap m(2);
  LruMap::Entry* e = m.insert("a", "old", nullptr);
  m.set_pending(*e, PreparedWrite{7, false, "new"});
  m.set_pending(*e, PreparedWrite{9, false, "newer"});  // replaced, counted once
  EXPECT_EQ(m.pending_count(), 1u);
  EXPECT_EQ(m.find("a")->value, "old") << "the value is the key table's to change";
  EXPECT_EQ(m.find("a")->prepared.txid, 9u);
  m.clear_pending(*e);
  m.clear_pending(*e);
  EXPECT_EQ(m.pending_count(), 0u);
  EXPECT_FALSE(m.find("a")->pending);
  EXPECT_EQ(m.find("a")->value, "old");
}

TEST(LruMap, ClearDropsEveryEntryAndTheSlotsAreReused) {
  LruMap m(3);
  std::vector<std::string> evicted;
  for (auto k : {"a", "b", "c"}) m.insert(k, "v", &evicted);
  m.set_pending(*m.find("b"), PreparedWrite{1, false, "w"});
  EXPECT_EQ(m.clear(), 3u);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.pending_count(), 0u);
  EXPECT_EQ(m.find("a"), nullptr);
  EXPECT_EQ(m.find("b"), nullptr);
  EXPECT_TRUE(m.keys().empty());
  for (auto k : {"d", "e", "f"}) m.insert(k, "v", &evicted);
  EXPECT_TRUE(evicted.empty()) << "all three slots were free again";
  EXPECT_EQ(m.keys(), (std::vector<std::string>{"f", "e", "d"}));
  EXPECT_EQ(m.clear(), 3u);
  EXPECT_EQ(m.clear(), 0u);
}

}  // namespace
