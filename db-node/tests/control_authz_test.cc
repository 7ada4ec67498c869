// The db node over mutual TLS (grpc_security.h), with certificates made at test time
// (common/cpp/tests/test_pki.h): the DbNode service's caller checks (a cache node Fetches and
// Evicts only for itself, only the controller makes it forget a cache node, a proxy may call
// nothing), refusals counted in rpc_refused; a caller without a certificate refused
// UNAUTHENTICATED by every handler (rpc_refused), one of another CA or in plaintext in the
// handshake (tls_handshake_refused); and the db node's own channels (the propagator's
// Prepare/Commit/Abort, the reporter's REPORT) presenting its certificate to the cache node.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "control_service.h"
#include "grpc_security.h"
#include "propagator.h"
#include "reporter.h"
#include "test_util.h"
#include "tests/attacker_channels.h"
#include "tests/test_pki.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;
using Code = grpc::StatusCode;

class DbAuthzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::exo::testing::make_test_pki(pki_.path, {"db0", "cache0", "cache1", "controller", "operator", "proxy0"});
    cluster.security.insecure_dev_mode = false;
    cluster.security.cert_dir = pki_.str();
    CacheNodeInfo cache1 = cluster.cache_nodes[0];
    cache1.name = "cache1";
    cluster.cache_nodes.push_back(cache1);
    cluster.proxies.push_back({"proxy0", "client0", ""});
    address_ = "unix:" + pki_.str() + "/db0.sock";
    store.data["a"] = "1";
    std::string err;
    server_ = start_control_server(address_, svc, *exo::GrpcSecurity::load(cluster, "db0"), &err);
    ASSERT_TRUE(server_) << err;
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }
  std::unique_ptr<exo::DbNode::Stub> as(const std::string& name) {
    return exo::DbNode::NewStub(exo::GrpcSecurity::load(cluster, name)->channel(address_, "db0"));
  }
  grpc::Status fetch(const std::string& who, const std::string& for_node, exo::FetchReply* rep) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    exo::FetchRequest req;
    req.add_keys("a");
    req.set_cache_node(for_node);
    return as(who)->Fetch(&ctx, req, rep);
  }
  grpc::Status evict(const std::string& who, const std::string& for_node) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    exo::EvictRequest req;
    req.add_keys("a");
    req.set_cache_node(for_node);
    exo::EvictReply rep;
    return as(who)->Evict(&ctx, req, &rep);
  }
  grpc::Status forget(const std::string& who) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    exo::ForgetCacheNodeRequest req;
    req.set_cache_node("cache0");
    exo::ForgetCacheNodeReply rep;
    return as(who)->ForgetCacheNode(&ctx, req, &rep);
  }
  const std::string* holder(const std::string& k) { return cached.lock_key(B(k)).holder(k); }

  ::exo::testing::PkiDir pki_;  // declared first: removed last
  FakeNode node;
  Cluster& cluster = node.cluster;
  FakeStore& store = node.store;
  CachedKeys& cached = node.cached;
  CounterSet counters;
  Counters& control = counters.add_block();
  ControlService svc{cluster, "db0", store, cached, node.resolver, counters, control};
  std::string address_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(DbAuthzTest, CacheNodeFetchesForItselfOnly) {
  exo::FetchReply rep;
  const grpc::Status s = fetch("cache0", "cache1", &rep);
  EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("cache_node 'cache1' is not the caller"), std::string::npos) << s.error_message();
  EXPECT_EQ(holder("a"), nullptr) << "a refused Fetch marked the key";
  EXPECT_EQ(control.rpc_refused.load(), 1u);
  ASSERT_TRUE(fetch("cache0", "cache0", &rep).ok());
  ASSERT_EQ(rep.values_size(), 1);
  EXPECT_EQ(rep.values(0).value(), "1");
  ASSERT_NE(holder("a"), nullptr);
  EXPECT_EQ(*holder("a"), "cache0");
}

TEST_F(DbAuthzTest, CacheNodeEvictsForItselfOnly) {
  exo::FetchReply rep;
  ASSERT_TRUE(fetch("cache0", "cache0", &rep).ok());
  // cache1 would stop the propagation of writes to cache0: stale reads there.
  EXPECT_EQ(evict("cache1", "cache0").error_code(), Code::PERMISSION_DENIED);
  ASSERT_NE(holder("a"), nullptr);
  EXPECT_EQ(control.rpc_refused.load(), 1u);
  ASSERT_TRUE(evict("cache0", "cache0").ok());
  EXPECT_EQ(holder("a"), nullptr);
}

