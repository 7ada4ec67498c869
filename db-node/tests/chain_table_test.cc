// ChainTable (replication/chain_table.h): roles, successors and learners of a slot, and the
// table built from the resolved config.
#include <gtest/gtest.h>

#include "replication/chain_table.h"
#include "test_util.h"

namespace exo::db {
namespace {

ChainTable two_slots() {
  ChainTable t;
  t.partition_bits = 1;
  t.slots = {SlotChainInfo{{0, 1, 2}, 3, 2}, SlotChainInfo{{1, 2, 0}, 2, 1}};  // slot 1: learner 0
  return t;
}

TEST(ChainTable, RolesFollowTheOrderAndLearnersComeLast) {
  const ChainTable t = two_slots();
  EXPECT_EQ(t.role(0, 0), ChainRole::kHead);
  EXPECT_EQ(t.role(0, 1), ChainRole::kMiddle);
  EXPECT_EQ(t.role(0, 2), ChainRole::kTail);
  EXPECT_EQ(t.role(1, 1), ChainRole::kHead);
  EXPECT_EQ(t.role(1, 2), ChainRole::kTail);
  EXPECT_EQ(t.role(1, 0), ChainRole::kLearner);
  EXPECT_EQ(t.role(1, 3), ChainRole::kNone);
  EXPECT_TRUE(t.is_head(0, 0));
  EXPECT_TRUE(t.is_read_server(1, 1));  // the read server is named, not implied by the order
  EXPECT_FALSE(t.is_read_server(1, 0));  // a learner never reads
  EXPECT_EQ(t.learning(0), std::vector<uint32_t>{1});
}

TEST(ChainTable, WritesPassFromTheTailToItsLearners) {
  const ChainTable t = two_slots();
  EXPECT_EQ(t.successor(0, 0), 1u);
  EXPECT_EQ(t.successor(0, 2), std::nullopt);
  EXPECT_EQ(t.successor(1, 2), 0u);  // the tail passes to the learner
  EXPECT_EQ(t.predecessor(1, 0), 2u);
  EXPECT_EQ(t.predecessor(0, 0), std::nullopt);
  EXPECT_EQ(t.predecessor(0, 7), std::nullopt);
}

TEST(ChainTable, FromTheConfigTheTailReadsAndFactorOneIsTheOwnerAlone) {
  Cluster c = testing::test_cluster();
  ChainTable t = ChainTable::from_cluster(c);  // no chains in the file: each owner alone
  ASSERT_EQ(t.slots.size(), 2u);
  EXPECT_EQ(t.role(0, 0), ChainRole::kSole);
  EXPECT_TRUE(t.is_read_server(0, 0) && t.is_head(0, 0));
  EXPECT_FALSE(t.replicated());
  c.slot_chain = {{0, 1}, {1, 0}};
  t = ChainTable::from_cluster(c);
  EXPECT_TRUE(t.replicated());
  EXPECT_TRUE(t.is_read_server(0, 1));
  EXPECT_EQ(t.version, 0u);
}

}  // namespace
}  // namespace exo::db
