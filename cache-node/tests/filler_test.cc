// Filler against a fake Peers and a hand-driven clock: run_round()/retire_once() step by step,
// plus one test of the real threads.
#include <gtest/gtest.h>

#include <cmath>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "fake_peers.h"
#include "fill/filler.h"

namespace {

using namespace exo::cache;
using exo::KeyRate;
using exo::steady_ms;
using exo::cache::testing::FakePeers;
using exo::cache::testing::KR;

class FillerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto k : {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"})
      peers_.data[k] = "v-" + std::string(k);
  }
  static FillerOptions options(size_t capacity) {
    FillerOptions o;
    o.capacity = capacity;
    o.max_kv_bytes = 1400;
    o.cfg.min_rate = 1;
    o.cfg.hysteresis = 0.1;
    o.cfg.hit_ewma_alpha = 0.3;
    o.cfg.report_ttl_ms = 3000;
    o.cfg.max_fetch_batch = 256;
    o.cfg.interval_ms = 100;
    return o;
  }
  // A filler for `capacity` keys over a map of 2x capacity, as in main.cc.
  void make(size_t capacity, FillerOptions o) {
    o.capacity = capacity;
    state_ptr_ = std::make_unique<CacheState>(map_capacity_for(capacity));
    peers_.state = state_ptr_.get();
    filler_ = std::make_unique<Filler>(o, *state_ptr_, peers_, hot_, cp_, [this] { return now_; });
  }
  void make(size_t capacity) { make(capacity, options(capacity)); }
  CacheState& st() { return *state_ptr_; }
  void round(const KR& report) {
    if (!report.empty()) hot_.report("db0", report, now_);
    filler_->run_round();
    now_ += 100;
  }
  bool retiring(const std::string& k) {  // on its way out: waiting for, or in, rule removal
    std::lock_guard lock(st().mu);
    return st().keys.rule(k) != RulePhase::kNone;
  }
  size_t held() {  // in the map and not on its way out
    std::lock_guard lock(st().mu);
    size_t n = 0;
    st().map.for_each([&](const LruMap::Entry& e) { n += st().keys.rule(e.key) == RulePhase::kNone; });
    return n;
  }

  std::unique_ptr<CacheState> state_ptr_;  // built by make(): its size depends on the capacity
  FakePeers peers_;
  HotList hot_{3000};
  CpCounters cp_;
  uint64_t now_ = 1'000'000;
  std::unique_ptr<Filler> filler_;
};

TEST_F(FillerTest, ReportedKeysAreFetchedInsertedThenRuledHottestFirst) {
  make(10);
  round({{"a", 50}, {"b", 100}, {"c", 20}, {"zz", 0.5}});  // zz is below min_rate
  EXPECT_EQ(peers_.log, (std::vector<std::string>{"fetch b a c", "add b a c"}));
  ASSERT_EQ(peers_.adds.size(), 1u);
  EXPECT_EQ(peers_.adds[0], (KR{{"b", 100}, {"a", 50}, {"c", 20}})) << "rates go with the rules";
  EXPECT_EQ(peers_.add_no_wait, std::vector<bool>{true});
  EXPECT_EQ(st().map.find("b")->value, "v-b");
  EXPECT_EQ(st().map.size(), 3u);
  EXPECT_EQ(st().keys.fetching_count(), 0u);
  EXPECT_EQ(cp_.fill_rounds.load(), 1u);
  EXPECT_EQ(cp_.fill_admitted.load(), 3u);
  // Held keys are not fetched again.
  round({{"a", 50}, {"b", 100}, {"c", 20}});
  EXPECT_EQ(peers_.log.size(), 2u);
}

