// Chain replication through real nodes (docs/design/replication.md, 3.1 and 3.7): three
// NodeParts in one process, each with its own store, their DbNode servers on unix sockets with
// mutual TLS, so Replicate goes through the real forwarder, server and caller checks. Slot 0's
// chain is db0 -> db1 -> db2, slot 1's db1 -> db2 -> db0.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
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
    // What the controller does first (design 4.1): push a table naming each node's incarnation.
    push(1, {{{"db0", "db1", "db2"}, {}, "db2"}, {{"db1", "db2", "db0"}, {}, "db0"}});
  }
  struct Slot {
    std::vector<std::string> nodes, learners;
    std::string read_server;
  };
  exo::SetChainsRequest table(uint64_t version, const std::vector<Slot>& slots) {
    exo::SetChainsRequest req;
    req.mutable_table()->set_version(version);
    for (const Slot& s : slots) {
      exo::SlotChain* sc = req.mutable_table()->add_slots();
      for (const auto& n : s.nodes) sc->add_nodes(n);
      for (const auto& n : s.learners) sc->add_learners(n);
      sc->set_read_server(s.read_server);
    }
    return req;
  }
  // Pushes to every node, as the controller does, each with its own incarnation.
  void push(uint64_t version, const std::vector<Slot>& slots) {
    for (auto& p : parts) {
      exo::SetChainsRequest req = table(version, slots);
      req.set_incarnation(p->chain.incarnation());
      const ChainRuntime::PushOutcome o = p->chain.set_table(req);
      ASSERT_EQ(o.code, ChainRuntime::PushOutcome::kOk) << o.error;
    }
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
  // Db node `i` handles `frames` as one received burst (the packet loop's path); the reply to
  // each, or nullopt. The replies stay valid until the next send or send_burst.
  std::vector<std::optional<wire::FrameView>> send_burst(int i, const std::vector<std::vector<uint8_t>>& frames) {
    burst_out_.assign(frames.size(), std::vector<uint8_t>(16384, 0));
    std::vector<BurstItem> items;
    for (size_t f = 0; f < frames.size(); ++f)
      items.push_back(BurstItem{frames[f], burst_out_[f]});
    lanes[i].handler->handle_burst(items);
    std::vector<std::optional<wire::FrameView>> out;
    for (size_t f = 0; f < items.size(); ++f) {
      if (items[f].len == 0) {
        out.emplace_back(std::nullopt);
        continue;
      }
      wire::FrameView r{};
      EXPECT_EQ(wire::parse(std::span<const uint8_t>(burst_out_[f].data(), items[f].len), r), wire::ParseError::kNone);
      out.emplace_back(r);
    }
    return out;
  }
  // `n` keys of slot `slot` (db0 heads slot 0, db1 slot 1).
  std::vector<std::string> keys_of_slot(uint32_t slot, size_t n) {
    std::vector<std::string> keys;
    for (int i = 0; keys.size() < n; ++i) {
      const std::string k = "batch" + std::to_string(i);
      if (cluster.owner_index(key_hash(B(k))) == slot) keys.push_back(k);
    }
    return keys;
  }
  // Db node `i`'s ChainStatus once it reports `slots` slots caught up, or after 2 s.
  exo::ChainStatusReply status_once_caught_up(int i, int slots) {
    exo::ChainStatusReply st;
    for (int n = 0; n < 100; ++n) {
      st.Clear();
      parts[i]->chain.status(&st);
      if (st.caught_up_size() == slots) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return st;
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
  std::vector<std::vector<uint8_t>> burst_out_;
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
  // The middle had it uncommitted (forwarded again by the refused write's settle and by the
  // resolver): passed on from its own list, never applied again.
  EXPECT_EQ(counter(1, "replicated_applied"), 1u);
  EXPECT_EQ(counter(1, "replication_pending"), 0u);
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

// Fail-stop (design 4.1): a node that has not taken a table naming its incarnation acts on
// nothing; a push naming another incarnation (it restarted) or an older version is refused.
TEST_F(ChainTest, ANodeActsOnlyOnceATableNamingItsIncarnationWasPushed) {
  FakeStore store;
  std::string err;
  auto fresh = NodeParts::build(cluster, 1, store, &err);  // a restart of db1, not started
  ASSERT_TRUE(fresh) << err;
  NodeLane lane = fresh->add_lane();
  EXPECT_FALSE(fresh->chain.active());
  std::vector<uint8_t> out(16384);
  EXPECT_EQ(lane.handler->handle(request(wire::kPut, key_owned_by(cluster, 1), "x", 1), out), 0u);
  const size_t n = lane.handler->handle(request(wire::kGet, key, "", 2), out);
  wire::FrameView r{};
  ASSERT_EQ(wire::parse(std::span<const uint8_t>(out.data(), n), r), wire::ParseError::kNone);
  EXPECT_EQ(r.status, wire::kBusy);
  exo::SetChainsRequest req = table(1, {{{"db0", "db1", "db2"}, {}, "db2"}, {{"db1", "db2", "db0"}, {}, "db0"}});
  req.set_incarnation(parts[1]->chain.incarnation());  // the old process's
  EXPECT_EQ(fresh->chain.set_table(req).code, ChainRuntime::PushOutcome::kWrongIncarnation);
  req.set_incarnation(fresh->chain.incarnation());
  EXPECT_EQ(fresh->chain.set_table(req).code, ChainRuntime::PushOutcome::kOk);
  EXPECT_TRUE(fresh->chain.active());
  req.mutable_table()->set_version(0);
  EXPECT_EQ(fresh->chain.set_table(req).code, ChainRuntime::PushOutcome::kStale);
  req = table(2, {{{"db0", "nobody"}, {}, "db0"}, {{"db1"}, {}, "db1"}});
  req.set_incarnation(fresh->chain.incarnation());
  EXPECT_EQ(fresh->chain.set_table(req).code, ChainRuntime::PushOutcome::kBadTable);
}

// The head dies with a write the middle applied but the tail never got: the middle, made head,
// answers the client's resend only once the write is through the rest of the chain.
TEST_F(ChainTest, AMiddleMadeHeadCompletesAWriteTheOldHeadLeftUncommitted) {
  stores[2]->fail_put = true;
  EXPECT_FALSE(send(0, request(wire::kPut, key, "v1", 7)));
  EXPECT_EQ(stores[1]->data[key], "v1");
  EXPECT_EQ(counter(1, "replication_pending"), 1u);  // uncommitted at the middle too
  // db0 is gone: slot 0 becomes db1 -> db2.
  push(2, {{{"db1", "db2"}, {}, "db2"}, {{"db1", "db2"}, {}, "db2"}});
  EXPECT_FALSE(send(1, request(wire::kPut, key, "v1", 7)));  // the resend waits
  stores[2]->fail_put = false;
  EXPECT_EQ(parts[1]->resolve_once(), 1u);
  EXPECT_EQ(stores[2]->data[key], "v1");
  auto r = send(1, request(wire::kPut, key, "v1", 7));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, wire::kOk);
  r = send(2, request(wire::kGet, key, "", 8));
  ASSERT_TRUE(r);
  EXPECT_EQ(sv_of(r->value), "v1");
  // The old head, told it is out, drops what it still held instead of completing it.
  EXPECT_EQ(parts[0]->resolve_once(), 1u);
  EXPECT_EQ(counter(0, "chain_writes_abandoned"), 1u);
}

// A new member joins as a learner: it copies the slot from the read server while live writes
// reach it too, reports the slot caught up, and then serves as the tail.
TEST_F(ChainTest, ALearnerCopiesTheSlotAndThenServesAsTail) {
  push(2, {{{"db0", "db1"}, {}, "db1"}, {{"db1", "db0"}, {}, "db0"}});
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < 20; ++i) {
    const std::string k = "copy" + std::to_string(i);
    if (cluster.owner_index(key_hash(B(k))) != 0) continue;
    keys.push_back(k);
    auto r = send(0, request(wire::kPut, k, "old" + k, 100 + i));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, wire::kOk);
  }
  push(3, {{{"db0", "db1"}, {"db2"}, "db1"}, {{"db1", "db0"}, {}, "db0"}});
  auto r = send(0, request(wire::kPut, keys[0], "live", 200));  // reaches the learner live
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, wire::kOk);
  const exo::ChainStatusReply st = status_once_caught_up(2, 1);
  ASSERT_EQ(st.caught_up_size(), 1);
  EXPECT_EQ(st.caught_up(0), 0u);
  EXPECT_EQ(stores[2]->data[keys[0]], "live");  // the live write won over the copy
  for (size_t i = 1; i < keys.size(); ++i) EXPECT_EQ(stores[2]->data[keys[i]], "old" + keys[i]);
  push(4, {{{"db0", "db1", "db2"}, {}, "db2"}, {{"db1", "db0"}, {}, "db0"}});
  r = send(2, request(wire::kGet, keys[5], "", 300));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, wire::kOk);
  EXPECT_EQ(sv_of(r->value), "old" + keys[5]);
  r = send(1, request(wire::kGet, keys[5], "", 301));  // the old tail no longer reads
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, wire::kBusy);
}

