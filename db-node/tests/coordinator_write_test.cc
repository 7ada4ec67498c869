// CachedWrite (coordinator/cached_write.h), the pure state machine of one write to a cached key:
// every state x every event against the table below, then the contents of the actions.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "coordinator/cached_write.h"
#include "coordinator_table.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;
using S = CachedWrite::State;

constexpr const char* kTxnPrepare = "txn-prepare[data put, requests put, txlog put C]*";
constexpr const char* kAbandon = "store-write[txlog put A], txn-rollback, queue Abort, reply ";
constexpr const char* kDeleteCommitRecord = "store-write[txlog del C, relaxed]";

// The written table: every transition there is. Any (state, event) pair not listed must be
// rejected: no action, no state change.
struct Row {
  S from;
  const char* event;
  S to;
  std::string actions;
};
const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      {S::kReceived, "arrived(none)", S::kPreparingLocally, kTxnPrepare},
      {S::kReceived, "arrived(pending)", S::kSettling, "settle*"},
      {S::kSettling, "settled(undelivered)", S::kRefused, "reply BUSY"},
      {S::kSettling, "settled(delivered)", S::kPreparingLocally, kTxnPrepare},
      {S::kSettling, "settled(untracked)", S::kUncached, "go-uncached"},
      {S::kPreparingLocally, "local_prepared(ok)", S::kPrepareSent, "send-prepare*"},
      {S::kPreparingLocally, "local_prepared(begin failed)", S::kRefused, "reply ERROR"},
      {S::kPreparingLocally, "local_prepared(failed)", S::kRefused, "txn-rollback, reply ERROR"},
      {S::kPrepareSent, "prepare_replied(prepared)", S::kCommittingPrepared, "txn-commit*"},
      {S::kPrepareSent, "prepare_replied(not cached)", S::kCommittingNotCached, "txn-commit*"},
      {S::kPrepareSent, "prepare_replied(failed)", S::kAborted, std::string(kAbandon) + "BUSY"},
      {S::kCommittingPrepared, "local_committed(ok)", S::kCommitSent,
       "record-applied, send-commit*"},
      {S::kCommittingPrepared, "local_committed(failed)", S::kAborted,
       std::string(kAbandon) + "ERROR"},
      {S::kCommittingNotCached, "local_committed(ok)", S::kDone,
       std::string("record-applied, unmark, ") + kDeleteCommitRecord + ", reply OK"},
      {S::kCommittingNotCached, "local_committed(failed)", S::kRefused,
       "txn-rollback, reply ERROR"},
      {S::kCommitSent, "finish_replied(done)", S::kDone,
       std::string("count writes_propagated, ") + kDeleteCommitRecord + ", reply OK"},
      {S::kCommitSent, "finish_replied(not cached)", S::kDone,
       std::string("unmark, ") + kDeleteCommitRecord + ", reply OK"},
      {S::kCommitSent, "finish_replied(refused)", S::kDone,
       std::string(kDeleteCommitRecord) + ", reply OK"},
      {S::kCommitSent, "finish_replied(unreachable)", S::kDeferred,
       "count commits_deferred, queue Commit, reply OK"},
  };
  return rows;
}

// How each state is reached from a fresh machine.
const std::map<S, std::vector<const char*>>& paths() {
  static const std::map<S, std::vector<const char*>> p = {
      {S::kReceived, {}},
      {S::kSettling, {"arrived(pending)"}},
      {S::kPreparingLocally, {"arrived(none)"}},
      {S::kPrepareSent, {"arrived(none)", "local_prepared(ok)"}},
      {S::kCommittingPrepared, {"arrived(none)", "local_prepared(ok)", "prepare_replied(prepared)"}},
      {S::kCommittingNotCached,
       {"arrived(none)", "local_prepared(ok)", "prepare_replied(not cached)"}},
      {S::kCommitSent,
       {"arrived(none)", "local_prepared(ok)", "prepare_replied(prepared)", "local_committed(ok)"}},
      {S::kDone,
       {"arrived(none)", "local_prepared(ok)", "prepare_replied(prepared)", "local_committed(ok)",
        "finish_replied(done)"}},
      {S::kDeferred,
       {"arrived(none)", "local_prepared(ok)", "prepare_replied(prepared)", "local_committed(ok)",
        "finish_replied(unreachable)"}},
      {S::kAborted, {"arrived(none)", "local_prepared(ok)", "prepare_replied(failed)"}},
      {S::kRefused, {"arrived(pending)", "settled(undelivered)"}},
      {S::kUncached, {"arrived(pending)", "settled(untracked)"}},
  };
  return p;
}

