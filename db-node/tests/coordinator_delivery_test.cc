// Delivery (coordinator/delivery.h), the pure state machine of one undelivered decision: every
// state x every event against the table below; then the DecisionBook and a resolver Round.
#include <gtest/gtest.h>

#include <map>

#include "coordinator/decision_book.h"
#include "coordinator/delivery.h"
#include "coordinator_table.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;
using S = Delivery::State;

constexpr const char* kDeleteRecord = "store-write[txlog del C, relaxed]";

// The written table for a Commit decision; any pair not listed must be rejected.
struct Row {
  S from;
  const char* event;
  S to;
  std::string actions;
  bool unreachable = false;
};
const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      {S::kQueued, "attempt", S::kSent, "send-commit*"},
      {S::kQueued, "forget", S::kDropped, kDeleteRecord},
      {S::kSent, "finish_replied(done)", S::kTidying, std::string(kDeleteRecord) + "*"},
      {S::kSent, "finish_replied(refused)", S::kTidying, std::string(kDeleteRecord) + "*"},
      {S::kSent, "finish_replied(not cached)", S::kTidying,
       std::string("unmark, ") + kDeleteRecord + "*"},
      {S::kSent, "finish_replied(unreachable)", S::kQueued, "", true},
      {S::kTidying, "txlog_deleted(ok)", S::kDelivered, "resolved"},
      {S::kTidying, "txlog_deleted(failed)", S::kQueued, ""},
  };
  return rows;
}

const std::map<S, std::vector<const char*>>& paths() {
  static const std::map<S, std::vector<const char*>> p = {
      {S::kQueued, {}},
      {S::kSent, {"attempt"}},
      {S::kTidying, {"attempt", "finish_replied(done)"}},
      {S::kDelivered, {"attempt", "finish_replied(done)", "txlog_deleted(ok)"}},
      {S::kDropped, {"forget"}},
  };
  return p;
}

void drive(Delivery& d, S target) {
  for (const char* e : paths().at(target)) d.on(event_named(e));
  ASSERT_EQ(d.state(), target) << name(d.state());
  ASSERT_EQ(d.rejected(), 0u);
}

const PendingDecision kCommit{5, Decision::kCommit, "cache0", "k"};
const PendingDecision kAbort{6, Decision::kAbort, "cache0", "k"};

TEST(DeliveryTable, EveryStateTimesEveryEventIsAsWritten) {
  std::map<std::pair<S, std::string>, const Row*> rows;
  for (const Row& r : table())
    EXPECT_TRUE(rows.emplace(std::make_pair(r.from, std::string(r.event)), &r).second);
  ASSERT_EQ(paths().size(), Delivery::kNumStates);
  size_t pairs = 0, used = 0;
  for (const auto& [state, path] : paths()) {
    for (const EventCase& ev : all_events()) {
      SCOPED_TRACE(std::string(name(state)) + " x " + ev.name);
      Delivery d(kCommit);
      drive(d, state);
      const ActionList got = d.on(ev.event);
      ++pairs;
      auto it = rows.find({state, ev.name});
      if (it == rows.end()) {
        EXPECT_TRUE(got.empty()) << describe(got);
        EXPECT_EQ(d.state(), state);
        EXPECT_EQ(d.rejected(), 1u);
        continue;
      }
      ++used;
      EXPECT_EQ(d.state(), it->second->to) << name(d.state());
      EXPECT_EQ(describe(got), it->second->actions);
      EXPECT_EQ(d.unreachable(), it->second->unreachable);
      EXPECT_EQ(d.rejected(), 0u);
      EXPECT_EQ(d.finished(), it->second->to >= S::kDelivered);
    }
  }
  EXPECT_EQ(pairs, Delivery::kNumStates * all_events().size());
  EXPECT_EQ(used, table().size());
}

TEST(Delivery, AnAbortIsSentAsAnAbortAndDeletesItsOwnRecord) {
  Delivery d(kAbort);
  const ActionList a = d.on(Event::attempt());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, Act::kSendAbort);
  EXPECT_EQ(a[0].txid, 6u);
  EXPECT_EQ(a[0].cache_node, "cache0");
  EXPECT_EQ(a[0].key, "k");
  const ActionList t = d.on(Event::finish_replied(FinishOutcome::kDone));
  EXPECT_EQ(describe(t), "store-write[txlog del A, relaxed]*");
  EXPECT_EQ(sv_of(t[0].ops[0].key), txlog_key(6, Decision::kAbort));
}

TEST(Delivery, AnUnreachableNodeCanBeAttemptedAgain) {
  Delivery d(kCommit);
  d.on(Event::attempt());
  d.on(Event::finish_replied(FinishOutcome::kUnreachable));
  EXPECT_TRUE(d.unreachable());
  EXPECT_EQ(describe(d.on(Event::attempt())), "send-commit*");
  EXPECT_FALSE(d.unreachable());
}

TEST(DecisionBook, ATxidIsAddedOnceAndRemovedOnce) {
  DecisionBook b;
  EXPECT_TRUE(b.add(kCommit));
  EXPECT_FALSE(b.add(kCommit));
  EXPECT_TRUE(b.add(kAbort));  // another txid of the same key
  EXPECT_EQ(b.size(), 2u);
  EXPECT_TRUE(b.has("k"));
  EXPECT_FALSE(b.has("x"));
  EXPECT_TRUE(b.contains("k", 5));
  EXPECT_FALSE(b.contains("k", 7));
  EXPECT_EQ(b.for_key("k").size(), 2u);
  EXPECT_TRUE(b.remove("k", 5));
  EXPECT_FALSE(b.remove("k", 5));
  EXPECT_TRUE(b.remove("k", 6));
  EXPECT_FALSE(b.has("k"));
  EXPECT_EQ(b.size(), 0u);
}

TEST(DecisionBook, ForgetTakesOutOneCacheNodesDecisions) {
  DecisionBook b;
  b.add({1, Decision::kCommit, "cache0", "a"});
  b.add({2, Decision::kAbort, "cache0", "b"});
  b.add({3, Decision::kCommit, "cache1", "a"});
  const auto dropped = b.forget("cache0");
  EXPECT_EQ(dropped.size(), 2u);
  EXPECT_EQ(b.size(), 1u);
  EXPECT_TRUE(b.contains("a", 3));
  EXPECT_FALSE(b.has("b"));
  EXPECT_TRUE(b.forget("cache0").empty());
}

TEST(Round, SkipsACacheNodeOnceItWasUnreachable) {
  Round r({{1, Decision::kCommit, "cache0", "a"},
           {2, Decision::kCommit, "cache1", "b"},
           {3, Decision::kCommit, "cache0", "c"},
           {4, Decision::kAbort, "cache1", "d"}});
  const PendingDecision* d = r.next();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->txid, 1u);
  r.unreachable("cache0");
  d = r.next();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->txid, 2u);
  d = r.next();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->txid, 4u);  // 3 skipped: cache0 is down this round
  EXPECT_EQ(r.next(), nullptr);
}

}  // namespace
}  // namespace exo::db
