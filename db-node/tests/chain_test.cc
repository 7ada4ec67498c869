// Chain replication through real nodes (docs/design/replication.md, 3.1 and 3.7): three
// NodeParts in one process, each with its own store, their DbNode servers on unix sockets with
// mutual TLS, so Replicate goes through the real forwarder, server and caller checks. Slot 0's
// chain is db0 -> db1 -> db2, slot 1's db1 -> db2 -> db0.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "grpc_security.h"
#include "node_parts.h"
#include "test_util.h"
#include "tests/test_pki.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;

class ChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::exo::testing::make_test_pki(pki_.path, {"db0", "db1", "db2", "cache0", "operator"});
    cluster = test_cluster();
    cluster.security.insecure_dev_mode = false;
    cluster.security.cert_dir = pki_.str();
    DbNodeInfo db2 = cluster.db_nodes[1];
    db2.name = "db2";
    db2.mac[5] = 3;
    db2.ip += 1;
    db2.iface = "db2-eth0";
    cluster.db_nodes.push_back(db2);
    for (DbNodeInfo& d : cluster.db_nodes) d.grpc = "unix:" + pki_.str() + "/" + d.name + ".sock";
    cluster.replication.factor = 3;
    cluster.slot_chain = {{0, 1, 2}, {1, 2, 0}};
    std::string err;
    for (int i = 0; i < 3; ++i) {
      stores.push_back(std::make_unique<FakeStore>());
      parts.push_back(NodeParts::build(cluster, i, *stores[i], &err));
      ASSERT_TRUE(parts[i]) << err;
      lanes.push_back(parts[i]->add_lane());
      ASSERT_TRUE(parts[i]->start(&err)) << err;
    }
    key = key_owned_by(cluster, 0);  // slot 0: head db0, tail db2
  }
  void TearDown() override {
    for (auto& p : parts) p->stop(std::chrono::milliseconds(0));
  }
  // The reply db node `i` sends to `frame`, or nullopt when it sends none.
  std::optional<wire::FrameView> send(int i, const std::vector<uint8_t>& frame) {
    out_.assign(16384, 0);
    const size_t n = lanes[i].handler->handle(frame, out_);
    if (n == 0) return std::nullopt;
    wire::FrameView r{};
    EXPECT_EQ(wire::parse(std::span<const uint8_t>(out_.data(), n), r), wire::ParseError::kNone);
    return r;
  }
  uint64_t counter(int i, const char* name) {
    for (const auto& [n, v] : parts[i]->service.counters())
      if (n == name) return v;
    ADD_FAILURE() << "no counter " << name;
    return 0;
  }

  ::exo::testing::PkiDir pki_;
  Cluster cluster;
  std::vector<std::unique_ptr<FakeStore>> stores;
  std::vector<std::unique_ptr<NodeParts>> parts;
  std::vector<NodeLane> lanes;
  std::string key;
  std::vector<uint8_t> out_;
};

TEST_F(ChainTest, AnAcknowledgedWriteIsOnEveryMemberAndOnlyTheTailServesIt) {
  auto r = send(0, request(wire::kPut, key, "v1", 1));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, wire::kOk);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(stores[i]->data[key], "v1") << "db" << i;
  EXPECT_EQ(counter(0, "chain_writes"), 1u);
  EXPECT_EQ(counter(1, "replicated_applied"), 1u);
  EXPECT_EQ(counter(2, "replicated_applied"), 1u);

  r = send(2, request(wire::kGet, key, "", 2));  // the tail: the read server
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, wire::kOk);
  EXPECT_EQ(sv_of(r->value), "v1");
  for (int i : {0, 1}) {  // head and middle answer BUSY: the client retries at the tail
    r = send(i, request(wire::kGet, key, "", 3));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, wire::kBusy) << "db" << i;
  }
  EXPECT_EQ(counter(0, "not_reader_busy") + counter(1, "not_reader_busy"), 2u);
}

TEST_F(ChainTest, AWriteAtAnotherMemberThanTheHeadGetsNoReplyAndIsNotApplied) {
  EXPECT_FALSE(send(1, request(wire::kPut, key, "x", 1)));  // middle
  EXPECT_FALSE(send(2, request(wire::kPut, key, "x", 2)));  // tail
  for (int i = 0; i < 3; ++i) EXPECT_EQ(stores[i]->data.count(key), 0u);
  EXPECT_EQ(counter(1, "not_head_dropped") + counter(2, "not_head_dropped"), 2u);
}

