// The cache node's heads table (heads.h): built from the config, checked SetHeads input (each
// bad field named), and the holder refusing an older version.
#include <gtest/gtest.h>

#include "heads.h"
#include "lru_map.h"

namespace {

using namespace exo::cache;

exo::Cluster two_db_nodes() {
  exo::Cluster c;
  c.partition_bits = 2;
  exo::DbNodeInfo a, b, spare;
  a.name = "db0";
  b.name = "db1";
  spare.name = "db2";
  spare.member = false;
  c.db_nodes = {a, b, spare};
  c.slot_owner = {0, 1, 0, 1};
  return c;
}

// A key whose slot is `slot` (partition_bits 2).
std::string key_in(uint32_t slot) {
  for (int i = 0;; ++i) {
    std::string k = "k" + std::to_string(i);
    if (((LruMap::hash_of(k) & exo::kHashMask) >> (exo::kHashBits - 2)) == slot) return k;
  }
}

TEST(HeadsTest, StartsAsTheConfigsOwners) {
  const exo::Cluster c = two_db_nodes();
  const HeadsTable t = HeadsTable::from_cluster(c);
  EXPECT_EQ(t.version, 0u);
  for (uint32_t s = 0; s < 4; ++s) {
    const uint64_t h = LruMap::hash_of(key_in(s));
    EXPECT_EQ(t.head_index(h), c.owner_index(h)) << "slot " << s;
  }
}

TEST(HeadsTest, BuildsAPushedTableIncludingASpare) {
  const exo::Cluster c = two_db_nodes();
  HeadsTable t;
  ASSERT_EQ(build_heads(c, 7, {"db1", "db1", "db2", "db0"}, &t), "");
  EXPECT_EQ(t.version, 7u);
  EXPECT_EQ(t.head, (std::vector<uint32_t>{1, 1, 2, 0}));
  EXPECT_EQ(t.head_index(LruMap::hash_of(key_in(0))), 1u) << "slot 0 moved from db0 to db1";
  EXPECT_EQ(t.head_index(LruMap::hash_of(key_in(2))), 2u);
}

TEST(HeadsTest, RefusesBadInputNamingTheField) {
  const exo::Cluster c = two_db_nodes();
  HeadsTable t;
  t.version = 99;
  EXPECT_EQ(build_heads(c, 1, {"db0", "db1", "db0"}, &t),
            "heads: 3 entries, want one per slot: 4 (2^partition_bits, partition_bits 2)");
  EXPECT_EQ(build_heads(c, 1, {}, &t).rfind("heads: 0 entries", 0), 0u);
  EXPECT_EQ(build_heads(c, 1, {"db0", "db1", "dbX", "db0"}, &t), "heads[2]: no db node named 'dbX'");
  EXPECT_EQ(build_heads(c, 1, {"db0", "", "db1", "db0"}, &t), "heads[1]: empty; every slot has a head");
  EXPECT_EQ(build_heads(c, 0, {"db0", "db1", "db0", "db1"}, &t).rfind("version: 0", 0), 0u);
  EXPECT_EQ(t.version, 99u) << "a refused table was written";
}

TEST(HeadsTest, OlderVersionsAreRefusedEqualOnesAccepted) {
  EXPECT_EQ(check_not_older(0, 1), "");
  EXPECT_EQ(check_not_older(5, 5), "");
  EXPECT_EQ(check_not_older(5, 4), "version: 4 is older than the heads table in use (version 5)");

  const exo::Cluster c = two_db_nodes();
  Heads heads(HeadsTable::from_cluster(c));
  HeadsTable v3, v2;
  ASSERT_EQ(build_heads(c, 3, {"db1", "db1", "db1", "db1"}, &v3), "");
  ASSERT_EQ(build_heads(c, 2, {"db0", "db0", "db0", "db0"}, &v2), "");
  uint64_t held = 0;
  const auto before = heads.get();
  EXPECT_EQ(heads.replace(v3, &held), "");
  EXPECT_EQ(held, 3u);
  EXPECT_EQ(before->version, 0u) << "a reader keeps the table it loaded";
  EXPECT_NE(heads.replace(v2, &held), "");
  EXPECT_EQ(held, 3u);
  EXPECT_EQ(heads.get()->head, v3.head);
}

}  // namespace