// The catch-up race that once lost an acknowledged write on a new tail: a write lands at the
// read server while it streams a slot to a learner, and its forward to the learner fails, so
// it reaches the learner later, from the resolver. If the copy carried the write's outcome
// record but not its data (records scanned after the data), the learner took the late forward
// for a resend, skipped it, and became tail without the value. CopySlot sends records first.
TEST_F(ChainTest, CopyRecordsBeforeDataSoALateForwardIsNotMistakenForAResend) {
  push(2, {{{"db0", "db1"}, {}, "db1"}, {{"db1", "db0"}, {}, "db0"}});
  auto r = send(0, request(wire::kPut, key, "early", 100));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, wire::kOk);
  // Between the read server's two scans of the copy: a write whose forward to the learner fails.
  int scans = 0;
  stores[1]->before_scan = [&](Cf) {
    if (++scans != 2) return;
    stores[2]->fail_put = true;
    EXPECT_FALSE(send(0, request(wire::kPut, key, "late", 101)));  // uncommitted: no reply yet
    stores[2]->fail_put = false;
  };
  push(3, {{{"db0", "db1"}, {"db2"}, "db1"}, {{"db1", "db0"}, {}, "db0"}});
  const exo::ChainStatusReply st = status_once_caught_up(2, 1);
  ASSERT_EQ(st.caught_up_size(), 1);
  ASSERT_EQ(scans, 2);
  stores[1]->before_scan = nullptr;
  for (int i = 0; i < 10 && (counter(0, "replication_pending") || counter(1, "replication_pending")); ++i) {
    parts[1]->resolve_once();
    parts[0]->resolve_once();
  }
  r = send(0, request(wire::kPut, key, "late", 101));  // the client's resend: now answered
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, wire::kOk);
  EXPECT_EQ(stores[1]->data[key], "late");
  EXPECT_EQ(stores[2]->data[key], "late");  // the learner, about to become tail, has it too
}