TEST_F(ChainTest, AnUnacknowledgedWriteIsAnsweredOnlyOnceTheResolverGotItThrough) {
  stores[2]->fail_put = true;  // the tail cannot apply: the head never hears OK
  EXPECT_FALSE(send(0, request(wire::kPut, key, "v1", 7)));
  EXPECT_FALSE(send(0, request(wire::kPut, key, "v1", 7)));  // the resend waits too
  EXPECT_EQ(stores[1]->data[key], "v1");
  EXPECT_EQ(stores[2]->data.count(key), 0u);
  EXPECT_EQ(counter(0, "replication_pending"), 1u);
  // Another write of the key is refused while the first is uncommitted: one per key in a chain.
  auto r = send(0, request(wire::kPut, key, "v2", 8));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, wire::kBusy);

  stores[2]->fail_put = false;
  EXPECT_EQ(parts[0]->resolve_once(), 1u);
  EXPECT_EQ(stores[2]->data[key], "v1");
  EXPECT_EQ(counter(0, "replication_pending"), 0u);
  // The middle had it (forwarded again by the refused write's settle and by the resolver):
  // passed on both times, never applied again.
  EXPECT_EQ(counter(1, "replicated_duplicates"), 2u);
  EXPECT_EQ(counter(1, "replicated_applied"), 1u);
  r = send(0, request(wire::kPut, key, "v1", 7));  // the resend now gets the outcome
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, wire::kOk);
}

TEST_F(ChainTest, ADeleteOfAMissingKeyIsRecordedOnEveryMember) {
  auto r = send(0, request(wire::kDelete, key, "", 5));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, wire::kNotFound);
  const std::string id = request_key(RequestId{0xC0FFEE, 5});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(stores[i]->requests.count(id), 1u) << "db" << i;
}

// Known-bad: a node that is not the slot's predecessor of the receiver passes it a write (a
// stale or forged forward). It must be refused with nothing applied.
TEST_F(ChainTest, AForwardFromANodeThatIsNotThePredecessorIsRefused) {
  exo::ReplicateRequest req = parts[2]->chain.make_request(*parts[2]->chain.table(), 0,
                                                           RequestId{1, 1}, true, false, B(key),
                                                           B("forged"), DedupRecord{});
  auto stub = exo::DbNode::NewStub(
      exo::GrpcSecurity::load(cluster, "db2")->channel(cluster.db_nodes[1].grpc, "db1"));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  exo::ReplicateReply rep;
  const grpc::Status s = stub->Replicate(&ctx, req, &rep);  // db2 -> db1 for slot 0 (db0 -> db1)
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_EQ(stores[1]->data.count(key), 0u);
  EXPECT_EQ(counter(1, "replicate_refused"), 1u);
}

TEST_F(ChainTest, SlotDigestsAgreeOnEveryMemberAfterWrites) {
  for (int s = 0; s < 20; ++s) {
    const std::string k = "key" + std::to_string(s);
    const int head = cluster.slot_chain[cluster.owner_index(key_hash(B(k)))][0];
    auto r = send(head, request(wire::kPut, k, "v" + std::to_string(s), 100 + s));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, wire::kOk);
  }
  std::vector<std::string> digests;
  for (int i = 0; i < 3; ++i) {
    auto stub = exo::DbNode::NewStub(exo::GrpcSecurity::load(cluster, "operator")
                                         ->channel(cluster.db_nodes[i].grpc, cluster.db_nodes[i].name));
    grpc::ClientContext ctx;
    exo::SlotDigestRequest req;
    exo::SlotDigestReply rep;
    ASSERT_TRUE(stub->SlotDigest(&ctx, req, &rep).ok());
    digests.push_back(rep.SerializeAsString().substr(rep.node().size() + 2));
  }
  EXPECT_EQ(digests[0], digests[1]);
  EXPECT_EQ(digests[1], digests[2]);
}

}  // namespace
}  // namespace exo::db