struct Fixture {
  std::string key = "k", value = "v", node = "cache0", dedup_key = "dk", dedup_value = "dv";
  CachedWrite::Request request(uint64_t txid = 42, bool is_delete = false) const {
    CachedWrite::Request r;
    r.txid = txid;
    r.is_delete = is_delete;
    r.key = bytes_of(key);
    r.value = is_delete ? Bytes{} : bytes_of(value);
    r.cache_node = node;
    r.dedup_key = bytes_of(dedup_key);
    r.dedup_value = bytes_of(dedup_value);
    return r;
  }
};

void drive(CachedWrite& w, S target) {
  for (const char* e : paths().at(target)) {
    const ActionList a = w.on(event_named(e));
    ASSERT_FALSE(a.empty()) << name(target) << ": path step " << e << " rejected";
  }
  ASSERT_EQ(w.state(), target) << name(w.state());
  ASSERT_EQ(w.rejected(), 0u);
}

TEST(CachedWriteTable, EveryStateTimesEveryEventIsAsWritten) {
  std::map<std::pair<S, std::string>, const Row*> rows;
  for (const Row& r : table()) {
    const bool fresh = rows.emplace(std::make_pair(r.from, std::string(r.event)), &r).second;
    EXPECT_TRUE(fresh) << "table lists " << name(r.from) << " x " << r.event << " twice";
  }
  // Every state but the two only a replicating write reaches (the rf > 1 table below).
  ASSERT_EQ(paths().size(), CachedWrite::kNumStates - 2);
  Fixture f;
  size_t pairs = 0, used = 0;
  for (const auto& [state, path] : paths()) {
    for (const EventCase& ev : all_events()) {
      SCOPED_TRACE(std::string(name(state)) + " x " + ev.name);
      CachedWrite w(f.request());
      drive(w, state);
      const ActionList got = w.on(ev.event);
      ++pairs;
      EXPECT_FALSE(got.overflowed());
      auto it = rows.find({state, ev.name});
      if (it == rows.end()) {
        EXPECT_TRUE(got.empty()) << describe(got);
        EXPECT_EQ(w.state(), state) << name(w.state());
        EXPECT_EQ(w.rejected(), 1u);
        continue;
      }
      ++used;
      EXPECT_EQ(w.state(), it->second->to) << name(w.state());
      EXPECT_EQ(describe(got), it->second->actions);
      EXPECT_EQ(w.rejected(), 0u);
      // Finished exactly in the terminal states, and a machine that waits has said what for.
      EXPECT_EQ(w.finished(), it->second->to >= S::kDone);
      EXPECT_EQ(got.awaited() != nullptr, !w.finished());
    }
  }
  EXPECT_EQ(pairs, (CachedWrite::kNumStates - 2) * all_events().size());
  EXPECT_EQ(used, table().size());  // every row was reachable and checked
}

// Replication factor > 1 (docs/design/replication.md 3.4): the rows that differ from the table
// above, and the two states only a replicating write reaches. Every other row is the same.
const std::vector<Row>& replicated_table() {
  static const std::vector<Row> rows = {
      {S::kPrepareSent, "prepare_replied(prepared)", S::kReplicating, "replicate*"},
      {S::kPrepareSent, "prepare_replied(not cached)", S::kReplicating, "replicate*"},
      {S::kReplicating, "chain_replied(acked)", S::kCommittingPrepared, "txn-commit*"},
      {S::kReplicating, "chain_replied(uncertain)", S::kDeferredReplication, "defer-replication"},
  };
  return rows;
}

