// GrpcPropagator against a fake CacheNode service on a unix socket.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <thread>

#include "exoproto/control.grpc.pb.h"
#include "propagator.h"
#include "test_util.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;

class FakeCacheNode final : public exo::CacheNode::Service {
 public:
  bool ok = true, cached = true;
  std::mutex mu;
  std::vector<std::string> calls;

  grpc::Status Prepare(grpc::ServerContext*, const exo::PrepareRequest* r, exo::TxReply* o) override {
    std::lock_guard<std::mutex> lk(mu);
    calls.push_back("prepare " + r->key() + " " + std::to_string(r->txid()) +
                    (r->is_delete() ? " delete" : " put=" + r->value()));
    o->set_ok(ok);
    o->set_cached(cached);
    if (!ok) o->set_error("busy");
    return grpc::Status::OK;
  }
  grpc::Status Commit(grpc::ServerContext*, const exo::TxRequest* r, exo::TxReply* o) override {
    std::lock_guard<std::mutex> lk(mu);
    calls.push_back("commit " + r->key() + " " + std::to_string(r->txid()));
    o->set_ok(ok);
    o->set_cached(cached);
    return grpc::Status::OK;
  }
  grpc::Status Abort(grpc::ServerContext*, const exo::TxRequest* r, exo::TxReply* o) override {
    std::lock_guard<std::mutex> lk(mu);
    calls.push_back("abort " + r->key() + " " + std::to_string(r->txid()));
    o->set_ok(true);
    o->set_cached(cached);
    return grpc::Status::OK;
  }
};

class PropagatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path = (dir.path / "cache0.sock").string();
    cluster.cache_nodes[0].grpc = "unix:" + path;
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    b.RegisterService(&fake);
    server = b.BuildAndStart();
    ASSERT_TRUE(server);
  }
  void TearDown() override {
    if (server) server->Shutdown();
  }
  TempDir dir;
  std::string path;
  Cluster cluster = test_cluster();
  FakeCacheNode fake;
  std::unique_ptr<grpc::Server> server;
};

TEST_F(PropagatorTest, PrepareCommitAbortReachTheCacheNode) {
  GrpcPropagator p(cluster, exo::GrpcSecurity::plaintext());
  auto o = p.prepare("cache0", B("k"), 42, false, B("v"));
  EXPECT_EQ(o.code, PrepareOutcome::kPrepared) << o.error;
  auto c = p.commit("cache0", B("k"), 42);
  EXPECT_EQ(c.code, FinishOutcome::kDone) << c.error;
  c = p.abort("cache0", B("k"), 43);
  EXPECT_EQ(c.code, FinishOutcome::kDone) << c.error;
  o = p.prepare("cache0", B("k"), 44, true, B("ignored"));
  EXPECT_EQ(o.code, PrepareOutcome::kPrepared);
  std::lock_guard<std::mutex> lk(fake.mu);
  EXPECT_EQ(fake.calls, (std::vector<std::string>{"prepare k 42 put=v", "commit k 42", "abort k 43",
                                                  "prepare k 44 delete"}));
}

TEST_F(PropagatorTest, NotCachedAndRefusedAreDistinguished) {
  GrpcPropagator p(cluster, exo::GrpcSecurity::plaintext());
  fake.cached = false;
  EXPECT_EQ(p.prepare("cache0", B("k"), 1, false, B("v")).code, PrepareOutcome::kNotCached);
  fake.ok = false;
  auto o = p.prepare("cache0", B("k"), 2, false, B("v"));
  EXPECT_EQ(o.code, PrepareOutcome::kFailed);
  EXPECT_NE(o.error.find("busy"), std::string::npos) << o.error;
  // A refused Commit is a definitive answer (nothing of that txid pending there), unlike an
  // RPC failure.
  const auto c = p.commit("cache0", B("k"), 2);
  EXPECT_EQ(c.code, FinishOutcome::kRefused);
  EXPECT_TRUE(c.definitive());
  fake.ok = true;
  fake.cached = false;
  EXPECT_EQ(p.commit("cache0", B("k"), 2).code, FinishOutcome::kNotCached);
}

TEST_F(PropagatorTest, UnknownCacheNodeFails) {
  GrpcPropagator p(cluster, exo::GrpcSecurity::plaintext());
  auto o = p.prepare("nosuch", B("k"), 1, false, B("v"));
  EXPECT_EQ(o.code, PrepareOutcome::kFailed);
  EXPECT_NE(o.error.find("nosuch"), std::string::npos);
}

TEST_F(PropagatorTest, UnreachableCacheNodeFailsWithinTheDeadline) {
  server->Shutdown();
  server.reset();
  GrpcPropagator p(cluster, exo::GrpcSecurity::plaintext(), std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  auto o = p.prepare("cache0", B("k"), 1, false, B("v"));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(o.code, PrepareOutcome::kFailed);
  EXPECT_LT(took, std::chrono::seconds(2));
  const auto c = p.commit("cache0", B("k"), 1);
  EXPECT_EQ(c.code, FinishOutcome::kUnreachable);
  EXPECT_FALSE(c.definitive());
  EXPECT_FALSE(c.error.empty());
}

// After a cache node restart the channel must reconnect within about a second (reconnect
// backoff capped at 1 s, plus gRPC's 20% jitter). With gRPC's defaults (1 s initial backoff,
// x1.6 per failure, up to 120 s) the node below, down for 3 s, would next be tried about 2.2 s
// after it is back, and after a long outage only minutes later.
TEST_F(PropagatorTest, ReconnectsQuicklyAfterTheCacheNodeRestarts) {
  GrpcPropagator p(cluster, exo::GrpcSecurity::plaintext(), std::chrono::milliseconds(200));
  ASSERT_EQ(p.commit("cache0", B("k"), 1).code, FinishOutcome::kDone);
  server->Shutdown();
  server.reset();
  // Several failures in a row grow the backoff to its cap.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(p.commit("cache0", B("k"), 2).code, FinishOutcome::kUnreachable);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(&fake);
  server = b.BuildAndStart();
  ASSERT_TRUE(server);
  const auto t0 = std::chrono::steady_clock::now();
  FinishOutcome o;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    o = p.commit("cache0", B("k"), 3);
    if (o.code == FinishOutcome::kDone) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(o.code, FinishOutcome::kDone) << o.error;
  EXPECT_LT(took, std::chrono::milliseconds(2000));
}

TEST(TxIdSource, CountsUpFromTheStart) {
  TxIdSource t(TxIdSource::from_clock());
  const uint64_t a = t.next(), b = t.next();
  EXPECT_EQ(b, a + 1);
  EXPECT_GT(a, uint64_t{1'600'000'000} * 1'000'000'000);  // after 2020 in ns
}

}  // namespace
}  // namespace exo::db
