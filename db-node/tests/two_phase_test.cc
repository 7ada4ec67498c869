// Writes to cached keys: the outcome of every step of the two-phase write (write_cached.cc,
// docs/two-phase-commit.md) with the fake store and propagator. The invariant checked
// throughout: OK means applied and durable, BUSY and ERROR mean definitely not applied, and
// every decision the cache node may be waiting for is either delivered or held by the resolver
// (and its txlog record).
#include <gtest/gtest.h>

#include "handler_fixture.h"
#include "records.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;

class TwoPhaseTest : public HandlerTest {
 protected:
  void SetUp() override {
    store.data[key] = "old";
    mark(key);
  }
  std::vector<std::string> txlog_keys() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : store.txlog) {
      uint64_t txid = 0;
      Decision d;
      EXPECT_TRUE(parse_txlog_key(k, &txid, &d));
      out.push_back(std::string(to_string(d)) + " " + std::to_string(txid));
    }
    return out;
  }
  uint64_t last_txid() const { return prop.txids.empty() ? 0 : prop.txids.back(); }
  // The status recorded for the only request id of the test (-1 if none or several).
  int recorded_status() const {
    DedupRecord r;
    if (store.requests.size() != 1 || !decode_dedup(store.requests.begin()->second, &r)) return -1;
    return r.status;
  }
};

TEST_F(TwoPhaseTest, PrepareFailureRollsBackAndQueuesADurableAbort) {
  prop.prepare_result = PrepareOutcome::kFailed;
  prop.abort_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kPut, key, "new", 1)).status, wire::kBusy);
  EXPECT_EQ(store.data.at(key), "old");  // nothing written
  EXPECT_EQ(recorded_status(), wire::kBusy);  // a late copy of this id must not apply it
  EXPECT_TRUE(store.prepared.empty());   // rolled back, not left in the "WAL"
  const auto pending = resolver.pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].decision, Decision::kAbort);
  EXPECT_EQ(pending[0].txid, last_txid());
  EXPECT_EQ(pending[0].cache_node, "cache0");
  EXPECT_EQ(pending[0].key, key);
  // The abort record is durable, so a restart before delivery still sends the Abort.
  EXPECT_EQ(txlog_keys(), (std::vector<std::string>{"Abort " + std::to_string(last_txid())}));
  std::string node, k;
  ASSERT_TRUE(decode_txlog_value(store.txlog.begin()->second, &node, &k));
  EXPECT_EQ(node, "cache0");
  EXPECT_EQ(k, key);
  // The key stays tracked: the cache node still holds it.
  EXPECT_NE(cached.lock_key(B(key)).holder(key), nullptr);
}

TEST_F(TwoPhaseTest, CommitRpcFailureIsOkDurableAndTheResolverHasTheCommit) {
  prop.commit_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kPut, key, "new", 1)).status, wire::kOk);
  EXPECT_EQ(store.data.at(key), "new");
  EXPECT_EQ(store.requests.size(), 1u);  // applied, so a resend must not apply it again
  const auto pending = resolver.pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].decision, Decision::kCommit);
  EXPECT_EQ(pending[0].txid, last_txid());
  EXPECT_EQ(txlog_keys(), (std::vector<std::string>{"Commit " + std::to_string(last_txid())}));
  EXPECT_EQ(counter(c, "commits_deferred"), 1u);

  // The cache node answers again: the resolver delivers the same txid and tidies up.
  prop.commit_result = FinishOutcome::kDone;
  EXPECT_EQ(resolver.run_once(), 1u);
  EXPECT_EQ(prop.commit_txids, (std::vector<uint64_t>{last_txid(), last_txid()}));
  EXPECT_EQ(resolver.pending_count(), 0u);
  EXPECT_TRUE(store.txlog.empty());
  EXPECT_EQ(counter(node.resolver_counters, "resolver_resolved"), 1u);
  EXPECT_EQ(counter(node.resolver_counters, "resolver_pending"), 0u);
}

// ERROR must always mean "definitely not applied": a failed RocksDB commit is rolled back and
// the cache node, which prepared, gets an Abort.
TEST_F(TwoPhaseTest, StoreCommitFailureIsErrorNotAppliedAndAbortQueued) {
  store.fail_commit = true;
  prop.abort_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kPut, key, "new", 1)).status, wire::kError);
  EXPECT_EQ(store.data.at(key), "old");
  EXPECT_EQ(recorded_status(), wire::kError);
  const auto pending = resolver.pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].decision, Decision::kAbort);
  EXPECT_EQ(pending[0].txid, last_txid());
  EXPECT_EQ(txlog_keys(), (std::vector<std::string>{"Abort " + std::to_string(last_txid())}));
  EXPECT_EQ(counter(c, "errors"), 1u);
}