// A burst's writes share one round trip (write_chained.cc): one ReplicateBatch per next node,
// each write answered OK only once every member has it.
TEST_F(ChainTest, ABurstsWritesGoDownTheChainInOneBatchAndAreAllAnswered) {
  const std::vector<std::string> keys = keys_of_slot(0, 8);
  std::vector<std::vector<uint8_t>> frames;
  for (size_t i = 0; i < keys.size(); ++i)
    frames.push_back(request(wire::kPut, keys[i], "b" + keys[i], 50 + static_cast<uint32_t>(i)));
  const auto replies = send_burst(0, frames);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(replies[i]) << keys[i];
    EXPECT_EQ(replies[i]->status, wire::kOk) << keys[i];
    for (int n = 0; n < 3; ++n) EXPECT_EQ(stores[n]->data[keys[i]], "b" + keys[i]) << "db" << n;
  }
  EXPECT_EQ(counter(0, "chain_writes"), keys.size());
  EXPECT_EQ(counter(0, "chain_batches"), 1u);
  EXPECT_EQ(counter(0, "replication_pending"), 0u);
  EXPECT_EQ(counter(2, "replicated_applied"), keys.size());
}

// Two writes of one key in a burst: the batch holding the first is sent before the second is
// applied, so every member ends with the second and both are answered.
TEST_F(ChainTest, TwoWritesOfAKeyInABurstReachEveryMemberInOrder) {
  const auto replies = send_burst(0, {request(wire::kPut, key, "first", 60), request(wire::kPut, key, "second", 61)});
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(replies[i]) << i;
    EXPECT_EQ(replies[i]->status, wire::kOk) << i;
  }
  for (int n = 0; n < 3; ++n) EXPECT_EQ(stores[n]->data[key], "second") << "db" << n;
  EXPECT_EQ(counter(0, "chain_batches"), 2u);
}

