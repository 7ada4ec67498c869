// ControlService against in-process fake DbNode and Controller gRPC servers (unix sockets).
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "control_service.h"
#include "request_handler.h"
#include "wire.h"

namespace {

using namespace exo::cache;
using exo::KeyRate;
using exo::steady_ms;
using Keys = std::vector<std::string>;

struct FakeDb final : exo::DbNode::Service {
  std::mutex mu;
  std::map<std::string, std::string> data;
  Keys fetched, evicted;
  std::string cache_node;
  std::function<void(const std::string&)> during_fetch;  // runs inside Fetch, per key

  grpc::Status Fetch(grpc::ServerContext*, const exo::FetchRequest* req, exo::FetchReply* rep) override {
    for (const auto& k : req->keys()) {
      if (during_fetch) during_fetch(k);
      std::lock_guard lock(mu);
      fetched.push_back(k);
      cache_node = req->cache_node();
      auto* v = rep->add_values();
      v->set_key(k);
      auto it = data.find(k);
      v->set_found(it != data.end());
      if (it != data.end()) v->set_value(it->second);
    }
    return grpc::Status::OK;
  }
  grpc::Status Evict(grpc::ServerContext*, const exo::EvictRequest* req, exo::EvictReply* rep) override {
    std::lock_guard lock(mu);
    for (const auto& k : req->keys()) evicted.push_back(k);
    rep->set_evicted(req->keys_size());
    return grpc::Status::OK;
  }
};

// Records rule changes and whether the entry was in the map at that moment (ordering checks).
struct FakeController final : exo::Controller::Service {
  CacheState* state = nullptr;
  std::mutex mu;
  std::set<uint64_t> rules;
  std::vector<std::pair<uint64_t, bool>> added, removed;  // (hash, entry present then)
  std::vector<bool> no_wait;  // of every Add/Remove call, in order
  std::map<uint64_t, std::string> key_of;