TEST_F(TwoPhaseTest, StoreCommitFailureWithAnImmediateAbortLeavesNothingPending) {
  store.fail_commit = true;
  EXPECT_EQ(send(request(wire::kPut, key, "new", 1)).status, wire::kError);
  // The Abort is left to the resolver (never sent under the failed write's reply path).
  EXPECT_TRUE(prop.abort_txids.empty());
  EXPECT_EQ(resolver.run_once(), 1u);
  EXPECT_EQ(prop.abort_txids, (std::vector<uint64_t>{last_txid()}));
  EXPECT_TRUE(store.txlog.empty());
}

TEST_F(TwoPhaseTest, LocalPrepareFailureIsErrorAndTheCacheNodeIsNeverAsked) {
  store.fail_prepare = true;
  EXPECT_EQ(send(request(wire::kPut, key, "new", 1)).status, wire::kError);
  EXPECT_TRUE(prop.txids.empty());
  EXPECT_EQ(store.data.at(key), "old");
  EXPECT_TRUE(store.txlog.empty());
  EXPECT_EQ(resolver.pending_count(), 0u);
}

TEST_F(TwoPhaseTest, BeginFailureIsError) {
  store.fail_begin = true;
  EXPECT_EQ(send(request(wire::kPut, key, "new", 1)).status, wire::kError);
  EXPECT_TRUE(prop.txids.empty());
  EXPECT_EQ(store.data.at(key), "old");
}

TEST_F(TwoPhaseTest, RefusedCommitIsStillOkAndNothingIsLeftToResolve) {
  prop.commit_result = FinishOutcome::kRefused;  // e.g. the cache node restarted meanwhile
  EXPECT_EQ(send(request(wire::kPut, key, "new", 1)).status, wire::kOk);
  EXPECT_EQ(store.data.at(key), "new");
  EXPECT_EQ(resolver.pending_count(), 0u);
  EXPECT_TRUE(store.txlog.empty());
}

TEST_F(TwoPhaseTest, CommitAnsweredNotCachedUntracksTheKey) {
  prop.commit_result = FinishOutcome::kNotCached;  // evicted between Prepare and Commit
  EXPECT_EQ(send(request(wire::kPut, key, "new", 1)).status, wire::kOk);
  EXPECT_EQ(cached.lock_key(B(key)).holder(key), nullptr);
  EXPECT_FALSE(store.marks.count(key));
  EXPECT_TRUE(store.txlog.empty());
}

// A decision still undelivered for the key: the next write first tries to deliver it (the
// cache node would refuse a Prepare while the earlier txid is pending there).
TEST_F(TwoPhaseTest, NextWriteDeliversTheUndeliveredDecisionFirst) {
  prop.commit_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kPut, key, "one", 1)).status, wire::kOk);
  const uint64_t first = last_txid();
  prop.commit_result = FinishOutcome::kDone;
  const size_t before = log.events().size();
  EXPECT_EQ(send(request(wire::kPut, key, "two", 2)).status, wire::kOk);
  ASSERT_EQ(prop.commit_txids.size(), 3u);
  EXPECT_EQ(prop.commit_txids[1], first);
  EXPECT_GT(prop.commit_txids[2], first);
  const auto ev = log.events();
  ASSERT_GT(ev.size(), before + 1);
  EXPECT_EQ(ev[before], "commit cache0 " + key);  // delivered before the second write began
  EXPECT_EQ(ev[before + 1], "put " + key + "=two");
  EXPECT_EQ(store.data.at(key), "two");
  EXPECT_EQ(resolver.pending_count(), 0u);
  EXPECT_TRUE(store.txlog.empty());
}

