// Mutual TLS and the caller checks (grpc_security.h) on a real gRPC server over a unix socket,
// with certificates made at test time (tests/test_pki.h): the right role passes, a wrong role or
// a name the config does not know is PERMISSION_DENIED and counted (rpc_refused), a client
// without a certificate finishes the handshake and is refused UNAUTHENTICATED and counted
// (rpc_refused), one with a certificate of another CA or in plaintext fails the handshake and is
// counted by the gRPC log hook (tls_handshake_refused, grpc_log_hook.h); honest calls move
// neither; insecure_dev_mode is plaintext with every call allowed. decide() against every rpc of
// control.proto.
#include <gtest/gtest.h>
#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "exoproto/control.grpc.pb.h"
#include "grpc_log_hook.h"
#include "grpc_security.h"
#include "tests/attacker_channels.h"
#include "tests/test_pki.h"

namespace {

using exo::testing::eventually;
using exo::testing::make_test_ca;
using exo::testing::make_test_leaf;
using exo::testing::PkiDir;

exo::Cluster test_cluster(const std::string& cert_dir) {
  exo::Cluster c;
  c.security.cert_dir = cert_dir;
  exo::CacheNodeInfo cache;
  cache.name = "cache0";
  c.cache_nodes.push_back(cache);
  exo::DbNodeInfo db0, db1;
  db0.name = "db0";
  db1.name = "db1";
  db1.emulator = "emu0";
  c.db_nodes = {db0, db1};
  c.proxies.push_back({"proxy0", "client0", ""});
  return c;
}

// A DbNode server whose Stats and ForgetCacheNode run the caller checks; the rest is unused.
struct CheckedDb final : exo::DbNode::Service {
  CheckedDb(const exo::Cluster& c) : authz(c, refused, &handshake_refused) {}
  grpc::Status Stats(grpc::ServerContext* ctx, const exo::StatsRequest*, exo::StatsReply* rep) override {
    if (auto s = authz.authorize(ctx, exo::rpc_method("exo.DbNode.Stats")); !s.ok()) return s;
    ++served;
    rep->set_node(exo::caller(ctx));  // who the server thinks called
    return grpc::Status::OK;
  }
  grpc::Status ForgetCacheNode(grpc::ServerContext* ctx, const exo::ForgetCacheNodeRequest*,
                               exo::ForgetCacheNodeReply*) override {
    if (auto s = authz.authorize(ctx, exo::rpc_method("exo.DbNode.ForgetCacheNode")); !s.ok()) return s;
    ++served;
    return grpc::Status::OK;
  }
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> handshake_refused{0};  // its tls_handshake_refused
  std::atomic<int> served{0};
  exo::Authorizer authz;
};

class GrpcSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handshakes_before_ = exo::tls_handshakes_refused();
    make_test_ca(pki_.path);
    for (const char* n : {"db0", "controller", "operator", "cache0", "proxy0", "emu0", "stranger"})
      make_test_leaf(pki_.path, n);
    cluster_ = test_cluster(pki_.str());
    address_ = "unix:" + pki_.str() + "/db0.sock";
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }
  // The server as db0 would run it.
  void serve() {
    server_security_ = exo::GrpcSecurity::load(cluster_, "db0");
    service_ = std::make_unique<CheckedDb>(cluster_);
    grpc::ServerBuilder b;
    b.AddListeningPort(address_, server_security_->server_credentials());
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
  }
  // A Stats call with `creds` and target-name override `server_name`.
  grpc::Status stats(std::shared_ptr<grpc::ChannelCredentials> creds, const std::string& server_name = "db0",
                     std::string* node = nullptr) {
    grpc::ChannelArguments args;
    if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
    return stats_on(grpc::CreateCustomChannel(address_, creds, args), node);
  }
  grpc::Status stats_on(std::shared_ptr<grpc::Channel> channel, std::string* node = nullptr) {
    auto stub = exo::DbNode::NewStub(std::move(channel));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    exo::StatsReply rep;
    grpc::Status s = stub->Stats(&ctx, exo::StatsRequest{}, &rep);
    if (node) *node = rep.node();
    return s;
  }
  // Stats as program `name` through the production channel factory.
  grpc::Status stats_as(const std::string& name, std::string* node = nullptr) {
    auto sec = exo::GrpcSecurity::load(cluster_, name);
    auto stub = exo::DbNode::NewStub(sec->channel(address_, "db0"));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    exo::StatsReply rep;
    grpc::Status s = stub->Stats(&ctx, exo::StatsRequest{}, &rep);
    if (node) *node = rep.node();
    return s;
  }

  // Refused handshakes of the whole test process since SetUp.
  uint64_t process_handshakes() const { return exo::tls_handshakes_refused() - handshakes_before_; }

  PkiDir pki_;
  exo::Cluster cluster_;
  std::string address_;
  uint64_t handshakes_before_ = 0;
  std::shared_ptr<const exo::GrpcSecurity> server_security_;
  std::unique_ptr<CheckedDb> service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(GrpcSecurityTest, AllowedRolesPassAndTheServerSeesTheCallersName) {
  serve();
  std::string node;
  ASSERT_TRUE(stats_as("operator", &node).ok());
  EXPECT_EQ(node, "operator");
  ASSERT_TRUE(stats_as("controller", &node).ok());
  EXPECT_EQ(node, "controller");
  EXPECT_EQ(service_->served.load(), 2);
  EXPECT_EQ(service_->refused.load(), 0u);
  // Honest calls move neither refusal counter.
  EXPECT_EQ(service_->handshake_refused.load(), 0u);
  EXPECT_EQ(process_handshakes(), 0u);
}

