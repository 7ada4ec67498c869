// GrpcPropagator against a fake CacheNode service on a unix socket.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

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
    return grpc::Status::OK;
  }
  grpc::Status Abort(grpc::ServerContext*, const exo::TxRequest* r, exo::TxReply* o) override {
    std::lock_guard<std::mutex> lk(mu);
    calls.push_back("abort " + r->key() + " " + std::to_string(r->txid()));
    o->set_ok(true);
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
  GrpcPropagator p(cluster);
  auto o = p.prepare("cache0", B("k"), 42, false, B("v"));
  EXPECT_EQ(o.code, PrepareOutcome::kPrepared) << o.error;
  std::string err;
  EXPECT_TRUE(p.commit("cache0", B("k"), 42, &err)) << err;
  EXPECT_TRUE(p.abort("cache0", B("k"), 43, &err)) << err;
  o = p.prepare("cache0", B("k"), 44, true, B("ignored"));
  EXPECT_EQ(o.code, PrepareOutcome::kPrepared);
  std::lock_guard<std::mutex> lk(fake.mu);
  EXPECT_EQ(fake.calls, (std::vector<std::string>{"prepare k 42 put=v", "commit k 42", "abort k 43",
                                                  "prepare k 44 delete"}));
}

TEST_F(PropagatorTest, NotCachedAndRefusedAreDistinguished) {
  GrpcPropagator p(cluster);
  fake.cached = false;
  EXPECT_EQ(p.prepare("cache0", B("k"), 1, false, B("v")).code, PrepareOutcome::kNotCached);
  fake.ok = false;
  auto o = p.prepare("cache0", B("k"), 2, false, B("v"));
  EXPECT_EQ(o.code, PrepareOutcome::kFailed);
  EXPECT_NE(o.error.find("busy"), std::string::npos) << o.error;
  std::string err;
  EXPECT_FALSE(p.commit("cache0", B("k"), 2, &err));
}

TEST_F(PropagatorTest, UnknownCacheNodeFails) {
  GrpcPropagator p(cluster);
  auto o = p.prepare("nosuch", B("k"), 1, false, B("v"));
  EXPECT_EQ(o.code, PrepareOutcome::kFailed);
  EXPECT_NE(o.error.find("nosuch"), std::string::npos);
}

TEST_F(PropagatorTest, UnreachableCacheNodeFailsWithinTheDeadline) {
  server->Shutdown();
  server.reset();
  GrpcPropagator p(cluster, std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  auto o = p.prepare("cache0", B("k"), 1, false, B("v"));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(o.code, PrepareOutcome::kFailed);
  EXPECT_LT(took, std::chrono::seconds(2));
  std::string err;
  EXPECT_FALSE(p.commit("cache0", B("k"), 1, &err));
  EXPECT_FALSE(err.empty());
}

TEST(TxIdSource, CountsUpFromTheStart) {
  TxIdSource t(TxIdSource::from_clock());
  const uint64_t a = t.next(), b = t.next();
  EXPECT_EQ(b, a + 1);
  EXPECT_GT(a, uint64_t{1'600'000'000} * 1'000'000'000);  // after 2020 in ns
}

}  // namespace
}  // namespace exo::db