TEST_F(FillerTest, AdmissionsStayWithinTheNodesShareOfTheRuleBudget) {
  // 20 rule changes/s (R = 40 over 2 cache nodes), one second of burst: 10 keys into free room
  // cost 10, then each replacement 2 (add + the victim's delete), one per 100 ms round.
  FillerOptions o = options(10);
  o.rule_changes_per_s = 20;
  make(10, o);
  peers_.data.clear();
  KR report;
  for (int i = 0; i < 30; ++i) {
    const std::string k = "k" + std::to_string(100 + i);
    peers_.data[k] = "v";
    report.push_back({k, 1000.0 - i});
  }
  round(report);
  EXPECT_EQ(held(), 10u);
  EXPECT_EQ(peers_.adds.back().front().key, "k100");
  // Now full, 10 tokens left (+2 per round): of ten hotter newcomers, 6 replace a colder key at
  // once (2 each), then one more per round.
  report.clear();
  for (int i = 0; i < 10; ++i) {
    const std::string k = "n" + std::to_string(i);
    peers_.data[k] = "v";
    report.push_back({k, 5000.0 - i});
  }
  round(report);
  EXPECT_EQ(peers_.adds.back().size(), 6u);
  EXPECT_EQ(peers_.adds.back().front().key, "n0");
  round(report);
  EXPECT_EQ(peers_.adds.back(), (KR{{"n6", 4994}}));
  round(report);
  EXPECT_EQ(peers_.adds.back(), (KR{{"n7", 4993}}));
  EXPECT_EQ(cp_.fill_admitted.load(), 18u);
}

TEST_F(FillerTest, KeysNotFoundAreEvictedBack) {
  make(10);
  round({{"a", 50}, {"ghost", 40}});
  EXPECT_EQ(st().map.find("ghost"), nullptr);
  EXPECT_EQ(peers_.log, (std::vector<std::string>{"fetch a ghost", "add a", "evict ghost"}));
  // Still reported hot (GETs for a missing key): not fetched again every round...
  for (int i = 0; i < 29; ++i) round({{"a", 50}, {"ghost", 40}});  // 2.9 s < report_ttl_ms
  EXPECT_EQ(peers_.log.size(), 3u);
  // ...but tried again after report_ttl_ms (it may have been written meanwhile).
  peers_.data["ghost"] = "boo";
  round({{"a", 50}, {"ghost", 40}});
  EXPECT_EQ(peers_.log.back(), "add ghost");
  EXPECT_EQ(st().map.find("ghost")->value, "boo");
}

TEST_F(FillerTest, CommitDuringFetchWinsOverFetchedValue) {
  make(10);
  peers_.during_fetch = [this](const Keys&) {
    std::lock_guard lock(st().mu);  // what Prepare() and Commit() do for a key being fetched
    ASSERT_TRUE(st().keys.prepare("a", 1, false, "newer").applied);
    ASSERT_TRUE(st().keys.commit("a", 1, true).applied);
  };
  round({{"a", 50}});
  EXPECT_EQ(st().map.find("a")->value, "newer");
}

