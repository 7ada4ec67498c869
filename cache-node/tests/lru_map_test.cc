#include <gtest/gtest.h>

#include "lru_map.h"

namespace {

using exo::cache::LruMap;
using TxResult = LruMap::TxResult;
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

TEST(LruMap, PrepareCommitPut) {
  LruMap m(4);
  m.insert("a", "old", nullptr);
  EXPECT_EQ(m.prepare("a", 7, false, "new"), TxResult::kOk);
  EXPECT_TRUE(m.find("a")->pending);
  EXPECT_EQ(m.pending_count(), 1u);
  EXPECT_EQ(m.find("a")->value, "old");  // not visible before commit
  EXPECT_EQ(m.prepare("a", 6, false, "older"), TxResult::kBusy);  // an older txid never wins
  EXPECT_EQ(m.commit("a", 8), TxResult::kTxidMismatch);
  EXPECT_EQ(m.commit("a", 7), TxResult::kOk);
  EXPECT_FALSE(m.find("a")->pending);
  EXPECT_EQ(m.find("a")->value, "new");
  EXPECT_EQ(m.pending_count(), 0u);
  EXPECT_EQ(m.commit("a", 7), TxResult::kNoPending);
}

TEST(LruMap, PrepareCommitDeleteErases) {
  LruMap m(4);
  m.insert("a", "old", nullptr);
  EXPECT_EQ(m.prepare("a", 1, true, ""), TxResult::kOk);
  EXPECT_EQ(m.commit("a", 1), TxResult::kErased);
  EXPECT_EQ(m.find("a"), nullptr);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.pending_count(), 0u);
}

TEST(LruMap, AbortKeepsOldValue) {
  LruMap m(4);
  m.insert("a", "old", nullptr);
  EXPECT_EQ(m.prepare("a", 3, false, "new"), TxResult::kOk);
  EXPECT_EQ(m.abort("a", 4), TxResult::kTxidMismatch);
  EXPECT_EQ(m.abort("a", 3), TxResult::kOk);
  EXPECT_FALSE(m.find("a")->pending);
  EXPECT_EQ(m.find("a")->value, "old");
  EXPECT_EQ(m.abort("a", 3), TxResult::kNoPending);
}

TEST(LruMap, TxOnUnheldKey) {
  LruMap m(4);
  EXPECT_EQ(m.prepare("a", 1, false, "v"), TxResult::kNotHeld);
  EXPECT_EQ(m.commit("a", 1), TxResult::kNotHeld);
  EXPECT_EQ(m.abort("a", 1), TxResult::kNotHeld);
}

TEST(LruMap, EvictingOrErasingPendingEntryFixesPendingCount) {
  LruMap m(1);
  m.insert("a", "v", nullptr);
  m.prepare("a", 1, false, "w");
  Keys ev;
  m.insert("b", "v", &ev);
  EXPECT_EQ(ev, Keys{"a"});
  EXPECT_EQ(m.pending_count(), 0u);
  EXPECT_FALSE(m.find("b")->pending);  // a reused slot starts clean
  EXPECT_EQ(m.commit("a", 1), TxResult::kNotHeld);
}

TEST(LruMap, ClearDropsEveryEntryAndTheSlotsAreReused) {
  LruMap m(3);
  std::vector<std::string> evicted;
  for (auto k : {"a", "b", "c"}) m.insert(k, "v", &evicted);
  ASSERT_EQ(m.prepare("b", 1, false, "w"), LruMap::TxResult::kOk);
  EXPECT_EQ(m.clear(), 3u);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.pending_count(), 0u);
  EXPECT_EQ(m.find("a"), nullptr);
  EXPECT_EQ(m.find("b"), nullptr);
  EXPECT_TRUE(m.keys().empty());
  EXPECT_EQ(m.commit("b", 1), LruMap::TxResult::kNotHeld);
  for (auto k : {"d", "e", "f"}) m.insert(k, "v", &evicted);
  EXPECT_TRUE(evicted.empty()) << "all three slots were free again";
  EXPECT_EQ(m.keys(), (std::vector<std::string>{"f", "e", "d"}));
  EXPECT_EQ(m.clear(), 3u);
  EXPECT_EQ(m.clear(), 0u);
}

}  // namespace

// A Prepare that arrived after its Abort (answered "nothing pending") leaves an orphan pending
// txid. The db node resolves a key's earlier transaction before preparing the next one, so a
// newer txid replaces the orphan instead of making every later write BUSY.
TEST(LruMap, NewerPrepareSupersedesAnOrphanedOlderOne) {
  LruMap m(4);
  m.insert("a", "old", nullptr);
  ASSERT_EQ(m.prepare("a", 7, false, "orphan"), TxResult::kOk);
  EXPECT_EQ(m.prepare("a", 9, false, "new"), TxResult::kOk);
  EXPECT_EQ(m.pending_count(), 1u);
  EXPECT_EQ(m.commit("a", 7), TxResult::kTxidMismatch);
  EXPECT_EQ(m.commit("a", 9), TxResult::kOk);
  EXPECT_EQ(m.find("a")->value, "new");
}