TEST_F(GrpcSecurityTest, WrongRoleIsPermissionDeniedAndCounted) {
  serve();
  for (const char* who : {"cache0", "proxy0", "emu0"}) {
    const grpc::Status s = stats_as(who);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << who;
    EXPECT_NE(s.error_message().find(std::string("'") + who + "'"), std::string::npos) << s.error_message();
    EXPECT_NE(s.error_message().find("exo.DbNode.Stats"), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(service_->refused.load(), 3u);
  EXPECT_EQ(service_->served.load(), 0);
  // ForgetCacheNode is the controller's alone: an operator is refused too.
  auto stub = exo::DbNode::NewStub(exo::GrpcSecurity::load(cluster_, "operator")->channel(address_, "db0"));
  grpc::ClientContext ctx;
  exo::ForgetCacheNodeReply rep;
  EXPECT_EQ(stub->ForgetCacheNode(&ctx, exo::ForgetCacheNodeRequest{}, &rep).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(service_->refused.load(), 4u);
}

TEST_F(GrpcSecurityTest, NameTheConfigDoesNotKnowIsRefused) {
  serve();
  // A valid certificate of the cluster CA, but "stranger" is nobody in the config.
  exo::TlsFiles f = exo::load_tls_files(pki_.str(), "stranger");
  auto stub = exo::DbNode::NewStub(exo::GrpcSecurity::from_files(f, "stranger")->channel(address_, "db0"));
  grpc::ClientContext ctx;
  exo::StatsReply rep;
  const grpc::Status s = stub->Stats(&ctx, exo::StatsRequest{}, &rep);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("not a name of this cluster"), std::string::npos) << s.error_message();
  EXPECT_EQ(service_->refused.load(), 1u);
}

TEST_F(GrpcSecurityTest, ClientWithoutCertificateIsUnauthenticatedAndCounted) {
  serve();
  // The handshake completes (the server requests a certificate, does not require one); the
  // caller check refuses the call, so the refusal is counted where it is made.
  const grpc::Status s = stats_on(exo::testing::channel_without_certificate(address_, pki_.path, "db0"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_NE(s.error_message().find("no client certificate"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("exo.DbNode.Stats"), std::string::npos) << s.error_message();
  EXPECT_EQ(service_->refused.load(), 1u);
  EXPECT_EQ(service_->served.load(), 0);
  EXPECT_EQ(service_->handshake_refused.load(), 0u);
  EXPECT_EQ(process_handshakes(), 0u);
}

TEST_F(GrpcSecurityTest, ClientCertificateOfAnotherCaFailsTheHandshakeAndIsCounted) {
  serve();
  PkiDir rogue;
  // An operator's name, the wrong issuer.
  const grpc::Status s = stats_on(exo::testing::rogue_channel(address_, pki_.path, rogue.path, "db0"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_TRUE(eventually([&] { return service_->handshake_refused.load() >= 1; }))
      << "the refused handshake was not counted";
  EXPECT_EQ(service_->handshake_refused.load(), 1u);
  EXPECT_EQ(process_handshakes(), 1u);
  EXPECT_EQ(service_->served.load(), 0);
  EXPECT_EQ(service_->refused.load(), 0u) << "never reached a handler";
}

TEST_F(GrpcSecurityTest, PlaintextClientFailsTheHandshakeAndIsCounted) {
  serve();
  const grpc::Status s = stats_on(exo::testing::plaintext_channel(address_));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_TRUE(eventually([&] { return service_->handshake_refused.load() >= 1; }))
      << "the refused handshake was not counted";
  EXPECT_EQ(service_->handshake_refused.load(), 1u);
  EXPECT_EQ(process_handshakes(), 1u);
  EXPECT_EQ(service_->served.load(), 0);
  EXPECT_EQ(service_->refused.load(), 0u);
}

TEST_F(GrpcSecurityTest, ClientRefusesAServerOfAnotherCaAndCountsIt) {
  // The server is an impostor: "db0" with a certificate of another CA. The refusal is the
  // client's (it verifies the server against the cluster CA), counted in the client's process.
  PkiDir rogue;
  make_test_ca(rogue.path, "rogue CA");
  make_test_leaf(rogue.path, "db0");
  auto impostor = exo::GrpcSecurity::from_files(exo::load_tls_files(rogue.str(), "db0"), "db0");
  grpc::ServerBuilder b;
  CheckedDb svc(cluster_);
  b.AddListeningPort(address_, impostor->server_credentials());
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  ASSERT_TRUE(server);
  // The operator's certificate and the cluster CA, on a channel with gRPC's default reconnect
  // backoff (1 s; the production channel's is shorter): one handshake, not a retry too.
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = exo::testing::read_text(pki_.path / "ca.crt");
  o.pem_private_key = exo::testing::read_text(pki_.path / "operator.key");
  o.pem_cert_chain = exo::testing::read_text(pki_.path / "operator.crt");
  const grpc::Status s = stats_on(exo::testing::tls_channel(address_, o, "db0"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_TRUE(eventually([&] { return process_handshakes() >= 1; }));
  EXPECT_EQ(process_handshakes(), 1u) << "counted once: the impostor server's side is not a refusal";
  EXPECT_EQ(svc.served.load(), 0);
  server->Shutdown(std::chrono::system_clock::now());
}

TEST_F(GrpcSecurityTest, ServerWithAnotherNameIsNotTrusted) {
  serve();
  // The operator dials db0's socket expecting "db1": db0's certificate does not carry that name.
  auto stub = exo::DbNode::NewStub(exo::GrpcSecurity::load(cluster_, "operator")->channel(address_, "db1"));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  exo::StatsReply rep;
  EXPECT_EQ(stub->Stats(&ctx, exo::StatsRequest{}, &rep).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(service_->served.load(), 0);
  // The server logs "No match found for server name: db1." (an ERROR line of the same gRPC
  // file) and the client's name check fails after the handshake: neither is a refused handshake.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(process_handshakes(), 0u);
  EXPECT_EQ(service_->handshake_refused.load(), 0u);
}

TEST_F(GrpcSecurityTest, InsecureDevModeIsPlaintextAndAllowsEveryCall) {
  cluster_.security.insecure_dev_mode = true;
  cluster_.security.cert_dir = "/nonexistent";  // nothing is read
  serve();
  ASSERT_TRUE(server_security_->insecure());
  std::string node;
  ASSERT_TRUE(stats(grpc::InsecureChannelCredentials(), "", &node).ok());
  EXPECT_EQ(node, "");  // no certificate, no name, and still allowed
  auto stub = exo::DbNode::NewStub(exo::GrpcSecurity::load(cluster_, "proxy0")->channel(address_, "db0"));
  grpc::ClientContext ctx;
  exo::ForgetCacheNodeReply rep;
  EXPECT_TRUE(stub->ForgetCacheNode(&ctx, exo::ForgetCacheNodeRequest{}, &rep).ok());
  EXPECT_EQ(service_->served.load(), 2);
  EXPECT_EQ(service_->refused.load(), 0u);
}

TEST_F(GrpcSecurityTest, MissingCertificateIsAStartUpErrorNamingFileAndField) {
  std::filesystem::remove(pki_.path / "db0.key");
  try {
    exo::GrpcSecurity::load(cluster_, "db0");
    FAIL() << "loaded without db0.key";
  } catch (const exo::SecurityError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("security.cert_dir"), std::string::npos) << m;
    EXPECT_NE(m.find("db0.key"), std::string::npos) << m;
  }
}

// ---- decide(): the pure decision, against control.proto ----

TEST(Decide, EveryRpcOfControlProtoNamesItsRoles) {
  const auto* file = exo::StatsRequest::descriptor()->file();
  int methods = 0;
  for (int s = 0; s < file->service_count(); ++s)
    for (int m = 0; m < file->service(s)->method_count(); ++m) {
      const auto* method = file->service(s)->method(m);
      EXPECT_GT(method->options().ExtensionSize(exo::allowed_roles), 0) << method->full_name();
      ++methods;
    }
  EXPECT_GE(methods, 19);  // Controller 4, CacheNode 10, DbNode 5 when written
}

TEST(Decide, RolesNamesAndMissingDescriptors) {
  exo::Cluster c = test_cluster("/unused");
  const auto* prepare = exo::rpc_method("exo.CacheNode.Prepare");
  const auto* list_keys = exo::rpc_method("exo.CacheNode.ListKeys");
  ASSERT_NE(prepare, nullptr);
  ASSERT_NE(list_keys, nullptr);
  EXPECT_TRUE(exo::decide(c, "db0", prepare).ok());
  EXPECT_TRUE(exo::decide(c, "emu0", prepare).ok()) << "an emulator speaks for its db nodes";
  EXPECT_EQ(exo::decide(c, "proxy0", prepare).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(exo::decide(c, "operator", prepare).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(exo::decide(c, "", prepare).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Both options of a repeated allowed_roles count.
  EXPECT_TRUE(exo::decide(c, "controller", list_keys).ok());
  EXPECT_TRUE(exo::decide(c, "operator", list_keys).ok());
  EXPECT_EQ(exo::decide(c, "cache0", list_keys).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // An operator name comes from security.operators only.
  c.security.operators = {"alice"};
  EXPECT_EQ(exo::decide(c, "operator", list_keys).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(exo::decide(c, "alice", list_keys).ok());
  // Fail closed: no descriptor, nobody may call it.
  EXPECT_EQ(exo::rpc_method("exo.CacheNode.NoSuchRpc"), nullptr);
  EXPECT_EQ(exo::decide(c, "controller", nullptr).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST(Decide, NullContextIsUnauthenticatedUnlessInsecure) {
  exo::Cluster c = test_cluster("/unused");
  std::atomic<uint64_t> refused{0};
  exo::Authorizer a(c, refused);
  EXPECT_EQ(a.authorize(nullptr, exo::rpc_method("exo.DbNode.Stats")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(refused.load(), 1u);
  c.security.insecure_dev_mode = true;
  EXPECT_TRUE(a.authorize(nullptr, exo::rpc_method("exo.DbNode.Stats")).ok());
  EXPECT_EQ(refused.load(), 1u);
}

TEST(SpeaksFor, DbNodeItselfOrItsEmulator) {
  exo::DbNodeInfo real, hosted;
  real.name = "db0";
  hosted.name = "db1";
  hosted.emulator = "emu0";
  EXPECT_TRUE(exo::speaks_for("db0", real));
  EXPECT_FALSE(exo::speaks_for("db1", real));
  EXPECT_FALSE(exo::speaks_for("", real));
  EXPECT_TRUE(exo::speaks_for("db1", hosted));
  EXPECT_TRUE(exo::speaks_for("emu0", hosted));
  EXPECT_FALSE(exo::speaks_for("emu1", hosted));
  EXPECT_EQ(exo::cert_name_of(real), "db0");
  EXPECT_EQ(exo::cert_name_of(hosted), "emu0");
}

}  // namespace