  bool present(uint64_t h) {
    std::lock_guard lock(state->mu);
    return key_of.count(h) && state->map.find(key_of[h]) != nullptr;
  }
  grpc::Status AddCacheRules(grpc::ServerContext*, const exo::CacheRulesRequest* req,
                             exo::CacheRulesReply* rep) override {
    std::lock_guard lock(mu);
    no_wait.push_back(req->no_wait());
    for (const auto& r : req->rules()) {
      EXPECT_EQ(r.cache_node(), "cache0");
      rules.insert(r.key_hash());
      added.emplace_back(r.key_hash(), present(r.key_hash()));
    }
    rep->set_accepted(req->rules_size());
    return grpc::Status::OK;
  }
  grpc::Status RemoveCacheRules(grpc::ServerContext*, const exo::CacheRulesRequest* req,
                                exo::CacheRulesReply* rep) override {
    std::lock_guard lock(mu);
    no_wait.push_back(req->no_wait());
    for (const auto& r : req->rules()) {
      rules.erase(r.key_hash());
      removed.emplace_back(r.key_hash(), present(r.key_hash()));
    }
    rep->set_accepted(req->rules_size());
    return grpc::Status::OK;
  }
};

class ControlServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string base = "/tmp/exo-cn-test-" + std::to_string(getpid());
    db_addr_ = "unix:" + base + "-db.sock";
    ctl_addr_ = "unix:" + base + "-ctl.sock";
    cluster_.mtu = 1500;
    cluster_.partition_bits = 1;
    cluster_.security.insecure_dev_mode = true;  // handlers called directly; TLS: control_authz_test
    cluster_.controller_grpc = ctl_addr_;
    exo::DbNodeInfo db;
    db.name = "db0";
    db.grpc = db_addr_;
    cluster_.db_nodes.push_back(db);
    cluster_.slot_owner = {0, 0};
    uint64_t v = 0;
    ASSERT_EQ(heads_.replace(HeadsTable::from_cluster(cluster_), &v), "");
    ctl_.state = &state_;
    for (auto k : {"a", "b", "c", "d", "big"}) ctl_.key_of[LruMap::hash_of(k)] = k;
    db_.data = {{"a", "A"}, {"b", "B"}, {"c", "C"}, {"d", "D"}, {"big", std::string(1500, 'x')}};
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  void start_servers(bool db = true, bool ctl = true) {
    grpc::ServerBuilder b;
    if (db) {
      unlink(db_addr_.substr(5).c_str());
      b.AddListeningPort(db_addr_, grpc::InsecureServerCredentials());
      b.RegisterService(&db_);
    }
    if (ctl) {
      unlink(ctl_addr_.substr(5).c_str());
      b.AddListeningPort(ctl_addr_, grpc::InsecureServerCredentials());
      b.RegisterService(&ctl_);
    }
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
  }
  exo::KeysReply call_cache(const Keys& keys) {
    exo::KeysRequest req;
    for (const auto& k : keys) req.add_keys(k);
    exo::KeysReply rep;
    EXPECT_TRUE(svc_.Cache(nullptr, &req, &rep).ok());
    return rep;
  }
  exo::KeysReply call_evict(const Keys& keys) {
    exo::KeysRequest req;
    for (const auto& k : keys) req.add_keys(k);
    exo::KeysReply rep;
    EXPECT_TRUE(svc_.Evict(nullptr, &req, &rep).ok());
    return rep;
  }
  exo::TxReply prepare(const std::string& k, uint64_t txid, bool del, const std::string& v) {
    exo::PrepareRequest req;
    req.set_key(k);
    req.set_txid(txid);
    req.set_is_delete(del);
    req.set_value(v);
    exo::TxReply rep;
    EXPECT_TRUE(svc_.Prepare(nullptr, &req, &rep).ok());
    return rep;
  }
  exo::TxReply tx(bool commit, const std::string& k, uint64_t txid) {
    exo::TxRequest req;
    req.set_key(k);
    req.set_txid(txid);
    exo::TxReply rep;
    EXPECT_TRUE((commit ? svc_.Commit(nullptr, &req, &rep) : svc_.Abort(nullptr, &req, &rep)).ok());
    return rep;
  }
  Keys skipped(const exo::KeysReply& r) { return Keys(r.skipped().begin(), r.skipped().end()); }
  // What the filler's threads do to a held key: select it out / take it for rule removal.
  void retire(const std::string& k) { ASSERT_TRUE(state_.keys.mark_retiring(k)) << k; }
  void take_retiring() { state_.keys.take_retiring(); }
  exo::KeysReply reset() {
    exo::StatsRequest req;
    exo::KeysReply rep;
    EXPECT_TRUE(svc_.Reset(nullptr, &req, &rep).ok());
    return rep;
  }
  // What the data plane does with a GET for `key` now.
  Action get(const std::string& key) {
    std::vector<uint8_t> buf(2048);
    const uint64_t hash = LruMap::hash_of(key);
    const exo::Mac dst = exo::request_mac(exo::kPrefixGet, hash);
    const exo::Mac client{0x02, 0, 0, 0, 3, 1};
    exo::wire::Header h;
    h.opcode = exo::wire::kGet;
    const size_t len = exo::wire::build(
        buf, dst.data(), {client.data(), 0x0a000301, 40000}, exo::request_ip(hash), 7777, h,
        {reinterpret_cast<const uint8_t*>(key.data()), key.size()}, {});
    SelfInfo self;
    self.mac = {0x02, 0, 0, 0, 1, 1};
    self.ip = 0x0a000101;
    FrameRef f{buf.data(), len, buf.size()};
    exo::wire::FrameView v{};
    EXPECT_EQ(classify({f.data, f.len}, self, v), Verdict::kGet);
    std::lock_guard lock(state_.mu);
    return execute_get(f, v, LruMap::hash_of(key), state_.map, self);
  }