TEST_F(TwoPhaseTest, NextWriteIsBusyWhileTheEarlierDecisionCannotBeDelivered) {
  prop.prepare_result = PrepareOutcome::kFailed;
  prop.abort_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kPut, key, "one", 1)).status, wire::kBusy);
  prop.prepare_result = PrepareOutcome::kPrepared;
  const size_t prepares = prop.txids.size();
  EXPECT_EQ(send(request(wire::kPut, key, "two", 2)).status, wire::kBusy);
  EXPECT_EQ(prop.txids.size(), prepares);  // no new Prepare: nothing written, nothing sent
  EXPECT_EQ(store.data.at(key), "old");
  EXPECT_EQ(resolver.pending_count(), 1u);  // still the first write's Abort, not a second one
  EXPECT_EQ(counter(c, "busy_writes"), 2u);
  // The cache node is back: the retry goes through.
  prop.abort_result = FinishOutcome::kDone;
  EXPECT_EQ(send(request(wire::kPut, key, "two", 3)).status, wire::kOk);
  EXPECT_EQ(store.data.at(key), "two");
}

// Untracked (the cache node dropped it and sent Evict): nothing at the cache node can serve the
// key from a pending write any more, so an old undelivered Abort does not hold the write up.
TEST_F(TwoPhaseTest, AnUntrackedKeyIsWrittenWithoutSettlingOldDecisions) {
  prop.prepare_result = PrepareOutcome::kFailed;
  prop.abort_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kPut, key, "one", 1)).status, wire::kBusy);
  cached.lock_key(B(key)).unmark(key, "cache0");
  const size_t aborts = prop.abort_txids.size();
  EXPECT_EQ(send(request(wire::kPut, key, "two", 2)).status, wire::kOk);
  EXPECT_EQ(prop.abort_txids.size(), aborts);
  EXPECT_EQ(store.data.at(key), "two");
  EXPECT_EQ(resolver.pending_count(), 1u);  // still delivered in the background
}

// Settling first gets cached=false: the cache node no longer holds the key, which is
// untracked, and the write goes the uncached way (no Prepare).
TEST_F(TwoPhaseTest, SettlingAnsweredNotCachedMakesTheWriteAnUncachedOne) {
  prop.commit_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kPut, key, "one", 1)).status, wire::kOk);
  prop.commit_result = FinishOutcome::kNotCached;
  const size_t before = log.events().size();
  EXPECT_EQ(send(request(wire::kPut, key, "two", 2)).status, wire::kOk);
  const auto ev = log.events();
  EXPECT_EQ(std::vector<std::string>(ev.begin() + static_cast<std::ptrdiff_t>(before), ev.end()),
            (std::vector<std::string>{"commit cache0 " + key, "put " + key + "=two"}));
  EXPECT_EQ(cached.lock_key(B(key)).holder(key), nullptr);
  EXPECT_EQ(resolver.pending_count(), 0u);
}

TEST_F(TwoPhaseTest, TheWriteIsInvisibleUntilTheLocalCommit) {
  // Readers must see the old value while the cache node is being prepared: the write may
  // still be aborted. The fake propagator reads the store from inside Prepare.
  struct Peeking : FakePropagator {
    FakeStore* s = nullptr;
    std::string seen;
    using FakePropagator::FakePropagator;
    PrepareOutcome prepare(const std::string& n, std::span<const uint8_t> k, uint64_t t, bool d,
                           std::span<const uint8_t> v) override {
      s->get(k, &seen);
      return FakePropagator::prepare(n, k, t, d, v);
    }
  } peek{nullptr};
  peek.s = &store;
  NodeContext pctx{cluster, 0, store, cached, peek, node.txids, node.dedup, resolver, nullptr};
  Counters pc;
  RequestHandler ph(pctx, pc);
  ph.handle(request(wire::kPut, key, "new", 1), out);
  EXPECT_EQ(peek.seen, "old");
  EXPECT_EQ(store.data.at(key), "new");
}

TEST_F(TwoPhaseTest, TxlogAndDedupRecordsCommitWithTheData) {
  prop.commit_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kDelete, key, "", 9)).status, wire::kOk);
  EXPECT_FALSE(store.data.count(key));
  ASSERT_EQ(store.requests.size(), 1u);
  RequestId id;
  ASSERT_TRUE(parse_request_key(store.requests.begin()->first, &id));
  EXPECT_EQ(id, (RequestId{0xC0FFEE, 9}));
  DedupRecord rec;
  ASSERT_TRUE(decode_dedup(store.requests.begin()->second, &rec));
  EXPECT_EQ(rec.status, wire::kOk);
  EXPECT_EQ(rec.recorded_ms, now_ms);
  EXPECT_EQ(txlog_keys(), (std::vector<std::string>{"Commit " + std::to_string(last_txid())}));
}

}  // namespace
}  // namespace exo::db