TEST_F(DbAuthzTest, OnlyTheControllerMakesItForgetACacheNode) {
  exo::FetchReply rep;
  ASSERT_TRUE(fetch("cache0", "cache0", &rep).ok());
  for (const char* who : {"cache0", "operator", "proxy0"})
    EXPECT_EQ(forget(who).error_code(), Code::PERMISSION_DENIED) << who;
  ASSERT_NE(holder("a"), nullptr);
  EXPECT_EQ(control.rpc_refused.load(), 3u);
  ASSERT_TRUE(forget("controller").ok());
  EXPECT_EQ(holder("a"), nullptr);
}

std::vector<grpc::Status> call_every_rpc(exo::DbNode::Stub& stub);

TEST_F(DbAuthzTest, AProxyMayCallNothingAndRefusalsShowInStats) {
  auto proxy = as("proxy0");
  exo::StatsReply st;
  std::vector<grpc::Status> got = call_every_rpc(*proxy);
  ASSERT_EQ(got.size(), static_cast<size_t>(exo::rpc_method("exo.DbNode.Stats")->service()->method_count()));
  for (const auto& s : got) EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED) << s.error_message();
  grpc::ClientContext ctx;
  ASSERT_TRUE(as("operator")->Stats(&ctx, {}, &st).ok());
  std::map<std::string, uint64_t> m;
  for (const auto& c : st.counters()) m[c.name()] = c.value();
  EXPECT_EQ(m["rpc_refused"], got.size());
}

// Every DbNode rpc once, with empty requests, on `stub`.
std::vector<grpc::Status> call_every_rpc(exo::DbNode::Stub& stub) {
  exo::FetchReply f;
  exo::EvictReply e;
  exo::StatsReply st;
  exo::ReportRequest hk;
  exo::ForgetCacheNodeReply fg;
  exo::ReplicateReply rp;
  exo::SlotDigestReply sd;
  exo::SetChainsReply sc;
  exo::ChainStatusReply cs;
  exo::ReplicateBatchReply rb;
  grpc::ClientContext c[11];
  for (auto& ctx : c) ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::vector<grpc::Status> out = {
      stub.Fetch(&c[0], {}, &f), stub.Evict(&c[1], {}, &e), stub.Stats(&c[2], {}, &st),
      stub.HotKeys(&c[3], {}, &hk), stub.ForgetCacheNode(&c[4], {}, &fg),
      stub.Replicate(&c[5], {}, &rp), stub.SlotDigest(&c[6], {}, &sd),
      stub.SetChains(&c[7], {}, &sc), stub.ChainStatus(&c[8], {}, &cs),
      stub.ReplicateBatch(&c[10], {}, &rb)};
  exo::CopySlotChunk chunk;
  auto reader = stub.CopySlot(&c[9], {});
  while (reader->Read(&chunk)) {
  }
  out.push_back(reader->Finish());
  return out;
}

