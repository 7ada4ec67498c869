// The DbNode service, called directly and over a real (unix-socket) gRPC server.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>

#include "control_service.h"
#include "records.h"
#include "test_util.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;

class ControlTest : public ::testing::Test {
 protected:
  FakeNode node;
  Cluster& cluster = node.cluster;
  FakeStore& store = node.store;
  CachedKeys& cached = node.cached;
  CounterSet counters;
  Counters& control = counters.add_block();
  ControlService svc{cluster, "db0", store, cached, node.resolver, counters, control};

  const std::string* holder(const std::string& k) { return cached.lock_key(B(k)).holder(k); }
  std::map<std::string, uint64_t> stats() {
    exo::StatsRequest req;
    exo::StatsReply rep;
    EXPECT_TRUE(svc.Stats(nullptr, &req, &rep).ok());
    EXPECT_EQ(rep.node(), "db0");
    std::map<std::string, uint64_t> m;
    for (const auto& c : rep.counters()) m[c.name()] = c.value();
    return m;
  }
};

TEST_F(ControlTest, FetchMarksFoundKeysAndReturnsValues) {
  store.data["a"] = "1";
  exo::FetchRequest req;
  req.add_keys("a");
  req.add_keys("missing");
  req.set_cache_node("cache0");
  exo::FetchReply rep;
  ASSERT_TRUE(svc.Fetch(nullptr, &req, &rep).ok());
  ASSERT_EQ(rep.values_size(), 2);
  EXPECT_EQ(rep.values(0).key(), "a");
  EXPECT_TRUE(rep.values(0).found());
  EXPECT_EQ(rep.values(0).value(), "1");
  EXPECT_EQ(rep.values(1).key(), "missing");
  EXPECT_FALSE(rep.values(1).found());
  ASSERT_NE(holder("a"), nullptr);
  EXPECT_EQ(*holder("a"), "cache0");
  EXPECT_EQ(holder("missing"), nullptr);  // not found -> not tracked
  EXPECT_EQ(cached.size(), 1u);
  EXPECT_EQ(stats()["fetched_keys"], 1u);
}

TEST_F(ControlTest, FetchPersistsTheMarkBeforeReturningTheValue) {
  store.data["a"] = "1";
  exo::FetchRequest req;
  req.add_keys("a");
  req.set_cache_node("cache0");
  exo::FetchReply rep;
  ASSERT_TRUE(svc.Fetch(nullptr, &req, &rep).ok());
  EXPECT_EQ(store.marks.at("a"), "cache0");
  EXPECT_EQ(store.synced_writes, 1);  // durable as configured (sync_writes)
}

// A mark that could not be made durable must not be used: after a restart the node would not
// know the cache node holds the key and would stop propagating its writes.
TEST_F(ControlTest, FetchWhoseMarkCannotBePersistedReturnsNothing) {
  store.data["a"] = "1";
  store.fail_marks = true;
  exo::FetchRequest req;
  req.add_keys("a");
  req.set_cache_node("cache0");
  exo::FetchReply rep;
  ASSERT_TRUE(svc.Fetch(nullptr, &req, &rep).ok());
  EXPECT_FALSE(rep.values(0).found());
  EXPECT_EQ(rep.values(0).value(), "");
  EXPECT_EQ(holder("a"), nullptr);
  EXPECT_EQ(stats()["errors"], 1u);
  EXPECT_EQ(stats()["fetched_keys"], 0u);
}

TEST_F(ControlTest, EvictDeletesTheMarkOnDiskToo) {
  store.data["a"] = "1";
  exo::FetchRequest f;
  f.add_keys("a");
  f.set_cache_node("cache0");
  exo::FetchReply fr;
  ASSERT_TRUE(svc.Fetch(nullptr, &f, &fr).ok());
  exo::EvictRequest req;
  req.add_keys("a");
  req.set_cache_node("cache0");
  exo::EvictReply rep;
  ASSERT_TRUE(svc.Evict(nullptr, &req, &rep).ok());
  EXPECT_EQ(rep.evicted(), 1u);
  EXPECT_TRUE(store.marks.empty());
}