// A batch the chain does not acknowledge: no write of it is answered, each stays uncommitted
// and is the resolver's, and the resends are answered once it got them through.
TEST_F(ChainTest, AnUnacknowledgedBatchIsAnsweredOnlyOnceTheResolverGotItThrough) {
  const std::vector<std::string> keys = keys_of_slot(0, 4);
  std::vector<std::vector<uint8_t>> frames;
  for (size_t i = 0; i < keys.size(); ++i)
    frames.push_back(request(wire::kPut, keys[i], "u", 70 + static_cast<uint32_t>(i)));
  stores[2]->fail_put = true;
  for (const auto& r : send_burst(0, frames)) EXPECT_FALSE(r);
  EXPECT_EQ(counter(0, "replication_pending"), keys.size());
  stores[2]->fail_put = false;
  EXPECT_EQ(parts[0]->resolve_once(), keys.size());
  for (const auto& r : send_burst(0, frames)) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, wire::kOk);
  }
  for (const std::string& k : keys) EXPECT_EQ(stores[2]->data[k], "u") << k;
  EXPECT_EQ(counter(1, "replicated_applied"), keys.size());  // never applied twice
}

// Known-bad: a batch from a node that is not the receiver's predecessor for one of its slots.
// Refused whole: not even the writes of the slot it is the predecessor of are applied.
TEST_F(ChainTest, ABatchWithOneWriteFromANonPredecessorIsRefusedWhole) {
  // db0 -> db1 is slot 0's link; slot 1's chain is db1 -> db2 -> db0, so db0 is not db1's
  // predecessor there.
  const std::string k0 = keys_of_slot(0, 1)[0], k1 = keys_of_slot(1, 1)[0];
  const ChainTable& t = *parts[0]->chain.table();
  exo::ReplicateBatchRequest batch;
  *batch.add_writes() = parts[0]->chain.make_request(t, 0, RequestId{2, 1}, true, false, B(k0), B("x"), DedupRecord{});
  *batch.add_writes() = parts[0]->chain.make_request(t, 1, RequestId{2, 2}, true, false, B(k1), B("x"), DedupRecord{});
  auto stub = exo::DbNode::NewStub(
      exo::GrpcSecurity::load(cluster, "db0")->channel(cluster.db_nodes[1].grpc, "db1"));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  exo::ReplicateBatchReply rep;
  const grpc::Status s = stub->ReplicateBatch(&ctx, batch, &rep);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_EQ(stores[1]->data.count(k0), 0u);
  EXPECT_EQ(stores[1]->data.count(k1), 0u);
  EXPECT_EQ(counter(1, "replicate_refused"), 1u);
}

}  // namespace
}  // namespace exo::db