  exo::Cluster cluster_;
  std::string db_addr_, ctl_addr_;
  CacheState state_{3};
  CpCounters cp_;
  DpCounters dp_;
  FakeDb db_;
  FakeController ctl_;
  Heads heads_{HeadsTable{}};  // the config's owners once SetUp built cluster_
  GrpcPeers peers_{cluster_, "cache0", exo::GrpcSecurity::plaintext(), heads_};
  HotList hot_{3000};
  uint64_t now_ms_ = 10'000;
  ControlService svc_{cluster_, "cache0", state_, cp_, peers_, heads_, hot_, [this] { return dp_; },
                      [this] { return now_ms_; }};
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(ControlServiceTest, CacheFetchesInsertsThenAddsRules) {
  start_servers();
  auto rep = call_cache({"a", "b", "missing", "a"});
  EXPECT_EQ(rep.error(), "");
  EXPECT_EQ(rep.done(), 2u);
  EXPECT_EQ(skipped(rep), Keys{"missing"});
  EXPECT_EQ(db_.cache_node, "cache0");
  EXPECT_EQ(state_.map.find("a")->value, "A");
  EXPECT_EQ(state_.map.find("b")->value, "B");
  ASSERT_EQ(ctl_.added.size(), 2u);
  for (auto& [h, present] : ctl_.added) EXPECT_TRUE(present) << "rule requested before insert";
  EXPECT_EQ(ctl_.no_wait, std::vector<bool>{false}) << "Cache() waits for its rules";
  EXPECT_EQ(db_.evicted, Keys{"missing"});  // db node stops tracking a key we did not cache
  EXPECT_EQ(state_.keys.fetching_count(), 0u);
  EXPECT_EQ(cp_.cached_inserts.load(), 2u);
}

TEST_F(ControlServiceTest, CacheAtCapacityEvictsLruAndRemovesTheirRules) {
  start_servers();
  call_cache({"a", "b", "c"});
  auto rep = call_cache({"d"});
  EXPECT_EQ(rep.done(), 1u);
  EXPECT_EQ(state_.map.find("a"), nullptr);
  ASSERT_EQ(ctl_.removed.size(), 1u);
  EXPECT_EQ(ctl_.removed[0].first, LruMap::hash_of("a"));
  EXPECT_EQ(db_.evicted, Keys{"a"});
  EXPECT_EQ(ctl_.rules.count(LruMap::hash_of("a")), 0u);
  EXPECT_EQ(ctl_.rules.size(), 3u);
  EXPECT_EQ(cp_.evictions.load(), 1u);
}

TEST_F(ControlServiceTest, OversizedValueIsNotCached) {
  start_servers();
  auto rep = call_cache({"big"});
  EXPECT_EQ(rep.done(), 0u);
  EXPECT_EQ(skipped(rep), Keys{"big"});
  EXPECT_EQ(state_.map.size(), 0u);
}

TEST_F(ControlServiceTest, EvictRemovesRuleBeforeEntry) {
  start_servers();
  call_cache({"a", "b"});
  auto rep = call_evict({"a", "zz"});
  EXPECT_EQ(rep.error(), "");
  EXPECT_EQ(rep.done(), 1u);
  EXPECT_EQ(skipped(rep), Keys{"zz"});
  ASSERT_FALSE(ctl_.removed.empty());
  EXPECT_EQ(ctl_.removed[0].first, LruMap::hash_of("a"));
  EXPECT_TRUE(ctl_.removed[0].second) << "entry erased before its rule was removed";
  EXPECT_EQ(state_.map.find("a"), nullptr);
  EXPECT_NE(state_.map.find("b"), nullptr);
  EXPECT_EQ(db_.evicted, (Keys{"a", "zz"}));
}

TEST_F(ControlServiceTest, UnreachablePeersGiveErrorsNotCrashes) {
  // No servers at all.
  auto rep = call_cache({"a"});
  EXPECT_NE(rep.error().find("db0.Fetch"), std::string::npos) << rep.error();
  EXPECT_EQ(rep.done(), 0u);
  EXPECT_EQ(skipped(rep), Keys{"a"});
  EXPECT_EQ(state_.keys.fetching_count(), 0u);
  state_.map.insert("a", "A", nullptr);
  auto ev = call_evict({"a"});
  EXPECT_NE(ev.error().find("RemoveCacheRules"), std::string::npos) << ev.error();
  EXPECT_NE(state_.map.find("a"), nullptr) << "entry kept while its rule may still exist";
}

TEST_F(ControlServiceTest, CommitDuringFetchWins) {
  start_servers();
  db_.during_fetch = [this](const std::string& k) {
    if (k == "a") {
      EXPECT_TRUE(prepare("a", 9, false, "A2").cached());
      EXPECT_TRUE(tx(true, "a", 9).ok());
    }
    if (k == "b") {
      EXPECT_TRUE(prepare("b", 10, true, "").cached());
      EXPECT_TRUE(tx(true, "b", 10).ok());
    }
    if (k == "c") {
      EXPECT_TRUE(prepare("c", 11, false, "C2").cached());  // still pending at insert
    }
  };
  auto rep = call_cache({"a", "b", "c"});
  EXPECT_EQ(state_.map.find("a")->value, "A2");
  EXPECT_EQ(state_.map.find("b"), nullptr);  // deleted while fetching
  EXPECT_EQ(skipped(rep), Keys{"b"});
  ASSERT_NE(state_.map.find("c"), nullptr);
  EXPECT_TRUE(state_.map.find("c")->pending);
  EXPECT_TRUE(tx(true, "c", 11).ok());
  EXPECT_EQ(state_.map.find("c")->value, "C2");
}

TEST_F(ControlServiceTest, TwoPhaseWritesOnHeldKeys) {
  state_.map.insert("a", "old", nullptr);
  auto p = prepare("a", 1, false, "new");
  EXPECT_TRUE(p.ok() && p.cached());
  EXPECT_TRUE(state_.map.find("a")->pending);
  auto bad = tx(true, "a", 2);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("txid"), std::string::npos);
  EXPECT_TRUE(tx(true, "a", 1).ok());
  EXPECT_EQ(state_.map.find("a")->value, "new");

