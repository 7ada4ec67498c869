// The CacheNode service's caller checks over mutual TLS (grpc_security.h): the real
// ControlService served as "cache0" on a unix socket, called with certificates made at test time
// (common/cpp/tests/test_pki.h) by each kind of peer. Every rpc refuses a role control.proto does
// not allow it; Prepare/Commit/Abort come only from the db node heading the key's slot (or the
// emulator hosting it; the config's owner until SetHeads names another); a REPORT only in the
// caller's own name; refusals are counted in rpc_refused and change nothing. A caller without a certificate reaches every handler's check
// and is refused UNAUTHENTICATED there (rpc_refused); one with a certificate of another CA, or in
// plaintext, fails the handshake, counted in tls_handshake_refused (grpc_log_hook.h).
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "control_service.h"
#include "fake_peers.h"
#include "grpc_security.h"
#include "tests/attacker_channels.h"
#include "tests/test_pki.h"

namespace {

using namespace exo::cache;
using exo::testing::PkiDir;
using Code = grpc::StatusCode;

class ControlAuthzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    exo::testing::make_test_pki(pki_.path, {"cache0", "cache1", "db0", "emu0", "controller",
                                            "operator", "proxy0"});
    cluster_.mtu = 1500;
    cluster_.partition_bits = 1;
    cluster_.security.cert_dir = pki_.str();
    address_ = "unix:" + pki_.str() + "/cache0.sock";
    for (const char* n : {"cache0", "cache1"}) {
      exo::CacheNodeInfo c;
      c.name = n;
      c.grpc = std::string("unix:") + pki_.str() + "/" + n + ".sock";
      cluster_.cache_nodes.push_back(c);
    }
    exo::DbNodeInfo db0, db1;
    db0.name = "db0";
    db1.name = "db1";
    db1.emulator = "emu0";  // db1 has no certificate of its own: emu0 speaks for it
    cluster_.db_nodes = {db0, db1};
    cluster_.slot_owner = {0, 1};
    uint64_t v = 0;
    ASSERT_EQ(heads_.replace(HeadsTable::from_cluster(cluster_), &v), "");
    cluster_.proxies.push_back({"proxy0", "client0", ""});
    peers_.state = &state_;
    key0_ = key_of(0);
    key1_ = key_of(1);
    peers_.data = {{key0_, "old0"}, {key1_, "old1"}};
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }
  std::string key_of(uint32_t owner) {
    for (int i = 0;; ++i)
      if (std::string k = "k" + std::to_string(i); cluster_.owner_index(LruMap::hash_of(k)) == owner) return k;
  }
  void serve() {
    security_ = exo::GrpcSecurity::load(cluster_, "cache0");
    grpc::ServerBuilder b;
    b.AddListeningPort(address_, security_->server_credentials());
    b.RegisterService(&svc_);
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
  }
  // A stub to cache0 as certificate `name`, through the production channel factory.
  std::unique_ptr<exo::CacheNode::Stub> as(const std::string& name) {
    return exo::CacheNode::NewStub(exo::GrpcSecurity::load(cluster_, name)->channel(address_, "cache0"));
  }
  static void deadline(grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  grpc::Status cache(const std::string& who, const std::string& key) {
    grpc::ClientContext ctx;
    deadline(ctx);
    exo::KeysRequest req;
    req.add_keys(key);
    exo::KeysReply rep;
    return as(who)->Cache(&ctx, req, &rep);
  }
  grpc::Status prepare(const std::string& who, const std::string& key, uint64_t txid, const std::string& v,
                       exo::TxReply* rep) {
    grpc::ClientContext ctx;
    deadline(ctx);
    exo::PrepareRequest req;
    req.set_key(key);
    req.set_txid(txid);
    req.set_value(v);
    return as(who)->Prepare(&ctx, req, rep);
  }
  grpc::Status finish(const std::string& who, bool commit, const std::string& key, uint64_t txid) {
    grpc::ClientContext ctx;
    deadline(ctx);
    exo::TxRequest req;
    req.set_key(key);
    req.set_txid(txid);
    exo::TxReply rep;
    auto stub = as(who);
    return commit ? stub->Commit(&ctx, req, &rep) : stub->Abort(&ctx, req, &rep);
  }
  grpc::Status report(const std::string& who, const std::string& db_node) {
    grpc::ClientContext ctx;
    deadline(ctx);
    exo::ReportRequest req;
    req.set_db_node(db_node);
    req.add_keys()->set_key("hot");
    exo::ReportReply rep;
    grpc::Status s = as(who)->Report(&ctx, req, &rep);
    if (s.ok()) {
      EXPECT_TRUE(rep.accepted()) << rep.error();
    }
    return s;
  }
  grpc::Status set_heads(const std::string& who, uint64_t version, const std::vector<std::string>& heads,
                        uint64_t* held = nullptr) {
    grpc::ClientContext ctx;
    deadline(ctx);
    exo::SetHeadsRequest req;
    req.set_version(version);
    for (const auto& h : heads) req.add_heads(h);
    exo::SetHeadsReply rep;
    grpc::Status s = as(who)->SetHeads(&ctx, req, &rep);
    if (held != nullptr) *held = rep.version();
    return s;
  }
  std::string value_of(const std::string& key) {
    std::lock_guard lock(state_.mu);
    const auto* e = state_.map.find(key);
    return e ? e->value : "<absent>";
  }

  PkiDir pki_;
  exo::Cluster cluster_;
  std::string address_;
  std::string key0_, key1_;  // owned by db0, and by db1 (hosted by emu0)
  CacheState state_{8};
  CpCounters cp_;
  DpCounters dp_;
  exo::cache::testing::FakePeers peers_;
  // Built from cluster_ in SetUp (the config's owners) before any call reaches svc_.
  Heads heads_{HeadsTable{}};
  HotList hot_{3000};
  ControlService svc_{cluster_, "cache0", state_, cp_, peers_, heads_, hot_, [this] { return dp_; }};
  std::shared_ptr<const exo::GrpcSecurity> security_;
  std::unique_ptr<grpc::Server> server_;
};