TEST(CachedWriteTable, AReplicatingWriteGoesDownTheChainBeforeTheDecision) {
  Fixture f;
  CachedWrite::Request r = f.request();
  r.replicate = true;
  for (const Row& row : replicated_table()) {
    SCOPED_TRACE(std::string(name(row.from)) + " x " + row.event);
    CachedWrite w(r);
    std::vector<const char*> path = {"arrived(none)", "local_prepared(ok)"};
    if (row.from == S::kReplicating) path.push_back("prepare_replied(prepared)");
    for (const char* e : path) ASSERT_FALSE(w.on(event_named(e)).empty()) << e;
    ASSERT_EQ(w.state(), row.from);
    EXPECT_EQ(describe(w.on(event_named(row.event))), row.actions);
    EXPECT_EQ(w.state(), row.to) << name(w.state());
    EXPECT_EQ(w.rejected(), 0u);
  }
  // In replicating, every other event is rejected; deferred-replication is final and silent:
  // no reply (nothing is known) and no Abort (a member may have the write).
  for (const EventCase& ev : all_events()) {
    if (ev.event.kind == On::kChainReplied) continue;
    CachedWrite w(r);
    for (const char* e : {"arrived(none)", "local_prepared(ok)", "prepare_replied(prepared)"})
      ASSERT_FALSE(w.on(event_named(e)).empty());
    EXPECT_TRUE(w.on(ev.event).empty()) << ev.name;
    EXPECT_EQ(w.state(), S::kReplicating);
  }
  CachedWrite w(r);
  for (const char* e : {"arrived(none)", "local_prepared(ok)", "prepare_replied(not cached)",
                        "chain_replied(acked)"})
    ASSERT_FALSE(w.on(event_named(e)).empty()) << e;
  EXPECT_EQ(w.state(), S::kCommittingNotCached);  // the cache node's answer is remembered
  EXPECT_TRUE(w.finished() == false);
  CachedWrite d(r);
  for (const char* e : {"arrived(none)", "local_prepared(ok)", "prepare_replied(prepared)",
                        "chain_replied(uncertain)"})
    ASSERT_FALSE(d.on(event_named(e)).empty()) << e;
  EXPECT_TRUE(d.finished());
  for (const EventCase& ev : all_events()) EXPECT_TRUE(d.on(ev.event).empty()) << ev.name;
}

// Every reply in the table, by the state it ends in: OK only after the local commit, BUSY and
// ERROR only when it did not happen.
TEST(CachedWriteTable, RepliesMatchTheStatesTheyEndIn) {
  for (const Row& r : table()) {
    const bool ok = r.actions.find("reply OK") != std::string::npos;
    const bool refused = r.actions.find("reply BUSY") != std::string::npos ||
                         r.actions.find("reply ERROR") != std::string::npos;
    const bool acked_state = r.to == S::kDone || r.to == S::kDeferred;
    const bool refused_state = r.to == S::kAborted || r.to == S::kRefused;
    EXPECT_EQ(ok, acked_state) << name(r.from) << " x " << r.event;
    EXPECT_EQ(refused, refused_state) << name(r.from) << " x " << r.event;
    if (ok) {
      EXPECT_TRUE(r.from == S::kCommittingNotCached || r.from == S::kCommitSent)
          << "OK without a local commit: " << name(r.from);
    }
  }
}

TEST(CachedWrite, TheTransactionHoldsDataDedupRecordAndCommitRecord) {
  Fixture f;
  CachedWrite w(f.request(42));
  const ActionList a = w.on(Event::arrived(false));
  ASSERT_EQ(a.size(), 1u);
  const Action& t = a[0];
  EXPECT_EQ(t.kind, Act::kTxnPrepare);
  EXPECT_EQ(t.txid, 42u);
  ASSERT_EQ(t.n_ops, 3);
  EXPECT_EQ(sv_of(t.ops[0].key), "k");
  EXPECT_EQ(sv_of(t.ops[0].value), "v");
  EXPECT_EQ(sv_of(t.ops[1].key), "dk");
  EXPECT_EQ(sv_of(t.ops[1].value), "dv");
  EXPECT_EQ(sv_of(t.ops[2].key), txlog_key(42, Decision::kCommit));
  std::string node, key;
  ASSERT_TRUE(decode_txlog_value(sv_of(t.ops[2].value), &node, &key));
  EXPECT_EQ(node, "cache0");
  EXPECT_EQ(key, "k");
}

