// The emulator's DPDK-free frame path end to end (demux -> token bucket -> the db node's
// handler), per-node counters over DbNode.Stats, and the EAL argv it asks DPDK for.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "dpdk/eal_args.h"
#include "emulator.h"
#include "exoproto/control.grpc.pb.h"
#include "grpc_security.h"
#include "log.h"
#include "tests/test_pki.h"
#include "wimpy_test_util.h"

namespace exo::emu {
namespace {

using testing::emu_cluster;
using testing::key_owned_by;
using testing::request;

constexpr uint64_t kT0 = 1'000'000'000'000;  // ns

uint64_t counter(db::NodeParts& n, const std::string& name) {
  const db::CounterValues v = n.counters.sum();
  for (size_t i = 0; i < db::kNumCounters; ++i)
    if (name == db::kCounterDescs[i].name) return v[i];
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

class EmulatorTest : public ::testing::Test {
 protected:
  void make(double rate = 0, uint32_t burst = 32, unsigned lanes = 1) {
    cluster = emu_cluster(dir.path.string(), rate, burst);
    std::string err;
    emu = Emulator::build(cluster, "emu0", lanes, &err);
    ASSERT_NE(emu, nullptr) << err;
  }
  Emulator::Result send(const std::vector<uint8_t>& f, uint64_t t = kT0, unsigned lane = 0) {
    Emulator::Result r = emu->handle(lane, f, false, out, t);
    if (r.kind == Emulator::Result::kReply) emu->sent(lane, r.node, true);
    return r;
  }
  wire::FrameView reply(const Emulator::Result& r) {
    wire::FrameView v{};
    EXPECT_EQ(r.kind, Emulator::Result::kReply);
    if (r.kind != Emulator::Result::kReply) return v;
    EXPECT_EQ(wire::parse(std::span<const uint8_t>(out.data(), r.len), v), wire::ParseError::kNone);
    return v;
  }

  void SetUp() override { exo::set_log_level("error"); }  // REPORTs to the absent cache node

  db::testing::TempDir dir;
  Cluster cluster;
  std::unique_ptr<Emulator> emu;
  std::vector<uint8_t> out = std::vector<uint8_t>(16384);
};

TEST_F(EmulatorTest, BuildRefusesAnEmulatorWithoutNodes) {
  cluster = emu_cluster();
  std::string err;
  EXPECT_EQ(Emulator::build(cluster, "emu7", 1, &err), nullptr);
  EXPECT_NE(err.find("no db node has emulator 'emu7'"), std::string::npos) << err;
  EXPECT_NE(err.find("'emu0'"), std::string::npos) << err;
  cluster.db_nodes[0].cache_node = "nope";
  EXPECT_EQ(Emulator::build(cluster, "emu0", 1, &err), nullptr);
  EXPECT_NE(err.find("db_nodes[0].cache_node"), std::string::npos) << err;
}

TEST_F(EmulatorTest, GetForAKeyOfNodeKIsAnsweredByKWithTheFixedValue) {
  make();
  ASSERT_EQ(emu->size(), 2u);
  for (uint32_t k : {0u, 1u}) {
    const std::string key = key_owned_by(cluster, k);
    const Emulator::Result r = send(request(wire::kGet, key, "", 10 + k));
    const wire::FrameView v = reply(r);
    EXPECT_EQ(r.node, k);
    EXPECT_TRUE(v.is_reply());
    EXPECT_EQ(v.status, wire::kOk);
    EXPECT_EQ(v.seq, 10 + k);
    EXPECT_EQ(v.value.size(), 512u);
    EXPECT_EQ(std::string(v.value.begin(), v.value.end()), emu->store().value());
    EXPECT_EQ(std::memcmp(out.data() + 6, cluster.db_nodes[k].mac.data(), 6), 0) << "src MAC";
    EXPECT_EQ(std::memcmp(out.data(), db::testing::kClientMac.data(), 6), 0) << "dst MAC";
    EXPECT_EQ(v.ip_src, cluster.db_nodes[k].ip);  // the emulator's shared IP
    EXPECT_EQ(counter(emu->node(k), "gets"), 1u);
    EXPECT_EQ(counter(emu->node(k), "requests_served"), 1u);
    EXPECT_EQ(counter(emu->node(k), "misrouted"), 0u);
  }
}

TEST_F(EmulatorTest, PutAndDeleteOfUncachedKeysAnswerOk) {
  make();
  const std::string key = key_owned_by(cluster, 1);
  EXPECT_EQ(reply(send(request(wire::kPut, key, "new value", 1))).status, wire::kOk);
  EXPECT_EQ(reply(send(request(wire::kDelete, key, "", 2))).status, wire::kOk);
  // A resend is answered from the dedup table, as on a real db node.
  EXPECT_EQ(reply(send(request(wire::kPut, key, "new value", 1))).status, wire::kOk);
  EXPECT_EQ(counter(emu->node(1), "duplicate_writes"), 1u);
  // The store remembers nothing: a GET still gets the fixed value.
  EXPECT_EQ(reply(send(request(wire::kGet, key, "", 3))).value.size(), 512u);
  EXPECT_EQ(counter(emu->node(1), "puts"), 2u);
  EXPECT_EQ(counter(emu->node(1), "deletes"), 1u);
  EXPECT_EQ(counter(emu->node(0), "puts"), 0u);
}

// The emulator routes a request by the hash in its dst MAC (Demux), like the switch; a write
// whose key another node owns (here db1, hosted by the same emulator) reaches the node the MAC
// names (db0), which refuses it as a real db node does: BAD_REQUEST, never applied, counted.
// A GET dressed as a cache node's forwarded miss without the cache-port mark is refused too.
TEST_F(EmulatorTest, HostedNodesRefuseWritesOfOtherNodesKeysAndUnmarkedForwardedGets) {
  make();
  const std::string theirs = key_owned_by(cluster, 1), route = key_owned_by(cluster, 0, "route");
  const Mac to_db0 = request_mac(kPrefixOther, key_hash(testing::B(route)));
  const Emulator::Result r = send(testing::to_mac(request(wire::kPut, theirs, "misrouted", 1), to_db0));
  EXPECT_EQ(r.node, 0u);
  EXPECT_EQ(reply(r).status, wire::kBadRequest);
  EXPECT_EQ(counter(emu->node(0), "wrong_owner_dropped"), 1u);
  EXPECT_EQ(counter(emu->node(0), "puts") + counter(emu->node(1), "puts"), 0u);
  EXPECT_EQ(counter(emu->node(1), "wrong_owner_dropped"), 0u);
  // Routed to its owner, the same write is applied.
  EXPECT_EQ(reply(send(request(wire::kPut, theirs, "v", 2))).status, wire::kOk);
  EXPECT_EQ(counter(emu->node(1), "puts"), 1u);

  const std::string mine = key_owned_by(cluster, 0);
  const auto forged = request(wire::kGet, mine, "", 3, wire::kForwarded, 7777, kPrefixForwarded);
  EXPECT_EQ(reply(send(forged)).status, wire::kBadRequest);
  EXPECT_EQ(counter(emu->node(0), "forwarded_unmarked_dropped"), 1u);
  EXPECT_EQ(reply(send(db::testing::from_cache_port(forged))).status, wire::kOk);
  EXPECT_EQ(counter(emu->node(0), "forwarded_gets"), 1u);
}

TEST_F(EmulatorTest, OverTheLimitAFrameGetsNothingAndNeverReachesTheHandler) {
  make(/*rate=*/10, /*burst=*/2);  // depth max(2, 10/1000) = 2
  EXPECT_EQ(emu->bucket_depth(), 2.0);
  const std::string k0 = key_owned_by(cluster, 0), k1 = key_owned_by(cluster, 1);
  EXPECT_EQ(send(request(wire::kGet, k0)).kind, Emulator::Result::kReply);
  EXPECT_EQ(send(request(wire::kPut, k0, "v")).kind, Emulator::Result::kReply);
  for (int i = 0; i < 5; ++i) {
    const Emulator::Result r = send(request(wire::kGet, k0), kT0 + 1000 * i);
    EXPECT_EQ(r.kind, Emulator::Result::kRateLimited);
    EXPECT_EQ(r.node, 0u);
  }
  db::NodeParts& n0 = emu->node(0);
  EXPECT_EQ(counter(n0, "rate_limited"), 5u);
  EXPECT_EQ(counter(n0, "rx_frames"), 2u);  // the handler saw only what the bucket let through
  EXPECT_EQ(counter(n0, "gets"), 1u);
  EXPECT_EQ(counter(n0, "requests_served"), 2u);
  // Node 1 has its own bucket.
  EXPECT_EQ(send(request(wire::kGet, k1)).kind, Emulator::Result::kReply);
  EXPECT_EQ(counter(emu->node(1), "rate_limited"), 0u);
  // 10/s: one token back after 100 ms, not before.
  EXPECT_EQ(send(request(wire::kGet, k0), kT0 + 99'000'000).kind, Emulator::Result::kRateLimited);
  EXPECT_EQ(send(request(wire::kGet, k0), kT0 + 100'000'000).kind, Emulator::Result::kReply);
  EXPECT_EQ(send(request(wire::kGet, k0), kT0 + 100'000'000).kind, Emulator::Result::kRateLimited);
  EXPECT_EQ(emu->totals().rate_limited, 7u);
}

TEST_F(EmulatorTest, UnlimitedMeansNoBucket) {
  make(/*rate=*/0, /*burst=*/1);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(send(request(wire::kGet, key_owned_by(cluster, 0))).kind, Emulator::Result::kReply);
  EXPECT_EQ(counter(emu->node(0), "rate_limited"), 0u);
}

TEST_F(EmulatorTest, ForeignOwnAndMalformedFramesAreCountedNotAnswered) {
  make();
  EXPECT_EQ(send(testing::arp_frame()).kind, Emulator::Result::kUnrouted);
  EXPECT_EQ(send(request(wire::kGet, key_owned_by(cluster, 2))).kind, Emulator::Result::kUnrouted);
  auto own = request(wire::kGet, key_owned_by(cluster, 0));
  std::memcpy(own.data() + 6, cluster.db_nodes[0].mac.data(), 6);
  EXPECT_EQ(send(own).kind, Emulator::Result::kOwnTx);
  // Routed by its MAC, then refused by the db node's own parser: malformed, no reply.
  auto bad = request(wire::kGet, key_owned_by(cluster, 1));
  bad[wire::off::kMagic] = 0;
  EXPECT_EQ(send(bad).kind, Emulator::Result::kNoReply);
  // Refused by the db node's pre-filter (wire::screen): a wrong IPv4 header checksum.
  auto bad_checksum = request(wire::kGet, key_owned_by(cluster, 1));
  bad_checksum[wire::off::kIpTtl] = 1;
  EXPECT_EQ(send(bad_checksum).kind, Emulator::Result::kNoReply);
  // A frame to a node MAC that is not a request: that node's handler ignores it.
  EXPECT_EQ(send(testing::to_mac(testing::arp_frame(), cluster.db_nodes[0].mac)).kind,
            Emulator::Result::kNoReply);
  // A frame larger than one mbuf: charged to its node and dropped as malformed.
  const auto big = request(wire::kGet, key_owned_by(cluster, 0));
  EXPECT_EQ(emu->handle(0, big, true, out, kT0).kind, Emulator::Result::kNoReply);

  const EmulatorTotals t = emu->totals();
  EXPECT_EQ(t.rx_frames, 7u);
  EXPECT_EQ(t.unrouted, 2u);
  EXPECT_EQ(t.own_tx, 1u);
  EXPECT_EQ(t.malformed, 3u);
  EXPECT_EQ(counter(emu->node(1), "malformed_dropped"), 2u);
  EXPECT_EQ(counter(emu->node(0), "ignored"), 1u);
  EXPECT_EQ(counter(emu->node(0), "malformed_dropped"), 1u);
  EXPECT_EQ(t.served, 0u);
}

// Each hosted node deduplicates like a db node (it is one): by request id alone.
TEST_F(EmulatorTest, AReusedRequestIdIsAnsweredTheFirstOutcomeNotApplied) {
  make();
  const std::string k = key_owned_by(cluster, 0);
  const Emulator::Result put = send(request(wire::kPut, k, "v", 77));
  ASSERT_EQ(put.kind, Emulator::Result::kReply);
  const Emulator::Result del = send(request(wire::kDelete, k, "", 77));  // same id, other write
  ASSERT_EQ(del.kind, Emulator::Result::kReply);
  wire::FrameView rep{};
  ASSERT_EQ(wire::parse(std::span<const uint8_t>(out.data(), del.len), rep), wire::ParseError::kNone);
  EXPECT_EQ(rep.status, wire::kOk);
  EXPECT_EQ(rep.op(), wire::kDelete);
  EXPECT_EQ(counter(emu->node(0), "duplicate_writes"), 1u);
  EXPECT_EQ(counter(emu->node(0), "duplicate_id_conflicts"), 1u);
}

TEST_F(EmulatorTest, StatsOverGrpcReportEachNodesOwnCounters) {
  make(/*rate=*/1, /*burst=*/3, /*lanes=*/2);
  std::string err;
  ASSERT_TRUE(emu->start(&err)) << err;
  const std::string k0 = key_owned_by(cluster, 0), k1 = key_owned_by(cluster, 1);
  for (int i = 0; i < 5; ++i) send(request(wire::kGet, k0), kT0, i % 2);  // 3 served, 2 limited
  send(request(wire::kGet, k1), kT0, 1);
  send(testing::arp_frame());
  const Emulator::Result failed = emu->handle(0, request(wire::kPut, k1, "v"), false, out, kT0);
  ASSERT_EQ(failed.kind, Emulator::Result::kReply);
  emu->sent(0, failed.node, false);  // the NIC refused this reply

  struct Want { uint64_t gets, puts, served, limited, tx_errors; };
  const Want want[2] = {{3, 0, 3, 2, 0}, {1, 1, 1, 0, 1}};
  for (uint32_t k : {0u, 1u}) {
    auto ch = grpc::CreateChannel(cluster.db_nodes[k].grpc, grpc::InsecureChannelCredentials());
    auto stub = exo::DbNode::NewStub(ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    exo::StatsRequest req;
    exo::StatsReply rep;
    ASSERT_TRUE(stub->Stats(&ctx, req, &rep).ok()) << cluster.db_nodes[k].grpc;
    EXPECT_EQ(rep.node(), cluster.db_nodes[k].name);
    std::map<std::string, uint64_t> got;
    for (const auto& c : rep.counters()) got[c.name()] = c.value();
    EXPECT_EQ(got["gets"], want[k].gets) << k;
    EXPECT_EQ(got["puts"], want[k].puts) << k;
    EXPECT_EQ(got["requests_served"], want[k].served) << k;
    EXPECT_EQ(got["rate_limited"], want[k].limited) << k;
    EXPECT_EQ(got["tx_errors"], want[k].tx_errors) << k;
    EXPECT_EQ(got["emulator_unrouted"], 1u) << k;  // process-wide, the same in every node
    EXPECT_EQ(got["emulator_rx_frames"], 8u) << k;
    EXPECT_TRUE(got.count("cached_keys")) << k;
  }
  emu->stop();
}

TEST_F(EmulatorTest, StartFailsCleanlyWhenANodeCannotListen) {
  make();
  const std::string file = (dir.path / "not-a-socket").string();
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  cluster.db_nodes[1].grpc = "unix:" + file;  // the emulator reads its nodes' config from here
  std::string err;
  EXPECT_FALSE(emu->start(&err));
  EXPECT_NE(err.find("db_nodes[1] (db1).grpc"), std::string::npos) << err;
  EXPECT_NE(err.find("not a socket"), std::string::npos) << err;
}

// Mutual TLS (grpc_security.h): every hosted node serves with the emulator's one certificate,
// so peers dial each node with the emulator's name as the target-name override
// (cert_name_of); a missing certificate is a build error naming security.cert_dir.
TEST_F(EmulatorTest, HostedNodesServeTlsWithTheEmulatorsCertificate) {
  ::exo::testing::PkiDir pki;
  ::exo::testing::make_test_pki(pki.path, {"emu0", "operator"});
  cluster = emu_cluster(dir.path.string());
  cluster.security.insecure_dev_mode = false;
  cluster.security.cert_dir = pki.str();
  std::string err;
  emu = Emulator::build(cluster, "emu0", 1, &err);
  ASSERT_NE(emu, nullptr) << err;
  ASSERT_TRUE(emu->start(&err)) << err;
  const auto op = GrpcSecurity::load(cluster, "operator");
  for (uint32_t k : {0u, 1u}) {
    const DbNodeInfo& d = cluster.db_nodes[k];
    ASSERT_EQ(cert_name_of(d), "emu0");
    auto stub = exo::DbNode::NewStub(op->channel(d.grpc, cert_name_of(d)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    exo::StatsReply rep;
    ASSERT_TRUE(stub->Stats(&ctx, exo::StatsRequest{}, &rep).ok()) << d.grpc;
    EXPECT_EQ(rep.node(), d.name);
    // The node's own name is not on the emulator's certificate.
    auto by_name = exo::DbNode::NewStub(op->channel(d.grpc, d.name));
    grpc::ClientContext ctx2;
    ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    EXPECT_EQ(by_name->Stats(&ctx2, exo::StatsRequest{}, &rep).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  emu->stop();
  emu.reset();

  std::filesystem::remove(pki.path / "emu0.crt");
  EXPECT_EQ(Emulator::build(cluster, "emu0", 1, &err), nullptr);
  EXPECT_NE(err.find("security.cert_dir: " + pki.str() + "/emu0.crt"), std::string::npos) << err;
}

TEST(EmulatorEal, ArgsForTheSharedInterfaceWithAUniquePrefix) {
  const Cluster c = emu_cluster();
  const auto a = dpdk::build_eal_args(
      "exo-emulator", dpdk::EalSpec{"exo-emu-emu0", "0-1", c.db_nodes[0].iface, {}}, 1500, {"-v"});
  EXPECT_EQ(a, (std::vector<std::string>{
                   "exo-emulator", "-l", "0-1", "--file-prefix", "exo-emu-emu0",
                   "--log-level=*:warning", "--no-huge", "-m", "256", "--no-pci",
                   "--vdev=net_af_packet0,iface=emu0-eth0,qpairs=2", "-v"}));
}

TEST(EmulatorBucket, DepthIsABurstOrOneMillisecond) {
  EXPECT_EQ(bucket_depth(1000, 32), 32.0);
  EXPECT_EQ(bucket_depth(72'200, 32), 72.2);
  EXPECT_EQ(bucket_depth(5, 0), 1.0);
}

}  // namespace
}  // namespace exo::emu