// One call of every CacheNode rpc with an empty request, as certificate `who`.
std::map<std::string, grpc::Status> call_every_rpc(exo::CacheNode::Stub& stub) {
  using Call = std::function<grpc::Status(grpc::ClientContext*)>;
  exo::KeysReply keys;
  exo::TxReply tx;
  exo::CachedKeysReply listed;
  exo::StatsReply stats;
  exo::ReportReply reported;
  exo::SetHeadsReply heads;
  const std::map<std::string, Call> calls = {
      {"Cache", [&](auto* c) { return stub.Cache(c, {}, &keys); }},
      {"Evict", [&](auto* c) { return stub.Evict(c, {}, &keys); }},
      {"Prepare", [&](auto* c) { return stub.Prepare(c, {}, &tx); }},
      {"Commit", [&](auto* c) { return stub.Commit(c, {}, &tx); }},
      {"Abort", [&](auto* c) { return stub.Abort(c, {}, &tx); }},
      {"DropEntries", [&](auto* c) { return stub.DropEntries(c, {}, &keys); }},
      {"ListKeys", [&](auto* c) { return stub.ListKeys(c, {}, &listed); }},
      {"Stats", [&](auto* c) { return stub.Stats(c, {}, &stats); }},
      {"Report", [&](auto* c) { return stub.Report(c, {}, &reported); }},
      {"Reset", [&](auto* c) { return stub.Reset(c, {}, &keys); }},
      {"SetHeads", [&](auto* c) { return stub.SetHeads(c, {}, &heads); }},
  };
  std::map<std::string, grpc::Status> out;
  for (const auto& [name, call] : calls) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    out[name] = call(&ctx);
  }
  return out;
}