TEST(CachedWrite, ADeleteIsPreparedAndSentAsADelete) {
  Fixture f;
  CachedWrite w(f.request(7, /*is_delete=*/true));
  const ActionList a = w.on(Event::arrived(false));
  EXPECT_TRUE(a[0].ops[0].is_delete);
  EXPECT_EQ(a[0].ops[0].cf, Cf::kData);
  const ActionList p = w.on(Event::local_prepared(LocalPrepare::kOk));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].kind, Act::kSendPrepare);
  EXPECT_TRUE(p[0].is_delete);
  EXPECT_TRUE(p[0].value.empty());
  EXPECT_EQ(p[0].txid, 7u);
  EXPECT_EQ(p[0].cache_node, "cache0");
  EXPECT_EQ(p[0].key, "k");
}

TEST(CachedWrite, TheAbortRecordIsDurableAndNamesTheCacheNode) {
  Fixture f;
  CachedWrite w(f.request(9));
  w.on(Event::arrived(false));
  w.on(Event::local_prepared(LocalPrepare::kOk));
  const ActionList a = w.on(Event::prepare_replied(PrepareOutcome::kFailed));
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0].durability, Durability::kAsConfigured);  // must survive a crash
  EXPECT_EQ(sv_of(a[0].ops[0].key), txlog_key(9, Decision::kAbort));
  std::string node, key;
  ASSERT_TRUE(decode_txlog_value(sv_of(a[0].ops[0].value), &node, &key));
  EXPECT_EQ(node, "cache0");
  EXPECT_EQ(key, "k");
  EXPECT_EQ(a[2].txid, 9u);
  EXPECT_EQ(a[2].cache_node, "cache0");
  EXPECT_EQ(a[2].key, "k");
}

TEST(CachedWrite, ADeferredCommitNamesTxidNodeAndKey) {
  Fixture f;
  CachedWrite w(f.request(11));
  drive(w, S::kCommitSent);
  const ActionList a = w.on(Event::finish_replied(FinishOutcome::kUnreachable));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[1].kind, Act::kQueueDecision);
  EXPECT_EQ(a[1].decision, Decision::kCommit);
  EXPECT_EQ(a[1].txid, 11u);
  EXPECT_EQ(a[1].cache_node, "cache0");
  EXPECT_EQ(a[1].key, "k");
}

TEST(CachedWrite, ACacheNodeNameTooLongForTheTxlogIsAnErrorBeforeAnyTransaction) {
  Fixture f;
  f.node = std::string(256, 'n');
  CachedWrite w(f.request());
  EXPECT_EQ(describe(w.on(Event::arrived(false))), "reply ERROR");
  EXPECT_EQ(w.state(), S::kRefused);
  CachedWrite settling(f.request());
  settling.on(Event::arrived(true));
  EXPECT_EQ(describe(settling.on(Event::settled(Settle::kDelivered))), "reply ERROR");
}

TEST(CachedWrite, UnknownResultCodesAreRejected) {
  Fixture f;
  const std::pair<S, On> cases[] = {{S::kSettling, On::kSettled},
                                    {S::kPreparingLocally, On::kLocalPrepared},
                                    {S::kPrepareSent, On::kPrepareReplied},
                                    {S::kCommitSent, On::kFinishReplied}};
  for (const auto& [state, kind] : cases) {
    CachedWrite w(f.request());
    drive(w, state);
    EXPECT_TRUE(w.on(Event{kind, 77}).empty()) << name(state);
    EXPECT_EQ(w.state(), state);
    EXPECT_EQ(w.rejected(), 1u);
  }
}

}  // namespace
}  // namespace exo::db