TEST_F(ControlTest, ForgetCacheNodeDropsItsMarksAndDecisions) {
  for (const std::string k : {"a", "b", "c"}) {
    cached.lock_key(B(k)).mark(k, k == "c" ? "cache1" : "cache0");
    store.marks[k] = k == "c" ? "cache1" : "cache0";
  }
  std::string v;
  ASSERT_TRUE(encode_txlog_value("cache0", "a", &v));
  store.txlog[txlog_key(5, Decision::kCommit)] = v;
  node.resolver.add(PendingDecision{5, Decision::kCommit, "cache0", "a"});
  node.resolver.add(PendingDecision{6, Decision::kAbort, "cache0", "b"});

  exo::ForgetCacheNodeRequest req;
  req.set_cache_node("cache0");
  exo::ForgetCacheNodeReply rep;
  ASSERT_TRUE(svc.ForgetCacheNode(nullptr, &req, &rep).ok());
  EXPECT_EQ(rep.keys_dropped(), 2u);
  EXPECT_EQ(rep.txns_dropped(), 2u);
  EXPECT_EQ(holder("a"), nullptr);
  EXPECT_EQ(holder("b"), nullptr);
  ASSERT_NE(holder("c"), nullptr);  // another cache node's key is left alone
  EXPECT_EQ(store.marks.size(), 1u);
  EXPECT_TRUE(store.txlog.empty());
  EXPECT_EQ(node.resolver.pending_count(), 0u);
  EXPECT_TRUE(node.prop.commit_txids.empty());  // nothing is sent to the forgotten node
}