TEST_F(ControlAuthzTest, EveryRpcRefusesARoleItDoesNotAllow) {
  serve();
  const auto* service = exo::rpc_method("exo.CacheNode.Stats")->service();
  // A proxy may call nothing on a cache node.
  const auto got = call_every_rpc(*as("proxy0"));
  ASSERT_EQ(got.size(), static_cast<size_t>(service->method_count())) << "an rpc without a case here";
  for (const auto& [name, s] : got) {
    EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED) << name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find("'proxy0' (role proxy) may not call exo.CacheNode." + name),
              std::string::npos)
        << s.error_message();
  }
  EXPECT_EQ(cp_.rpc_refused.load(), got.size());
  // Each rpc lets through exactly its allowed_roles (an empty request is harmless to all).
  for (const char* who : {"controller", "operator", "db0", "cache1"}) {
    const std::string role = cluster_.role_of(who);
    for (const auto& [name, s] : call_every_rpc(*as(who))) {
      const auto* m = service->FindMethodByName(name);
      bool allowed = false;
      for (int i = 0; i < m->options().ExtensionSize(exo::allowed_roles); ++i)
        allowed |= m->options().GetExtension(exo::allowed_roles, i) == role;
      EXPECT_EQ(s.error_code() != Code::PERMISSION_DENIED, allowed)
          << who << " -> " << name << ": " << s.error_message();
    }
  }
}

TEST_F(ControlAuthzTest, WithoutACertificateEveryRpcIsUnauthenticatedAndCounted) {
  serve();
  ASSERT_TRUE(cache("operator", key0_).ok());
  auto stub = exo::CacheNode::NewStub(exo::testing::channel_without_certificate(address_, pki_.path, "cache0"));
  const auto got = call_every_rpc(*stub);
  ASSERT_EQ(got.size(), static_cast<size_t>(exo::rpc_method("exo.CacheNode.Stats")->service()->method_count()));
  for (const auto& [name, s] : got) {
    EXPECT_EQ(s.error_code(), Code::UNAUTHENTICATED) << name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find("exo.CacheNode." + name + ": no client certificate"), std::string::npos)
        << s.error_message();
  }
  EXPECT_EQ(cp_.rpc_refused.load(), got.size());
  EXPECT_EQ(cp_.tls_handshake_refused.load(), 0u) << "the handshake itself succeeded";
  EXPECT_EQ(value_of(key0_), "old0") << "a refused call changed the cache (Reset, DropEntries?)";
}

TEST_F(ControlAuthzTest, RogueAndPlaintextCallersAreRefusedHandshakesInStats) {
  serve();
  PkiDir rogue;
  const std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> attackers = {
      {"rogue", exo::testing::rogue_channel(address_, pki_.path, rogue.path, "cache0")},
      {"plaintext", exo::testing::plaintext_channel(address_)}};
  uint64_t n = 0;
  for (const auto& [who, channel] : attackers) {
    grpc::ClientContext ctx;
    deadline(ctx);
    exo::KeysReply rep;
    EXPECT_EQ(exo::CacheNode::NewStub(channel)->Reset(&ctx, {}, &rep).error_code(), Code::UNAVAILABLE) << who;
    ++n;
    EXPECT_TRUE(exo::testing::eventually([&] { return cp_.tls_handshake_refused.load() >= n; })) << who;
  }
  grpc::ClientContext ctx;
  exo::StatsReply rep;
  ASSERT_TRUE(as("operator")->Stats(&ctx, {}, &rep).ok());
  std::map<std::string, uint64_t> got;
  for (const auto& c : rep.counters()) got[c.name()] = c.value();
  ASSERT_TRUE(got.count("tls_handshake_refused"));
  EXPECT_EQ(got["tls_handshake_refused"], 2u);
  EXPECT_EQ(got["rpc_refused"], 0u) << "no call reached a handler";
  EXPECT_EQ(got["resets"], 0u);
}