  prepare("a", 3, false, "newer");
  EXPECT_TRUE(tx(false, "a", 3).ok());
  EXPECT_EQ(state_.map.find("a")->value, "new");

  prepare("a", 4, true, "");
  EXPECT_TRUE(tx(true, "a", 4).ok());
  EXPECT_EQ(state_.map.find("a"), nullptr);
  EXPECT_EQ(cp_.prepares.load(), 3u);
  EXPECT_EQ(cp_.commits.load(), 2u);
  EXPECT_EQ(cp_.aborts.load(), 1u);

  auto none = prepare("zz", 5, false, "v");
  EXPECT_TRUE(none.ok());
  EXPECT_FALSE(none.cached());
  EXPECT_FALSE(tx(true, "zz", 5).cached());
}

TEST_F(ControlServiceTest, DropEntriesListKeysAndStats) {
  state_.map.insert("a", "A", nullptr);
  state_.map.insert("b", "B", nullptr);
  state_.keys.prepare("b", 1, false, "x");
  dp_.hits = 7;
  exo::KeysRequest req;
  req.add_keys("a");
  req.add_keys("q");
  exo::KeysReply rep;
  svc_.DropEntries(nullptr, &req, &rep);
  EXPECT_EQ(rep.done(), 1u);
  EXPECT_EQ(skipped(rep), Keys{"q"});

  exo::CachedKeysReply keys;
  svc_.ListKeys(nullptr, nullptr, &keys);
  EXPECT_EQ(Keys(keys.keys().begin(), keys.keys().end()), Keys{"b"});

  exo::StatsReply st;
  svc_.Stats(nullptr, nullptr, &st);
  EXPECT_EQ(st.node(), "cache0");
  std::map<std::string, uint64_t> c;
  for (const auto& x : st.counters()) c[x.name()] = x.value();
  EXPECT_EQ(c.size(), std::size(kCounterInfo));
  EXPECT_EQ(c.at("hits"), 7u);
  EXPECT_EQ(c.at("entries"), 1u);
  EXPECT_EQ(c.at("pending"), 1u);
  for (auto n : {"rx_frames", "tx_frames", "tx_dropped", "ignored", "malformed_dropped", "gets",
                 "forwarded_misses", "requests_served", "cached_inserts", "evictions", "prepares",
                 "commits", "aborts", "reports_received", "reports_rejected", "fill_rounds",
                 "fill_admitted", "fill_evicted", "fill_fetch_failed", "fill_rule_errors",
                 "retired", "resets", "hot_list_keys", "retiring", "threshold_milli"})
    EXPECT_TRUE(c.count(n)) << n;
}