TEST_F(ControlTest, ForgetUnknownCacheNodeIsInvalidArgument) {
  exo::ForgetCacheNodeRequest req;
  req.set_cache_node("nosuch");
  exo::ForgetCacheNodeReply rep;
  EXPECT_EQ(svc.ForgetCacheNode(nullptr, &req, &rep).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ControlTest, FetchReadErrorIsNotTrackedAndCounted) {
  store.data["a"] = "1";
  store.fail_get = true;
  exo::FetchRequest req;
  req.add_keys("a");
  req.set_cache_node("cache0");
  exo::FetchReply rep;
  ASSERT_TRUE(svc.Fetch(nullptr, &req, &rep).ok());
  EXPECT_FALSE(rep.values(0).found());
  EXPECT_EQ(holder("a"), nullptr);
  EXPECT_EQ(stats()["errors"], 1u);
}

TEST_F(ControlTest, FetchForUnknownCacheNodeIsRejected) {
  store.data["a"] = "1";
  exo::FetchRequest req;
  req.add_keys("a");
  req.set_cache_node("nosuch");
  exo::FetchReply rep;
  const grpc::Status s = svc.Fetch(nullptr, &req, &rep);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(holder("a"), nullptr);
}

TEST_F(ControlTest, EvictUnmarksOnlyForTheHoldingCacheNode) {
  cached.lock_key(B("a")).mark("a", "cache0");
  cached.lock_key(B("b")).mark("b", "cache0");
  exo::EvictRequest req;
  req.add_keys("a");
  req.add_keys("b");
  req.add_keys("never");
  req.set_cache_node("cache1");
  exo::EvictReply rep;
  ASSERT_TRUE(svc.Evict(nullptr, &req, &rep).ok());
  EXPECT_EQ(rep.evicted(), 0u);
  EXPECT_EQ(cached.size(), 2u);
  req.set_cache_node("cache0");
  ASSERT_TRUE(svc.Evict(nullptr, &req, &rep).ok());
  EXPECT_EQ(rep.evicted(), 2u);
  EXPECT_EQ(cached.size(), 0u);
  EXPECT_EQ(holder("a"), nullptr);
  EXPECT_EQ(stats()["evicted_keys"], 2u);
}

TEST_F(ControlTest, StatsListsEveryCounterAndTheGauge) {
  Counters& t = counters.add_block();
  bump(t.gets, 2);
  bump(control.gets);
  cached.lock_key(B("a")).mark("a", "cache0");
  auto m = stats();
  EXPECT_EQ(m.size(), kNumCounters + 1);
  EXPECT_TRUE(m.count("hot_sampled"));
  EXPECT_TRUE(m.count("reports_sent"));
  EXPECT_TRUE(m.count("report_errors"));
  EXPECT_EQ(m["gets"], 3u);
  EXPECT_EQ(m["cached_keys"], 1u);
  EXPECT_TRUE(m.count("malformed_dropped"));
}

TEST_F(ControlTest, HotKeysWithoutAReporterIsRefused) {
  exo::StatsRequest req;
  exo::ReportRequest rep;
  EXPECT_EQ(svc.HotKeys(nullptr, &req, &rep).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// A sink that must never be used: HotKeys only builds the report.
class CountingSink : public ReportSink {
 public:
  int sends = 0;
  bool send(const exo::ReportRequest&, std::string*) override {
    ++sends;
    return true;
  }
};

TEST_F(ControlTest, HotKeysReturnsTheReportWithoutSendingIt) {
  HotKeysConfig cfg;
  cfg.sample_rate = 1;
  cfg.confidence_z = 0;  // exact figures; the bound has its own test
  cfg.report_keys = 2;
  HotKeyDetector detector(cfg, 5000);
  for (int i = 0; i < 30; ++i) detector.observe("hot", 5100);
  for (int i = 0; i < 20; ++i) detector.observe("warm", 5100);
  for (int i = 0; i < 10; ++i) detector.observe("cool", 5100);
  CountingSink sink;
  Reporter reporter(cfg, "db0", detector, counters, counters.add_block(), &sink,
                    [] { return uint64_t{5500}; });
  ControlService with(cluster, "db0", store, cached, node.resolver, counters, control, &reporter);

  TempDir dir;
  const std::string addr = "unix:" + (dir.path / "db0.sock").string();
  std::string err;
  auto server = start_control_server(addr, with, *exo::GrpcSecurity::plaintext(), &err);
  ASSERT_TRUE(server) << err;
  auto stub = exo::DbNode::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  exo::ReportRequest rep;
  for (int round = 0; round < 2; ++round) {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->HotKeys(&ctx, exo::StatsRequest(), &rep).ok());
  }
  server->Shutdown();
  EXPECT_EQ(sink.sends, 0);
  EXPECT_EQ(rep.db_node(), "db0");
  EXPECT_EQ(rep.seq(), 1u);  // asking twice does not use up sequence numbers
  EXPECT_EQ(rep.sampled(), 60u);
  ASSERT_EQ(rep.keys_size(), 2);
  EXPECT_EQ(rep.keys(0).key(), "hot");
  EXPECT_EQ(rep.keys(1).key(), "warm");
  // Half a segment in, weight 8·0.5 of the only live segment: 30 / 0.5 s = 60/s.
  EXPECT_DOUBLE_EQ(rep.keys(0).rate(), 60.0);
  EXPECT_DOUBLE_EQ(rep.keys(1).rate(), 40.0);
}

TEST_F(ControlTest, ServesOverUnixSocketAndReplacesAStaleSocketFile) {
  TempDir dir;
  const std::string path = (dir.path / "db0.sock").string();
  std::string err;
  {
    // What a crashed run leaves: a socket file nobody listens on (gRPC unlinks it on a clean
    // shutdown, so make one by hand).
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    close(fd);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  auto server = start_control_server("unix:" + path, svc, *exo::GrpcSecurity::plaintext(), &err);
  ASSERT_TRUE(server) << err;
  auto stub = exo::DbNode::NewStub(grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  exo::StatsRequest req;
  exo::StatsReply rep;
  ASSERT_TRUE(stub->Stats(&ctx, req, &rep).ok());
  EXPECT_EQ(rep.node(), "db0");
  server->Shutdown();
}

TEST_F(ControlTest, RefusesToRemoveANonSocketFile) {
  TempDir dir;
  const auto path = dir.path / "not-a-socket";
  { std::ofstream(path) << "precious"; }
  std::string err;
  auto server = start_control_server("unix:" + path.string(), svc, *exo::GrpcSecurity::plaintext(), &err);
  EXPECT_FALSE(server);
  EXPECT_NE(err.find("not a socket"), std::string::npos) << err;
  EXPECT_TRUE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace exo::db