TEST_F(FillerTest, HotSetSwapRetiresOldKeysRuleFirstThenEraseThenEvict) {
  make(2);
  round({{"a", 100}, {"b", 90}});
  peers_.log.clear();
  // The hot set moves: a and b are no longer reported and get no hits here.
  round({{"c", 500}, {"d", 400}});
  EXPECT_TRUE(retiring("a"));
  EXPECT_TRUE(retiring("b"));
  EXPECT_EQ(cp_.fill_evicted.load(), 2u);
  // Retiring entries are still served: the lookup path ignores the flag.
  ASSERT_NE(st().map.touch("a"), nullptr);
  EXPECT_EQ(st().map.find("c")->value, "v-c");
  EXPECT_EQ(st().map.size(), 4u) << "retiring entries keep their room until removed";
  EXPECT_EQ(peers_.log, (std::vector<std::string>{"fetch c d", "add c d"}))
      << "nothing removed by the fill thread itself";
  // Threshold: the last victim's rate. Seeded 100 and 90, decayed by one empty 100 ms sample
  // (alpha 0.3 per second: weight 1 - 0.7^0.1): b at ~86.8 goes first, then a at ~96.5.
  EXPECT_NEAR(static_cast<double>(cp_.threshold_milli.load()), 100'000 * std::pow(0.7, 0.1), 2);

  EXPECT_TRUE(filler_->retire_once());
  EXPECT_EQ(peers_.log,
            (std::vector<std::string>{"fetch c d", "add c d", "remove a b", "evict a b"}));
  EXPECT_EQ(peers_.remove_no_wait, std::vector<bool>{false}) << "removal waits for the switch";
  EXPECT_TRUE(peers_.present_at_remove.at("a")) << "entry erased before its rule was removed";
  EXPECT_TRUE(peers_.present_at_remove.at("b"));
  EXPECT_FALSE(peers_.present_at_evict.at("a")) << "EVICT sent before the entry was erased";
  EXPECT_FALSE(peers_.present_at_evict.at("b"));
  EXPECT_EQ(st().map.find("a"), nullptr);
  EXPECT_EQ(st().map.size(), 2u);
  EXPECT_EQ(st().keys.retiring_count(), 0u);
  EXPECT_EQ(st().keys.removing_count(), 0u);
  EXPECT_EQ(cp_.retired.load(), 2u);
  EXPECT_TRUE(filler_->retire_once()) << "nothing left: no calls";
  EXPECT_EQ(peers_.log.size(), 4u);
}

TEST_F(FillerTest, RetiringKeySelectedAgainIsNotRemoved) {
  make(1);
  round({{"a", 100}});
  round({{"b", 500}});  // a retires, b comes in
  ASSERT_TRUE(retiring("a"));
  // Before the retire thread runs, a is the hottest key again.
  round({{"a", 5000}, {"b", 500}});
  EXPECT_FALSE(retiring("a")) << "re-selection cancels the retirement";
  EXPECT_TRUE(retiring("b"));
  EXPECT_EQ(peers_.log, (std::vector<std::string>{"fetch a", "add a", "fetch b", "add b"}))
      << "a was neither fetched nor ruled again: its entry and rule never left";
  EXPECT_TRUE(filler_->retire_once());
  ASSERT_EQ(peers_.removes.size(), 1u);
  EXPECT_EQ(peers_.removes[0], Keys{"b"});
  EXPECT_NE(st().map.find("a"), nullptr);
  EXPECT_EQ(st().map.find("b"), nullptr);
  EXPECT_EQ(cp_.fill_admitted.load(), 3u);  // a, b, and a's cancelled retirement
}

TEST_F(FillerTest, KeyWhoseRemovalIsInFlightIsNotReadmitted) {
  make(1);
  round({{"a", 100}});
  round({{"b", 500}});
  // The retire thread's RemoveCacheRules is in flight while a committed DELETE erases a's entry
  // and the fill thread runs a round in which a is the hottest key again: a must not be fetched
  // until the removal completes (its Add would reach the controller before the Remove).
  bool ran = false;
  std::function<void()> inner = [&] {
    ran = true;
    {
      std::lock_guard lock(st().mu);
      st().map.erase("a");
    }
    round({{"a", 5000}, {"b", 500}});
  };
  // Run the round from inside remove_rules by wrapping the fake.
  struct Hook final : Peers {
    FakePeers& p;
    std::function<void()>& inner;
    Hook(FakePeers& p, std::function<void()>& i) : p(p), inner(i) {}
    FetchResult fetch(const Keys& k) override { return p.fetch(k); }
    std::string evict(const Keys& k) override { return p.evict(k); }
    RuleOutcome add_rules(const KR& k, bool nw) override { return p.add_rules(k, nw); }
    RuleOutcome remove_rules(const Keys& k, bool nw) override {
      inner();
      return p.remove_rules(k, nw);
    }
  } hook(peers_, inner);
  Filler retirer(options(1), st(), hook, hot_, cp_, [this] { return now_; });
  EXPECT_TRUE(retirer.retire_once());
  EXPECT_TRUE(ran);
  EXPECT_EQ(st().map.find("a"), nullptr);
  EXPECT_EQ(peers_.log.back(), "evict a") << "still EVICTed: its db node tracked it";
  EXPECT_EQ(std::count(peers_.log.begin(), peers_.log.end(), "fetch a"), 1)
      << "a was not fetched while its removal was in flight";
  // Once the removal is done, a can come back.
  round({{"a", 5000}, {"b", 500}});
  EXPECT_NE(st().map.find("a"), nullptr);
}

TEST_F(FillerTest, RetiringKeyWhoseEntryWasDeletedStillHasItsRuleRemoved) {
  make(1);
  round({{"a", 100}});
  round({{"b", 500}});  // a retires
  {
    std::lock_guard lock(st().mu);
    st().map.erase("a");  // a committed DELETE erased the entry; the rule is still there
  }
  round({{"a", 5000}, {"b", 500}});
  EXPECT_TRUE(retiring("a")) << "no entry to keep serving: the removal must go ahead";
  EXPECT_EQ(std::count(peers_.log.begin(), peers_.log.end(), "fetch a"), 1);
  EXPECT_TRUE(filler_->retire_once());
  EXPECT_EQ(peers_.removes.back(), Keys{"a"});
  EXPECT_EQ(peers_.log.back(), "evict a");
  round({{"a", 5000}, {"b", 500}});
  EXPECT_NE(st().map.find("a"), nullptr) << "admitted again once its removal is done";
}

TEST_F(FillerTest, FailedRuleRemovalKeepsEntryAndRetries) {
  make(1);
  round({{"a", 100}});
  round({{"b", 500}});
  peers_.fail_removes = 1;
  EXPECT_FALSE(filler_->retire_once());
  EXPECT_NE(st().map.find("a"), nullptr) << "rule may still exist: keep serving";
  EXPECT_TRUE(retiring("a"));
  EXPECT_EQ(cp_.fill_rule_errors.load(), 1u);
  EXPECT_EQ(std::count(peers_.log.begin(), peers_.log.end(), "evict a"), 0);
  EXPECT_TRUE(filler_->retire_once());
  EXPECT_EQ(st().map.find("a"), nullptr);
  EXPECT_EQ(peers_.log.back(), "evict a");
  EXPECT_EQ(cp_.retired.load(), 1u);
}

TEST_F(FillerTest, ARemovalTheControllerGotIsNeverCancelled) {
  // The waiting RemoveCacheRules timed out, but the controller had queued the removal: if the
  // key were re-admitted by cancelling its retirement, it would stay held with no rule.
  make(1);
  round({{"a", 100}});
  round({{"b", 500}});
  peers_.fail_removes = 1;
  EXPECT_FALSE(filler_->retire_once());
  round({{"a", 5000}});  // "a" is hot again
  EXPECT_TRUE(retiring("a")) << "its removal must be completed, not cancelled";
  EXPECT_EQ(std::count(peers_.log.begin(), peers_.log.end(), "fetch a"), 1);
  EXPECT_TRUE(filler_->retire_once());
  EXPECT_EQ(peers_.log.back(), "evict a");
  round({{"a", 5000}});
  EXPECT_NE(st().map.find("a"), nullptr) << "admitted again once its removal is done";
}

TEST_F(FillerTest, NoFetchOfARetiredKeyUntilItsEvictIsBack) {
  // A FETCH that overtook the EVICT would be untracked by it at the db node, which would then
  // stop two-phase-committing writes to a key this node serves.
  make(1);
  round({{"a", 100}});
  round({{"b", 500}});
  bool checked = false;
  peers_.during_evict = [&](const Keys& keys) {
    if (keys != Keys{"a"}) return;
    checked = true;
    round({{"a", 5000}, {"b", 1}});  // the fill thread runs meanwhile
    EXPECT_EQ(std::count(peers_.log.begin(), peers_.log.end(), "fetch a"), 1);
    EXPECT_TRUE(retiring("a"));
  };
  EXPECT_TRUE(filler_->retire_once());
  EXPECT_TRUE(checked);
  EXPECT_FALSE(retiring("a"));
}

TEST_F(FillerTest, LruVictimsOfAFillInsertAreNotFetchedAgainUntilTheirEvictIsBack) {
  // A concurrent Cache RPC filled the map while the filler's FETCH was out, so the filler's
  // insert pushes an entry out. Like the Cache RPC's victims, it stays removing until the
  // filler's EVICT of it is back: a FETCH that overtook that EVICT would be untracked by it.
  make(2);  // map of 4
  peers_.during_fetch = [this](const Keys&) {
    std::lock_guard lock(st().mu);
    for (auto k : {"w", "x", "y", "z"}) st().map.insert(k, "c", nullptr);
  };
  bool checked = false;
  peers_.during_evict = [&](const Keys& keys) {
    if (std::find(keys.begin(), keys.end(), "w") == keys.end()) return;
    checked = true;
    std::lock_guard lock(st().mu);
    EXPECT_TRUE(st().keys.removing("w"));
    EXPECT_EQ(st().keys.admit_for_cache("w"), CacheAdmit::kSkip);
  };
  round({{"a", 100}});
  EXPECT_TRUE(checked);
  EXPECT_EQ(peers_.removes.back(), Keys{"w"});
  EXPECT_EQ(peers_.remove_no_wait.back(), true);
  EXPECT_EQ(st().keys.state("w"), KeyState::kAbsent) << "removal done once its EVICT is back";
  EXPECT_NE(st().map.find("a"), nullptr);
  EXPECT_EQ(cp_.evictions.load(), 1u);
}

TEST_F(FillerTest, AnAddTheControllerGotIsNotSentAgain) {
  // It counts references per rule: a resent add would need a second remove.
  make(10);
  peers_.fail_adds = 1;
  round({{"a", 100}});
  ASSERT_EQ(peers_.adds.size(), 1u);
  round({{"a", 100}});
  EXPECT_EQ(peers_.adds.size(), 2u) << "undelivered: resent";
  peers_.reject_adds = 1;
  round({{"b", 90}});
  ASSERT_EQ(peers_.adds.size(), 3u);
  round({{"b", 90}});
  round({{"b", 90}});
  EXPECT_EQ(peers_.adds.size(), 3u) << "delivered (even if rejected): not resent";
  EXPECT_EQ(cp_.fill_rule_errors.load(), 2u);
}

TEST_F(FillerTest, AnAddTurnedDownBecauseRuleset2WasFullIsSentAgainUntilAccepted) {
  // Not counted by the controller, so resending is safe; without it a hot key admitted while
  // the rules were full stays cached with no rule, and its GETs never come here.
  make(10);
  peers_.full_adds = 2;
  round({{"a", 100}});
  round({{"a", 100}});
  ASSERT_EQ(peers_.adds.size(), 2u) << "turned down as full: sent again next round";
  round({{"a", 100}});
  ASSERT_EQ(peers_.adds.size(), 3u);
  EXPECT_EQ(peers_.adds.back().front().key, "a");
  round({{"a", 100}});
  EXPECT_EQ(peers_.adds.size(), 3u) << "accepted: not sent again";
  EXPECT_EQ(cp_.fill_rules_deferred.load(), 2u);
  EXPECT_EQ(cp_.fill_rule_errors.load(), 0u) << "a full table is back-pressure, not an error";
}

TEST_F(FillerTest, AKeyCachedByHandIsNotEvictedBeforeItsHitsAreMeasured) {
  // What the Cache RPC does: insert without the filler. No db node reports the key (the switch
  // sends its GETs here), so its rate is its own hits, which need a round or two to measure.
  make(10);
  {
    std::lock_guard lock(st().mu);
    st().map.insert("pinned", "v", nullptr);
  }
  round({});  // first sight: a baseline only
  EXPECT_FALSE(retiring("pinned")) << "evicted as cold before any hit could be counted";
  for (int i = 0; i < 20; ++i) st().map.touch("pinned");  // 20 hits in 100 ms: 200/s
  round({});
  EXPECT_FALSE(retiring("pinned"));
  EXPECT_NE(st().map.find("pinned"), nullptr);
}

TEST_F(FillerTest, FetchFailureIsCountedAndRetriedNextRound) {
  make(10);
  peers_.unreachable = {"a"};
  round({{"a", 100}, {"b", 50}});
  EXPECT_EQ(cp_.fill_fetch_failed.load(), 1u);
  EXPECT_EQ(st().map.find("a"), nullptr);
  EXPECT_NE(st().map.find("b"), nullptr);
  EXPECT_EQ(st().keys.fetching_count(), 0u);
  EXPECT_EQ(peers_.adds.back(), (KR{{"b", 50}}));
  peers_.unreachable.clear();
  round({{"a", 100}, {"b", 50}});
  EXPECT_NE(st().map.find("a"), nullptr);
  EXPECT_EQ(peers_.adds.back(), (KR{{"a", 100}}));
  EXPECT_EQ(cp_.fill_fetch_failed.load(), 1u);
}

TEST_F(FillerTest, FailedAddRulesIsRetried) {
  make(10);
  peers_.fail_adds = 1;
  round({{"a", 100}});
  EXPECT_EQ(cp_.fill_rule_errors.load(), 1u);
  EXPECT_NE(st().map.find("a"), nullptr);
  round({{"a", 100}});
  ASSERT_EQ(peers_.adds.size(), 2u);
  EXPECT_EQ(peers_.adds[1], (KR{{"a", 100}}));
  round({{"a", 100}});
  EXPECT_EQ(peers_.adds.size(), 2u) << "no more retries once it succeeded";
}

TEST_F(FillerTest, FetchBatchIsLimited) {
  auto o = options(10);
  o.cfg.max_fetch_batch = 2;
  make(10, o);
  const KR report{{"a", 9}, {"b", 8}, {"c", 7}, {"d", 6}, {"e", 5}};
  round(report);
  EXPECT_EQ(peers_.log.front(), "fetch a b");
  round(report);
  round(report);
  EXPECT_EQ(st().map.size(), 5u);
  EXPECT_EQ(std::count_if(peers_.log.begin(), peers_.log.end(),
                          [](const std::string& s) { return s.rfind("fetch", 0) == 0; }),
            3);
}

TEST_F(FillerTest, MapFullOfRetiringEntriesDefersAdmissions) {
  make(1);  // map of 2
  round({{"a", 100}});
  round({{"b", 500}});  // a retiring, b held: the map is full
  round({{"c", 50'000}, {"b", 500}});  // b retires too, but c has no room yet
  EXPECT_TRUE(retiring("b"));
  EXPECT_EQ(st().map.find("c"), nullptr);
  EXPECT_EQ(st().map.size(), 2u);
  EXPECT_TRUE(filler_->retire_once());
  round({{"c", 50'000}});
  EXPECT_NE(st().map.find("c"), nullptr);
  EXPECT_EQ(st().map.size(), 1u);
}

TEST_F(FillerTest, NeverHoldsMoreThanCapacity) {
  make(3);
  for (int i = 0; i < 30; ++i) {
    // A hot set that drifts by one key per round, each new key hotter than the last.
    KR report;
    for (int j = 0; j < 5; ++j) {
      const std::string k = "k" + std::to_string(i + j);
      peers_.data[k] = "v";
      report.push_back({k, 100.0 * (i + j + 1)});
    }
    std::sort(report.begin(), report.end(),
              [](const KeyRate& a, const KeyRate& b) { return a.rate > b.rate; });
    round(report);
    EXPECT_LE(held(), 3u) << "round " << i;
    EXPECT_LE(st().map.size(), st().map.capacity());
    if (i % 3 == 2) filler_->retire_once();
  }
  EXPECT_EQ(cp_.evictions.load(), 0u) << "the filler never relies on LRU eviction";
  EXPECT_GT(cp_.retired.load(), 0u);
}

TEST_F(FillerTest, ThreadsFillAndStopPromptly) {
  auto o = options(4);
  o.cfg.interval_ms = 5;
  state_ptr_ = std::make_unique<CacheState>(8);
  peers_.state = state_ptr_.get();
  Filler f(o, st(), peers_, hot_, cp_);  // real clock
  f.start();
  hot_.report("db0", {{"a", 100}, {"b", 90}}, steady_ms());
  auto wait_for = [&](auto pred) {
    for (int i = 0; i < 400 && !pred(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return pred();
  };
  EXPECT_TRUE(wait_for([&] { return held() == 2; }));
  // A new hot set: the retire thread removes a and b on its own.
  hot_.report("db0", {{"c", 10'000}, {"d", 9'000}, {"e", 8'000}, {"f", 7'000}, {"g", 6'000}},
              steady_ms());
  EXPECT_TRUE(wait_for([&] {
    std::lock_guard lock(st().mu);
    return !st().map.find("a") && !st().map.find("b") && st().map.find("f");
  }));
  const auto t0 = std::chrono::steady_clock::now();
  f.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_GE(cp_.retired.load(), 2u);
}

TEST_F(FillerTest, DisabledStartsNothing) {
  auto o = options(4);
  o.cfg.enabled = false;
  o.cfg.interval_ms = 1;
  make(4, o);
  hot_.report("db0", {{"a", 100}}, now_);
  filler_->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  filler_->stop();
  EXPECT_EQ(cp_.fill_rounds.load(), 0u);
  EXPECT_EQ(st().map.size(), 0u);
}

// What the Reset RPC does to the shared state (ControlService::Reset).
void reset(CacheState& st) {
  std::lock_guard lock(st.mu);
  st.keys.reset();
}

TEST_F(FillerTest, AfterResetARuleAddToResendIsForgotten) {
  make(10);
  peers_.fail_adds = 1;
  round({{"a", 100}});  // inserted; its AddCacheRules never reached the controller
  ASSERT_EQ(peers_.adds.size(), 1u);
  reset(st());
  {
    // A Cache RPC takes "a" again before the next round (and asks for its rule itself).
    std::lock_guard lock(st().mu);
    st().map.insert("a", "v-a", nullptr);
  }
  round({});
  EXPECT_EQ(peers_.adds.size(), 1u)
      << "the add of the dropped entry was resent: a second reference to the new one's rule";
}

TEST_F(FillerTest, AfterResetAStalledRemovalIsDroppedAndTheKeyCanComeBack) {
  make(1);
  round({{"a", 100}});
  round({{"b", 500}});  // a retires
  peers_.fail_removes = 1;
  EXPECT_FALSE(filler_->retire_once());
  ASSERT_TRUE(retiring("a"));
  const size_t removes = peers_.removes.size(), evicts = peers_.evicts.size();
  reset(st());
  EXPECT_EQ(st().map.size(), 0u);
  EXPECT_TRUE(filler_->retire_once());
  EXPECT_EQ(peers_.removes.size(), removes) << "the controller withdrew the rule already";
  EXPECT_EQ(peers_.evicts.size(), evicts) << "the db node forgot this node already";
  EXPECT_FALSE(retiring("a"));
  round({{"a", 5000}});
  EXPECT_NE(st().map.find("a"), nullptr) << "a stuck 'removing' key could never be cached again";
  EXPECT_EQ(peers_.adds.back(), (KR{{"a", 5000}}));
}

TEST_F(FillerTest, FetchInFlightDuringResetInsertsNothingAndIsRefetched) {
  make(10);
  bool once = false;
  peers_.during_fetch = [&](const Keys&) {
    if (once) return;
    once = true;
    reset(st());
  };
  round({{"a", 100}, {"b", 90}});
  EXPECT_EQ(st().map.size(), 0u);
  EXPECT_EQ(st().keys.fetching_count(), 0u);
  EXPECT_TRUE(peers_.adds.empty()) << "no rule for keys that were not inserted";
  EXPECT_EQ(peers_.log.back(), "evict a b") << "untracked: the FETCH may have marked them again";
  round({{"a", 100}, {"b", 90}});
  EXPECT_NE(st().map.find("a"), nullptr) << "a cancelled key is not held back as uncacheable";
  EXPECT_NE(st().map.find("b"), nullptr);
}

TEST_F(FillerTest, ResetWithoutHeldStateIsHarmless) {
  make(2);
  reset(st());
  round({{"a", 100}});
  EXPECT_NE(st().map.find("a"), nullptr);
  EXPECT_TRUE(filler_->retire_once());
}

}  // namespace