TEST_F(ControlAuthzTest, OperatorCachesAndControllerResetsButNotTheOtherWayRound) {
  serve();
  ASSERT_TRUE(cache("operator", key0_).ok());
  EXPECT_EQ(value_of(key0_), "old0");
  EXPECT_EQ(cache("controller", key1_).error_code(), Code::PERMISSION_DENIED);
  grpc::ClientContext c1, c2;
  exo::KeysReply rep;
  EXPECT_EQ(as("operator")->Reset(&c1, {}, &rep).error_code(), Code::PERMISSION_DENIED);
  EXPECT_EQ(value_of(key0_), "old0") << "a refused Reset dropped entries";
  ASSERT_TRUE(as("controller")->Reset(&c2, {}, &rep).ok());
  EXPECT_EQ(rep.done(), 1u);
  EXPECT_EQ(cp_.rpc_refused.load(), 2u);
}

TEST_F(ControlAuthzTest, OnlyTheOwningDbNodePreparesAndCommits) {
  serve();
  ASSERT_TRUE(cache("operator", key0_).ok());
  exo::TxReply rep;
  // emu0 (for db1) and a cache node may not plant a value on db0's key.
  for (const char* who : {"emu0", "cache1"}) {
    const grpc::Status s = prepare(who, key0_, 99, "poison", &rep);
    EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED) << who;
    EXPECT_EQ(finish(who, true, key0_, 99).error_code(), Code::PERMISSION_DENIED) << who;
    EXPECT_EQ(finish(who, false, key0_, 99).error_code(), Code::PERMISSION_DENIED) << who;
  }
  const grpc::Status s = prepare("emu0", key0_, 99, "poison", &rep);
  EXPECT_NE(s.error_message().find("owned by 'db0'"), std::string::npos) << s.error_message();
  {
    std::lock_guard lock(state_.mu);
    EXPECT_EQ(state_.map.pending_count(), 0u) << "a refused Prepare left the key pending";
  }
  EXPECT_EQ(cp_.rpc_refused.load(), 7u);
  // The owner's write goes through.
  ASSERT_TRUE(prepare("db0", key0_, 100, "new0", &rep).ok());
  EXPECT_TRUE(rep.ok() && rep.cached()) << rep.error();
  ASSERT_TRUE(finish("db0", true, key0_, 100).ok());
  EXPECT_EQ(value_of(key0_), "new0");
  EXPECT_EQ(cp_.rpc_refused.load(), 7u);
}

TEST_F(ControlAuthzTest, AnEmulatorSpeaksForTheDbNodesItHosts) {
  serve();
  ASSERT_TRUE(cache("operator", key1_).ok());
  exo::TxReply rep;
  ASSERT_TRUE(prepare("emu0", key1_, 5, "new1", &rep).ok());
  EXPECT_TRUE(rep.ok() && rep.cached()) << rep.error();
  EXPECT_EQ(prepare("db0", key1_, 6, "poison", &rep).error_code(), Code::PERMISSION_DENIED);
  ASSERT_TRUE(finish("emu0", true, key1_, 5).ok());
  EXPECT_EQ(value_of(key1_), "new1");
}

TEST_F(ControlAuthzTest, ReportOnlyInTheCallersOwnName) {
  serve();
  EXPECT_TRUE(report("db0", "db0").ok());
  EXPECT_TRUE(report("emu0", "db1").ok());
  EXPECT_EQ(report("db0", "db1").error_code(), Code::PERMISSION_DENIED);
  const grpc::Status s = report("emu0", "db0");
  EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("db_node 'db0' is not the caller"), std::string::npos) << s.error_message();
  EXPECT_EQ(cp_.reports_received.load(), 2u);
  EXPECT_EQ(cp_.rpc_refused.load(), 2u);
}

TEST_F(ControlAuthzTest, RefusalsShowInStats) {
  serve();
  exo::TxReply tx;
  EXPECT_EQ(prepare("proxy0", key0_, 1, "x", &tx).error_code(), Code::PERMISSION_DENIED);
  grpc::ClientContext ctx;
  exo::StatsReply rep;
  ASSERT_TRUE(as("operator")->Stats(&ctx, {}, &rep).ok());
  std::map<std::string, uint64_t> got;
  for (const auto& c : rep.counters()) got[c.name()] = c.value();
  ASSERT_TRUE(got.count("rpc_refused"));
  EXPECT_EQ(got["rpc_refused"], 1u);
  EXPECT_EQ(got["tls_handshake_refused"], 0u) << "honest handshakes are not refusals";
}

