// The start-up plan (coordinator/recovery_plan.h) on hand-made records, without a store.
#include <gtest/gtest.h>

#include "coordinator/recovery_plan.h"

namespace exo::db {
namespace {

std::string value(const std::string& node, const std::string& key) {
  std::string v;
  EXPECT_TRUE(encode_txlog_value(node, key, &v));
  return v;
}

const KnownCacheNode kOnlyCache0 = [](std::string_view n) { return n == "cache0"; };

TEST(PlanPrepared, ATransactionWithACommitRecordGetsAnAbortRecordWithTheSameValue) {
  PreparedTxn p;
  p.txid = 7;
  p.ops = {{Cf::kData, false, "k", "new"},
           {Cf::kRequests, false, "id", "rec"},
           {Cf::kTxlog, false, txlog_key(7, Decision::kCommit), value("cache0", "k")}};
  const PreparedPlan plan = plan_prepared(p);
  EXPECT_EQ(plan.txid, 7u);
  EXPECT_TRUE(plan.write_abort);
  EXPECT_EQ(plan.abort_key, txlog_key(7, Decision::kAbort));
  EXPECT_EQ(plan.abort_value, value("cache0", "k"));
}

TEST(PlanPrepared, WithoutACommitRecordItIsOnlyRolledBack) {
  PreparedTxn p;
  p.txid = 8;
  p.ops = {{Cf::kData, false, "k", "new"},
           {Cf::kTxlog, true, txlog_key(8, Decision::kCommit), ""},   // a delete is no record
           {Cf::kTxlog, false, txlog_key(8, Decision::kAbort), "x"},  // nor is an abort record
           {Cf::kTxlog, false, "junk", "x"}};
  EXPECT_FALSE(plan_prepared(p).write_abort);
}

TEST(PlanTxlog, QueuesInTxidOrderAndACommitRecordWins) {
  const std::vector<std::pair<std::string, std::string>> records = {
      {txlog_key(3, Decision::kAbort), value("cache0", "c")},
      {txlog_key(1, Decision::kCommit), value("cache0", "a")},
      {txlog_key(1, Decision::kAbort), value("cache0", "a")},
      {txlog_key(2, Decision::kCommit), value("cache0", "b")}};
  const TxlogPlan plan = plan_txlog(records, kOnlyCache0);
  ASSERT_EQ(plan.queue.size(), 3u);
  EXPECT_EQ(plan.queue[0].txid, 1u);
  EXPECT_EQ(plan.queue[0].decision, Decision::kCommit);
  EXPECT_EQ(plan.queue[0].key, "a");
  EXPECT_EQ(plan.queue[1].txid, 2u);
  EXPECT_EQ(plan.queue[2].txid, 3u);
  EXPECT_EQ(plan.queue[2].decision, Decision::kAbort);
  EXPECT_EQ(plan.commits, 2u);
  EXPECT_EQ(plan.aborts, 1u);
  EXPECT_EQ(plan.drop, (std::vector<std::string>{txlog_key(1, Decision::kAbort)}));
  EXPECT_TRUE(plan.unusable.empty());
}

TEST(PlanTxlog, DropsJunkUnknownNodesAndUnreadableValues) {
  const std::vector<std::pair<std::string, std::string>> records = {
      {"junk", "x"},
      {txlog_key(1, Decision::kCommit), value("gone", "a")},
      {txlog_key(2, Decision::kAbort), ""}};
  const TxlogPlan plan = plan_txlog(records, kOnlyCache0);
  EXPECT_TRUE(plan.queue.empty());
  EXPECT_EQ(plan.drop, (std::vector<std::string>{"junk", txlog_key(1, Decision::kCommit),
                                                 txlog_key(2, Decision::kAbort)}));
  ASSERT_EQ(plan.unusable.size(), 2u);  // the junk key is dropped silently
  EXPECT_EQ(plan.unusable[0].cache_node, "gone");
}

TEST(PlanMarks, LoadsMarksOfKnownNodesAndDropsTheRest) {
  const MarksPlan plan =
      plan_marks({{"a", "cache0"}, {"b", "gone"}, {"", "cache0"}}, kOnlyCache0);
  ASSERT_EQ(plan.load.size(), 1u);
  EXPECT_EQ(plan.load[0], (std::pair<std::string, std::string>{"a", "cache0"}));
  EXPECT_EQ(plan.drop, (std::vector<std::string>{"b", ""}));
}

}  // namespace
}  // namespace exo::db
