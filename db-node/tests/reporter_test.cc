// Reporter with a recording sink and a fake clock: report contents, seq, load, failure
// counting, and a thread that starts and stops promptly.
#include "reporter.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "exoproto/control.grpc.pb.h"
#include "test_util.h"

namespace exo::db {
namespace {

class FakeSink : public ReportSink {
 public:
  bool ok = true;
  bool send(const exo::ReportRequest& r, std::string* error) override {
    std::lock_guard<std::mutex> lk(mu);
    sent.push_back(r);
    if (!ok) *error = "injected";
    return ok;
  }
  size_t count() {
    std::lock_guard<std::mutex> lk(mu);
    return sent.size();
  }
  std::mutex mu;
  std::vector<exo::ReportRequest> sent;
};

uint64_t value(const CounterSet& set, const std::string& name) {
  const CounterValues v = set.sum();
  for (size_t i = 0; i < kNumCounters; ++i)
    if (name == kCounterDescs[i].name) return v[i];
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

HotKeysConfig small_config() {
  HotKeysConfig cfg;
  cfg.top_k = 20;
  cfg.sample_rate = 1;
  cfg.confidence_z = 0;  // exact figures; the bound has its own test
  cfg.segment_ms = 1000;
  cfg.segments = 2;
  cfg.weights = {2, 1};
  cfg.load_ewma_alpha = 0.5;
  cfg.report_keys = 3;
  return cfg;
}

class ReporterTest : public ::testing::Test {
 protected:
  HotKeysConfig cfg = small_config();  // first: the members below are built from it
  std::atomic<uint64_t> now{1000};
  HotKeyDetector detector{cfg, 1000};
  CounterSet counters;
  Counters& traffic = counters.add_block();
  Counters& own = counters.add_block();
  FakeSink sink;
  Reporter reporter{cfg, "db0", detector, counters, own, &sink, [this] { return now.load(); }};

  // key i observed (i + 1) times in the first segment: k4 hottest.
  void observe_keys() {
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j <= i; ++j) detector.observe("k" + std::to_string(i), 1100);
  }
};

TEST_F(ReporterTest, ReportHasAtMostReportKeysHottestFirstAndSeqIncrements) {
  observe_keys();
  reporter.tick(1500);
  reporter.tick(1750);
  ASSERT_EQ(sink.sent.size(), 2u);
  const auto& r = sink.sent[0];
  EXPECT_EQ(r.db_node(), "db0");
  ASSERT_EQ(r.keys_size(), 3);  // report_keys, out of 5 tracked
  EXPECT_EQ(r.keys(0).key(), "k4");
  EXPECT_EQ(r.keys(1).key(), "k3");
  EXPECT_EQ(r.keys(2).key(), "k2");
  // Only the current segment, half full: (2·0.5·5/0.5) / 1 = 10/s.
  EXPECT_DOUBLE_EQ(r.keys(0).rate(), 10.0);
  EXPECT_GT(r.keys(1).rate(), r.keys(2).rate());
  EXPECT_EQ(r.sampled(), 15u);
  EXPECT_EQ(sink.sent[0].seq() + 1, sink.sent[1].seq());
  EXPECT_EQ(value(counters, "reports_sent"), 2u);
  EXPECT_EQ(value(counters, "report_errors"), 0u);
}

TEST_F(ReporterTest, LoadIsTheEwmaOfGetsPutsAndDeletes) {
  reporter.tick(1000);  // base
  bump(traffic.gets, 80);
  bump(traffic.puts, 15);
  bump(traffic.deletes, 5);
  bump(traffic.not_found, 1000);  // not a request kind: must not count
  reporter.tick(1250);  // 100 requests in 0.25 s
  EXPECT_DOUBLE_EQ(sink.sent.back().load(), 400.0);
  bump(traffic.gets, 200);
  reporter.tick(1500);  // 800/s: 0.5·800 + 0.5·400
  EXPECT_DOUBLE_EQ(sink.sent.back().load(), 600.0);
}

TEST_F(ReporterTest, PeekSendsNothingAndUsesNoSequenceNumber) {
  observe_keys();
  reporter.tick(1200);
  now = 1500;
  const exo::ReportRequest a = reporter.peek();
  const exo::ReportRequest b = reporter.peek();
  EXPECT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(a.seq(), sink.sent[0].seq() + 1);  // what the next report will carry
  EXPECT_EQ(b.seq(), a.seq());
  EXPECT_EQ(a.keys_size(), 3);
  EXPECT_EQ(a.keys(0).key(), "k4");
  reporter.tick(1600);
  EXPECT_EQ(sink.sent.back().seq(), a.seq());
}

TEST_F(ReporterTest, FailedSendsAreCounted) {
  sink.ok = false;
  reporter.tick(1100);
  reporter.tick(1200);
  EXPECT_EQ(value(counters, "report_errors"), 2u);
  EXPECT_EQ(value(counters, "reports_sent"), 0u);
  sink.ok = true;
  reporter.tick(1300);
  EXPECT_EQ(value(counters, "reports_sent"), 1u);
  EXPECT_EQ(sink.sent[2].seq(), sink.sent[0].seq() + 2);  // failures still used their numbers
}

TEST_F(ReporterTest, ThreadReportsEveryIntervalAndStopsPromptly) {
  HotKeysConfig fast = cfg;
  fast.report_interval_ms = 10;
  Reporter r(fast, "db0", detector, counters, own, &sink, [this] { return now.load(); });
  r.start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (sink.count() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  r.stop();
  EXPECT_GE(sink.count(), 3u);

  HotKeysConfig slow = cfg;
  slow.report_interval_ms = 60000;
  Reporter idle(slow, "db0", detector, counters, own, &sink, [this] { return now.load(); });
  idle.start();
  const auto t0 = std::chrono::steady_clock::now();
  idle.stop();  // wakes the wait instead of sleeping out the minute
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
}

TEST_F(ReporterTest, NoSinkNoThread) {
  Reporter r(cfg, "db0", detector, counters, own, nullptr, [this] { return now.load(); });
  r.start();  // refuses: nobody to send to
  r.tick(1500);  // still builds (and drops) a report without crashing
  r.stop();
  EXPECT_EQ(value(counters, "reports_sent"), 0u);
  EXPECT_EQ(r.peek().db_node(), "db0");
}

// A cache node that only takes REPORTs.
class FakeCacheNode final : public exo::CacheNode::Service {
 public:
  bool accept = true;
  std::vector<exo::ReportRequest> got;
  grpc::Status Report(grpc::ServerContext*, const exo::ReportRequest* req,
                      exo::ReportReply* rep) override {
    got.push_back(*req);
    rep->set_accepted(accept);
    if (!accept) rep->set_error("not today");
    return grpc::Status::OK;
  }
};

TEST(GrpcReportSink, DeliversAndReportsRefusalsAndUnreachableNodes) {
  testing::TempDir dir;
  const std::string addr = "unix:" + (dir.path / "cache0.sock").string();
  FakeCacheNode cache;
  grpc::ServerBuilder b;
  b.AddListeningPort(addr, grpc::InsecureServerCredentials());
  b.RegisterService(&cache);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_TRUE(server);

  GrpcReportSink sink(addr, "cache0", exo::GrpcSecurity::plaintext());
  exo::ReportRequest r;
  r.set_db_node("db0");
  r.set_seq(7);
  r.add_keys()->set_key("k");
  std::string err;
  EXPECT_TRUE(sink.send(r, &err)) << err;
  cache.accept = false;
  EXPECT_FALSE(sink.send(r, &err));
  EXPECT_NE(err.find("not today"), std::string::npos) << err;
  server->Shutdown();
  ASSERT_EQ(cache.got.size(), 2u);
  EXPECT_EQ(cache.got[0].db_node(), "db0");
  EXPECT_EQ(cache.got[0].seq(), 7u);
  EXPECT_EQ(cache.got[0].keys(0).key(), "k");

  GrpcReportSink nobody("unix:" + (dir.path / "nobody.sock").string(), "cache0",
                        exo::GrpcSecurity::plaintext(), std::chrono::milliseconds(200));
  err.clear();
  EXPECT_FALSE(nobody.send(r, &err));
  EXPECT_FALSE(err.empty());
}

}  // namespace
}  // namespace exo::db