TEST_F(ControlServiceTest, StatsGauges) {
  state_.map.insert("a", "A", nullptr);
  state_.map.insert("b", "B", nullptr);
  retire("b");
  take_retiring();  // b: removal in flight
  retire("a");      // a: retiring
  hot_.report("db0", {{"x", 5}, {"y", 4}}, now_ms_);
  cp_.threshold_milli = 2500;
  exo::StatsReply st;
  svc_.Stats(nullptr, nullptr, &st);
  std::map<std::string, uint64_t> c;
  for (const auto& x : st.counters()) c[x.name()] = x.value();
  EXPECT_EQ(c.at("retiring"), 2u);
  EXPECT_EQ(c.at("hot_list_keys"), 2u);
  EXPECT_EQ(c.at("threshold_milli"), 2500u);
}

exo::ReportReply report(ControlService& svc, const std::string& db,
                        std::vector<std::pair<std::string, double>> keys) {
  exo::ReportRequest req;
  req.set_db_node(db);
  for (auto& [k, r] : keys) {
    auto* kl = req.add_keys();
    kl->set_key(k);
    kl->set_rate(r);
  }
  exo::ReportReply rep;
  EXPECT_TRUE(svc.Report(nullptr, &req, &rep).ok());
  return rep;
}

TEST_F(ControlServiceTest, ReportFeedsHotList) {
  auto rep = report(svc_, "db0", {{"a", 3}, {"b", 9}});
  EXPECT_TRUE(rep.accepted()) << rep.error();
  EXPECT_EQ(hot_.snapshot(now_ms_), (std::vector<KeyRate>{{"b", 9}, {"a", 3}}));
  EXPECT_EQ(cp_.reports_received.load(), 1u);
  EXPECT_EQ(cp_.reports_rejected.load(), 0u);
  // Stamped with the service's clock: expires report_ttl_ms later.
  EXPECT_TRUE(hot_.snapshot(now_ms_ + 3001).empty());
}

TEST_F(ControlServiceTest, ReportValidation) {
  auto unknown = report(svc_, "db9", {{"a", 1}});
  EXPECT_FALSE(unknown.accepted());
  EXPECT_NE(unknown.error().find("db9"), std::string::npos);
  EXPECT_FALSE(report(svc_, "db0", {{std::string(exo::wire::kMaxKeyLen + 1, 'k'), 1}}).accepted());
  EXPECT_FALSE(report(svc_, "db0", {{"", 1}}).accepted());
  EXPECT_FALSE(report(svc_, "db0", {{"a", std::nan("")}}).accepted());
  EXPECT_FALSE(report(svc_, "db0", {{"a", -1}}).accepted());
  EXPECT_TRUE(report(svc_, "db0", {{std::string(exo::wire::kMaxKeyLen, 'k'), 1}}).accepted());
  EXPECT_EQ(cp_.reports_rejected.load(), 5u);
  EXPECT_EQ(cp_.reports_received.load(), 1u);
  EXPECT_EQ(hot_.key_count(), 1u) << "a refused REPORT must not touch the hot list";
}

TEST_F(ControlServiceTest, CacheSkipsKeysBeingRemovedAndCancelsRetiring) {
  start_servers();
  call_cache({"a", "b"});
  retire("b");
  take_retiring();  // b: removal in flight
  retire("a");      // the filler retired it; removal not sent yet
  auto rep = call_cache({"a", "b"});
  EXPECT_EQ(skipped(rep), Keys{"b"});
  EXPECT_EQ(rep.done(), 1u);
  EXPECT_EQ(state_.keys.rule("a"), RulePhase::kNone) << "an explicit Cache() cancels the retirement";
  EXPECT_TRUE(state_.keys.removing("b"));
}