TEST_F(DbAuthzTest, WithoutACertificateEveryRpcIsUnauthenticatedAndCounted) {
  exo::FetchReply rep;
  ASSERT_TRUE(fetch("cache0", "cache0", &rep).ok());
  auto stub = exo::DbNode::NewStub(::exo::testing::channel_without_certificate(address_, pki_.path, "db0"));
  const std::vector<grpc::Status> got = call_every_rpc(*stub);
  ASSERT_EQ(got.size(), static_cast<size_t>(exo::rpc_method("exo.DbNode.Stats")->service()->method_count()));
  for (const auto& s : got) {
    EXPECT_EQ(s.error_code(), Code::UNAUTHENTICATED) << s.error_message();
    EXPECT_NE(s.error_message().find("no client certificate"), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(control.rpc_refused.load(), got.size());
  EXPECT_EQ(control.tls_handshake_refused.load(), 0u) << "the handshake itself succeeded";
  ASSERT_NE(holder("a"), nullptr) << "a refused ForgetCacheNode/Evict untracked the key";
}

TEST_F(DbAuthzTest, RogueAndPlaintextCallersAreRefusedHandshakesInStats) {
  ::exo::testing::PkiDir rogue;
  auto r = exo::DbNode::NewStub(::exo::testing::rogue_channel(address_, pki_.path, rogue.path, "db0"));
  auto p = exo::DbNode::NewStub(::exo::testing::plaintext_channel(address_));
  uint64_t n = 0;
  for (exo::DbNode::Stub* stub : {r.get(), p.get()}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    exo::ForgetCacheNodeReply rep;
    EXPECT_EQ(stub->ForgetCacheNode(&ctx, {}, &rep).error_code(), Code::UNAVAILABLE);
    ++n;
    EXPECT_TRUE(::exo::testing::eventually([&] { return control.tls_handshake_refused.load() >= n; })) << n;
  }
  grpc::ClientContext ctx;
  exo::StatsReply st;
  ASSERT_TRUE(as("operator")->Stats(&ctx, {}, &st).ok());
  std::map<std::string, uint64_t> m;
  for (const auto& c : st.counters()) m[c.name()] = c.value();
  ASSERT_TRUE(m.count("tls_handshake_refused"));
  EXPECT_EQ(m["tls_handshake_refused"], 2u);
  EXPECT_EQ(m["rpc_refused"], 0u) << "no call reached a handler";
}

// A CacheNode standing in for cache0 over TLS: records who called (the certificate name).
struct CallerRecordingCache final : exo::CacheNode::Service {
  std::mutex mu;
  std::vector<std::string> callers;
  void record(grpc::ServerContext* ctx, const char* what) {
    std::lock_guard lk(mu);
    callers.push_back(std::string(what) + " " + exo::caller(ctx));
  }
  grpc::Status Prepare(grpc::ServerContext* ctx, const exo::PrepareRequest*, exo::TxReply* o) override {
    record(ctx, "prepare");
    o->set_ok(true);
    o->set_cached(true);
    return grpc::Status::OK;
  }
  grpc::Status Commit(grpc::ServerContext* ctx, const exo::TxRequest*, exo::TxReply* o) override {
    record(ctx, "commit");
    o->set_ok(true);
    o->set_cached(true);
    return grpc::Status::OK;
  }
  grpc::Status Report(grpc::ServerContext* ctx, const exo::ReportRequest*, exo::ReportReply* o) override {
    record(ctx, "report");
    o->set_accepted(true);
    return grpc::Status::OK;
  }
};

TEST_F(DbAuthzTest, PropagatorAndReporterPresentTheDbNodesCertificate) {
  const std::string cache_addr = "unix:" + pki_.str() + "/cache0.sock";
  cluster.cache_nodes[0].grpc = cache_addr;
  CallerRecordingCache cache;
  grpc::ServerBuilder b;
  b.AddListeningPort(cache_addr, exo::GrpcSecurity::load(cluster, "cache0")->server_credentials());
  b.RegisterService(&cache);
  auto server = b.BuildAndStart();
  ASSERT_TRUE(server);

  const auto db0 = exo::GrpcSecurity::load(cluster, "db0");
  GrpcPropagator prop(cluster, db0, std::chrono::milliseconds(3000));
  const PrepareOutcome p = prop.prepare("cache0", B("k"), 1, false, B("v"));
  EXPECT_EQ(p.code, PrepareOutcome::kPrepared) << p.error;
  const FinishOutcome c = prop.commit("cache0", B("k"), 1);
  EXPECT_EQ(c.code, FinishOutcome::kDone) << c.error;
  GrpcReportSink sink(cache_addr, "cache0", db0, std::chrono::milliseconds(3000));
  exo::ReportRequest r;
  r.set_db_node("db0");
  std::string err;
  EXPECT_TRUE(sink.send(r, &err)) << err;
  // Dialing cache0's socket expecting cache1: cache0's certificate does not carry that name.
  Cluster misnamed = cluster;
  misnamed.cache_nodes[1].grpc = cache_addr;
  GrpcPropagator wrong(misnamed, db0, std::chrono::milliseconds(1000));
  const PrepareOutcome w = wrong.prepare("cache1", B("k"), 2, false, B("v"));
  EXPECT_EQ(w.code, PrepareOutcome::kFailed) << w.error;
  EXPECT_NE(w.error.find("Prepare to cache1: 14"), std::string::npos) << w.error;  // UNAVAILABLE
  server->Shutdown(std::chrono::system_clock::now());
  EXPECT_EQ(cache.callers, (std::vector<std::string>{"prepare db0", "commit db0", "report db0"}));
}

}  // namespace
}  // namespace exo::db
