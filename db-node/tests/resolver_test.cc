// The Resolver delivering undelivered Commit/Abort decisions (resolver.h) with the fakes.
#include <gtest/gtest.h>

#include "handler_fixture.h"
#include "records.h"
#include "resolver.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;

class ResolverTest : public ::testing::Test {
 protected:
  EventLog log;
  FakeNode node{&log};
  Resolver& r = node.resolver;
  FakeStore& store = node.store;
  FakePropagator& prop = node.prop;

  // A decision as the handler hands it over: its txlog record first.
  void queue(uint64_t txid, Decision d, const std::string& key,
             const std::string& cache = "cache0") {
    std::string v;
    ASSERT_TRUE(encode_txlog_value(cache, key, &v));
    store.txlog[txlog_key(txid, d)] = v;
    r.add(PendingDecision{txid, d, cache, key});
  }
  uint64_t gauge() { return counter(node.resolver_counters, "resolver_pending"); }
};

TEST_F(ResolverTest, DeliversEachDecisionAndDeletesItsRecord) {
  queue(1, Decision::kCommit, "a");
  queue(2, Decision::kAbort, "b");
  EXPECT_EQ(gauge(), 2u);
  EXPECT_EQ(r.run_once(), 2u);
  EXPECT_EQ(prop.commit_txids, (std::vector<uint64_t>{1}));
  EXPECT_EQ(prop.abort_txids, (std::vector<uint64_t>{2}));
  EXPECT_TRUE(store.txlog.empty());
  EXPECT_EQ(r.pending_count(), 0u);
  EXPECT_EQ(gauge(), 0u);
  EXPECT_EQ(counter(node.resolver_counters, "resolver_resolved"), 2u);
  EXPECT_EQ(store.synced_writes, 0);  // deleting a delivered decision's record is not synced
}

TEST_F(ResolverTest, RetriesUntilTheCacheNodeAnswers) {
  queue(1, Decision::kCommit, "a");
  prop.commit_result = FinishOutcome::kUnreachable;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.run_once(), 0u);
  EXPECT_EQ(prop.commit_txids.size(), 3u);
  EXPECT_EQ(store.txlog.size(), 1u);
  prop.commit_result = FinishOutcome::kDone;
  EXPECT_EQ(r.run_once(), 1u);
  EXPECT_TRUE(store.txlog.empty());
}

TEST_F(ResolverTest, ARefusalIsDefinitive) {
  // "no prepared write" / "txid mismatch": nothing of that txid is pending at the cache node.
  queue(1, Decision::kAbort, "a");
  prop.abort_result = FinishOutcome::kRefused;
  EXPECT_EQ(r.run_once(), 1u);
  EXPECT_EQ(r.pending_count(), 0u);
  EXPECT_TRUE(store.txlog.empty());
}

TEST_F(ResolverTest, NotCachedUntracksTheKey) {
  node.cached.lock_key(B("a")).mark("a", "cache0");
  store.marks["a"] = "cache0";
  queue(1, Decision::kCommit, "a");
  prop.commit_result = FinishOutcome::kNotCached;
  EXPECT_EQ(r.run_once(), 1u);
  EXPECT_EQ(node.cached.lock_key(B("a")).holder("a"), nullptr);
  EXPECT_FALSE(store.marks.count("a"));
}

TEST_F(ResolverTest, AFailedRecordDeleteKeepsTheDecisionPending) {
  queue(1, Decision::kCommit, "a");
  store.fail_txlog = true;
  EXPECT_EQ(r.run_once(), 0u);
  EXPECT_EQ(r.pending_count(), 1u);
  store.fail_txlog = false;
  EXPECT_EQ(r.run_once(), 1u);  // delivered again (harmless), then the record goes
  EXPECT_TRUE(store.txlog.empty());
}

TEST_F(ResolverTest, AnUnreachableNodeIsTriedOncePerRound) {
  queue(1, Decision::kCommit, "a");
  queue(2, Decision::kCommit, "b");
  queue(3, Decision::kCommit, "c");
  prop.commit_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(r.run_once(), 0u);
  EXPECT_EQ(prop.commit_txids.size(), 1u);  // every attempt could cost a full deadline
}

TEST_F(ResolverTest, SettleAttemptsOnlyTheKeysDecisions) {
  queue(1, Decision::kCommit, "a");
  queue(2, Decision::kAbort, "b");
  EXPECT_TRUE(r.has_pending("a"));
  {
    CachedKeys::Guard g = node.cached.lock_key(B("a"));
    EXPECT_TRUE(r.settle(g, "a"));
  }
  EXPECT_FALSE(r.has_pending("a"));
  EXPECT_TRUE(r.has_pending("b"));
  EXPECT_TRUE(prop.abort_txids.empty());
  {
    CachedKeys::Guard g = node.cached.lock_key(B("nothing"));
    EXPECT_TRUE(r.settle(g, "nothing"));
  }
  prop.abort_result = FinishOutcome::kUnreachable;
  CachedKeys::Guard g = node.cached.lock_key(B("b"));
  EXPECT_FALSE(r.settle(g, "b"));
}

TEST_F(ResolverTest, ATxidIsQueuedOnce) {
  queue(1, Decision::kAbort, "a");
  r.add(PendingDecision{1, Decision::kAbort, "cache0", "a"});
  EXPECT_EQ(r.pending_count(), 1u);
  r.add_recovered(PendingDecision{2, Decision::kCommit, "cache0", "a"});
  EXPECT_EQ(r.pending_count(), 2u);
  EXPECT_EQ(counter(node.resolver_counters, "txns_recovered"), 1u);
}

TEST_F(ResolverTest, ForgetDropsTheNodesDecisionsAndRecords) {
  queue(1, Decision::kCommit, "a", "cache0");
  queue(2, Decision::kAbort, "b", "cache0");
  queue(3, Decision::kCommit, "c", "cache1");
  EXPECT_EQ(r.forget("cache0"), 2u);
  EXPECT_EQ(r.pending_count(), 1u);
  EXPECT_EQ(gauge(), 1u);
  EXPECT_EQ(store.txlog.size(), 1u);
  EXPECT_EQ(store.txlog.count(txlog_key(3, Decision::kCommit)), 1u);
  EXPECT_EQ(r.forget("cache0"), 0u);
}

}  // namespace
}  // namespace exo::db