TEST_F(ControlServiceTest, EvictClearsRetirement) {
  start_servers();
  call_cache({"a", "b"});
  retire("b");
  take_retiring();
  retire("a");
  auto rep = call_evict({"a", "b"});
  EXPECT_EQ(rep.done(), 2u);
  EXPECT_EQ(state_.keys.retiring_count(), 0u);
  EXPECT_EQ(state_.keys.removing_count(), 0u);
}

TEST_F(ControlServiceTest, ResetDropsEverythingAndCallsNoPeer) {
  start_servers();
  call_cache({"a", "b", "c"});
  ASSERT_EQ(get("a"), Action::kReply);
  EXPECT_TRUE(prepare("b", 7, false, "B2").cached());
  retire("c");
  const size_t adds = ctl_.added.size(), removes = ctl_.removed.size();
  const size_t fetches = db_.fetched.size(), evicts = db_.evicted.size();

  auto rep = reset();
  EXPECT_EQ(rep.done(), 3u) << "entries dropped, the pending one included";
  EXPECT_EQ(rep.error(), "");
  EXPECT_EQ(state_.map.size(), 0u);
  EXPECT_EQ(state_.map.pending_count(), 0u);
  EXPECT_EQ(state_.keys.retiring_count(), 0u) << "its rule is gone already: nothing to remove";
  EXPECT_EQ(cp_.resets.load(), 1u);
  EXPECT_EQ(state_.keys.resets(), 1u);
  // The controller withdrew the rules and the db nodes forgot this node: neither is called.
  EXPECT_EQ(ctl_.added.size(), adds);
  EXPECT_EQ(ctl_.removed.size(), removes);
  EXPECT_EQ(db_.fetched.size(), fetches);
  EXPECT_EQ(db_.evicted.size(), evicts);

  // GETs still routed here (a rule the switch has not dropped yet) go to the db node.
  for (auto k : {"a", "b", "c"}) EXPECT_EQ(get(k), Action::kForward) << k;
  // A late Commit of the dropped pending write finds nothing to update.
  auto late = tx(true, "b", 7);
  EXPECT_TRUE(late.ok());
  EXPECT_FALSE(late.cached());

  exo::StatsReply st;
  svc_.Stats(nullptr, nullptr, &st);
  std::map<std::string, uint64_t> c;
  for (const auto& x : st.counters()) c[x.name()] = x.value();
  EXPECT_EQ(c.at("resets"), 1u);
  EXPECT_EQ(c.at("entries"), 0u);
  EXPECT_EQ(reset().done(), 0u) << "nothing left";

  // The node fills again as after a start.
  auto again = call_cache({"a"});
  EXPECT_EQ(again.done(), 1u);
  EXPECT_EQ(get("a"), Action::kReply);
}

TEST_F(ControlServiceTest, FetchInFlightDuringResetInsertsNothing) {
  start_servers();
  bool ran = false;
  db_.during_fetch = [&](const std::string& k) {
    if (k != "a") return;
    ran = true;
    EXPECT_EQ(reset().done(), 0u);
    // Not even a write committed after the Reset (its Fetch may have reached the db node after
    // ForgetCacheNode, so the db node propagates to us again) brings the key in.
    EXPECT_TRUE(prepare("a", 5, false, "A2").cached());
    EXPECT_TRUE(tx(true, "a", 5).ok());
  };
  auto rep = call_cache({"a", "b"});
  EXPECT_TRUE(ran);
  EXPECT_EQ(rep.done(), 0u);
  EXPECT_EQ(skipped(rep), (Keys{"a", "b"}));
  EXPECT_EQ(state_.map.size(), 0u);
  EXPECT_EQ(state_.keys.fetching_count(), 0u);
  EXPECT_TRUE(ctl_.added.empty()) << "no rule for a key that was not inserted";
  // The Fetch may have marked them again at the db node: untracked.
  EXPECT_EQ(db_.evicted, (Keys{"a", "b"}));
  EXPECT_EQ(get("a"), Action::kForward);
  EXPECT_EQ(get("b"), Action::kForward);
  db_.during_fetch = nullptr;
  EXPECT_EQ(call_cache({"a"}).done(), 1u) << "fetched again afterwards";
}