TEST_F(ControlAuthzTest, InsecureDevModeServesPlaintextAndChecksNothing) {
  cluster_.security.insecure_dev_mode = true;
  serve();
  ASSERT_TRUE(security_->insecure());
  auto stub = exo::CacheNode::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    exo::KeysRequest req;
    req.add_keys(key0_);
    exo::KeysReply rep;
    ASSERT_TRUE(stub->Cache(&ctx, req, &rep).ok());
  }
  exo::PrepareRequest req;
  req.set_key(key0_);
  req.set_txid(7);
  req.set_value("anyone");
  exo::TxReply rep;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->Prepare(&ctx, req, &rep).ok());
  EXPECT_TRUE(rep.ok());
  EXPECT_EQ(cp_.rpc_refused.load(), 0u);
}

}  // namespace

// Design step 6: after a failover the controller names another head. The config's owner (db0)
// is then refused like any other db node (the known-bad input), and the new head (db1, spoken
// for by emu0) prepares and commits db0's old key. A bad or older table changes nothing.
TEST_F(ControlAuthzTest, SetHeadsMovesTheOwnerCheckToTheNewHead) {
  serve();
  ASSERT_TRUE(cache("operator", key0_).ok());
  exo::TxReply rep;
  // Only the controller sets heads.
  EXPECT_EQ(set_heads("operator", 5, {"db1", "db1"}).error_code(), Code::PERMISSION_DENIED);
  EXPECT_EQ(set_heads("emu0", 5, {"db1", "db1"}).error_code(), Code::PERMISSION_DENIED);
  // Bad tables are refused naming the field, and change nothing.
  grpc::Status s = set_heads("controller", 5, {"db1"});
  EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("heads: 1 entries, want one per slot: 2"), std::string::npos) << s.error_message();
  s = set_heads("controller", 5, {"db1", "db9"});
  EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("heads[1]: no db node named 'db9'"), std::string::npos) << s.error_message();
  s = set_heads("controller", 0, {"db1", "db1"});
  EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("version:"), std::string::npos) << s.error_message();
  ASSERT_TRUE(prepare("db0", key0_, 10, "still-db0", &rep).ok()) << "a refused table moved the check";
  ASSERT_TRUE(finish("db0", false, key0_, 10).ok());

  // db0 failed over: db1 heads both slots from version 5 on.
  uint64_t held = 0;
  ASSERT_TRUE(set_heads("controller", 5, {"db1", "db1"}, &held).ok());
  EXPECT_EQ(held, 5u);
  EXPECT_EQ(heads_.get()->version, 5u);
  s = prepare("db0", key0_, 11, "poison", &rep);
  EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED) << "the old owner may still write the cached value";
  EXPECT_NE(s.error_message().find("owned by 'db1'"), std::string::npos) << s.error_message();
  EXPECT_EQ(finish("db0", true, key0_, 11).error_code(), Code::PERMISSION_DENIED);
  EXPECT_EQ(value_of(key0_), "old0");
  ASSERT_TRUE(prepare("emu0", key0_, 12, "new0", &rep).ok());
  EXPECT_TRUE(rep.ok() && rep.cached()) << rep.error();
  ASSERT_TRUE(finish("emu0", true, key0_, 12).ok());
  EXPECT_EQ(value_of(key0_), "new0");

  // An older table (a deposed master's) is refused and the new head stays.
  s = set_heads("controller", 4, {"db0", "db1"}, &held);
  EXPECT_EQ(s.error_code(), Code::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("version: 4 is older"), std::string::npos) << s.error_message();
  EXPECT_EQ(prepare("db0", key0_, 13, "poison", &rep).error_code(), Code::PERMISSION_DENIED);
  // The same version again (a new master adopting the table) is accepted.
  EXPECT_TRUE(set_heads("controller", 5, {"db1", "db1"}, &held).ok());
  EXPECT_EQ(held, 5u);
}