TEST_F(ControlServiceTest, EvictDuringFetchWinsOverALaterCommit) {
  start_servers();
  db_.during_fetch = [&](const std::string& k) {
    if (k != "a") return;
    call_evict({"a"});
    EXPECT_TRUE(prepare("a", 5, false, "A2").cached());
    EXPECT_TRUE(tx(true, "a", 5).ok());
  };
  auto rep = call_cache({"a"});
  EXPECT_EQ(rep.done(), 0u);
  EXPECT_EQ(state_.map.find("a"), nullptr) << "an evicted key came back through a commit";
  EXPECT_EQ(state_.keys.removing_count(), 0u);
}

// Fetch and Evict follow the heads the controller pushed (SetHeads), not the config's owner:
// once db0's slots moved to db1, db0 is asked nothing and db1 gets both.
TEST(ControlServiceHeadsTest, FetchAndEvictGoToThePushedHead) {
  const std::string base = "/tmp/exo-cn-heads-" + std::to_string(getpid());
  exo::Cluster cluster;
  cluster.mtu = 1500;
  cluster.partition_bits = 1;
  cluster.security.insecure_dev_mode = true;
  cluster.controller_grpc = "unix:" + base + "-ctl.sock";
  for (const char* n : {"db0", "db1"}) {
    exo::DbNodeInfo db;
    db.name = n;
    db.grpc = "unix:" + base + "-" + n + ".sock";
    cluster.db_nodes.push_back(db);
  }
  cluster.slot_owner = {0, 0};
  FakeDb db0, db1;
  FakeController ctl;
  db0.data = db1.data = {{"a", "A"}};
  std::vector<std::unique_ptr<grpc::Server>> servers;
  for (auto [addr, svc] : {std::pair<std::string, grpc::Service*>{cluster.db_nodes[0].grpc, &db0},
                           std::pair<std::string, grpc::Service*>{cluster.db_nodes[1].grpc, &db1},
                           std::pair<std::string, grpc::Service*>{cluster.controller_grpc, &ctl}}) {
    unlink(addr.substr(5).c_str());
    grpc::ServerBuilder b;
    b.AddListeningPort(addr, grpc::InsecureServerCredentials());
    b.RegisterService(svc);
    servers.push_back(b.BuildAndStart());
    ASSERT_TRUE(servers.back()) << addr;
  }
  CacheState state(4);
  ctl.state = &state;
  CpCounters cp;
  DpCounters dp;
  HotList hot(3000);
  Heads heads(HeadsTable::from_cluster(cluster));
  GrpcPeers peers(cluster, "cache0", exo::GrpcSecurity::plaintext(), heads);
  ControlService svc(cluster, "cache0", state, cp, peers, heads, hot, [&] { return dp; });

  exo::SetHeadsRequest set;
  set.set_version(2);
  set.add_heads("db1");
  set.add_heads("db1");
  exo::SetHeadsReply set_rep;
  ASSERT_TRUE(svc.SetHeads(nullptr, &set, &set_rep).ok());
  EXPECT_EQ(set_rep.version(), 2u);

  exo::KeysRequest req;
  req.add_keys("a");
  exo::KeysReply rep;
  ASSERT_TRUE(svc.Cache(nullptr, &req, &rep).ok());
  EXPECT_EQ(rep.done(), 1u) << rep.error();
  EXPECT_EQ(db1.fetched, Keys{"a"});
  EXPECT_TRUE(db0.fetched.empty()) << "fetched from the config's owner, no longer the head";
  rep.Clear();
  ASSERT_TRUE(svc.Evict(nullptr, &req, &rep).ok());
  EXPECT_EQ(db1.evicted, Keys{"a"});
  EXPECT_TRUE(db0.evicted.empty());
  for (auto& s : servers) s->Shutdown();
}

}  // namespace
