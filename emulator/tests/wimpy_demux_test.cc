// Demux: key hash -> hosted owner, node MAC -> node, foreign and own frames.
#include <gtest/gtest.h>

#include "demux.h"
#include "emulator.h"
#include "wimpy_test_util.h"

namespace exo::emu {
namespace {

using testing::emu_cluster;
using testing::key_owned_by;
using testing::request;

class DemuxTest : public ::testing::Test {
 protected:
  Cluster c = emu_cluster();
  std::vector<uint32_t> hosted = hosted_nodes(c, "emu0");
  Demux d{c, hosted};
};

TEST_F(DemuxTest, HostedNodesAreThoseNamingTheEmulator) {
  EXPECT_EQ(hosted, (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(hosted_nodes(c, "emu1").empty());
  EXPECT_TRUE(hosted_nodes(c, "").empty());  // real db nodes have no emulator
  EXPECT_EQ(d.slot_of(0), 0);
  EXPECT_EQ(d.slot_of(1), 1);
  EXPECT_EQ(d.slot_of(2), -1);
  EXPECT_EQ(d.slot_of(99), -1);
}

TEST_F(DemuxTest, RequestsGoToTheNodeOwningTheKeyHash) {
  for (uint32_t owner : {0u, 1u}) {
    for (int i = 0; i < 20; ++i) {
      const std::string k = key_owned_by(c, owner, "key" + std::to_string(i) + "-");
      for (uint8_t op : {wire::kGet, wire::kPut, wire::kDelete}) {  // 0xAA and 0xBA prefixes
        const Route r = d.route(request(op, k, op == wire::kPut ? "v" : ""));
        EXPECT_EQ(r.kind, Route::kNode) << k;
        EXPECT_EQ(r.node, static_cast<uint32_t>(d.slot_of(owner))) << k;
      }
      // A GET a cache node forwards (0xAE), and an older cache node's forward (0xBA), too.
      for (uint8_t prefix : {kPrefixForwarded, kPrefixOther}) {
        const Route f = d.route(request(wire::kGet, k, "", 1, wire::kForwarded, 7777, prefix));
        EXPECT_EQ(f.kind, Route::kNode) << int(prefix);
        EXPECT_EQ(f.node, static_cast<uint32_t>(d.slot_of(owner))) << int(prefix);
      }
    }
  }
}

TEST_F(DemuxTest, KeysOfNodesHostedElsewhereAreForeign) {
  const std::string k = key_owned_by(c, 2);
  EXPECT_EQ(d.route(request(wire::kGet, k)).kind, Route::kForeign);
}

TEST_F(DemuxTest, FramesToANodeMacGoToThatNode) {
  const auto f = testing::to_mac(testing::arp_frame(), c.db_nodes[1].mac);
  const Route r = d.route(f);
  EXPECT_EQ(r.kind, Route::kNode);
  EXPECT_EQ(r.node, 1u);
  EXPECT_EQ(d.route(testing::to_mac(f, c.db_nodes[2].mac)).kind, Route::kForeign);
}

TEST_F(DemuxTest, ArpShortAndOtherFramesAreForeign) {
  EXPECT_EQ(d.route(testing::arp_frame()).kind, Route::kForeign);
  EXPECT_EQ(d.route({}).kind, Route::kForeign);
  const std::vector<uint8_t> shorter(13, 0xAA);
  EXPECT_EQ(d.route(shorter).kind, Route::kForeign);
  EXPECT_EQ(d.route(testing::to_mac(testing::arp_frame(), Mac{0x02, 9, 9, 9, 9, 9})).kind,
            Route::kForeign);
}

TEST_F(DemuxTest, OurOwnRepliesSeenAgainAreOwnTx) {
  auto f = request(wire::kGet, key_owned_by(c, 0));
  for (int i = 0; i < 6; ++i) f[6 + i] = c.db_nodes[1].mac[i];  // src = a hosted node
  EXPECT_EQ(d.route(f).kind, Route::kOwnTx);
}

TEST_F(DemuxTest, ATableWithoutPartitionsRoutesNoRequest) {
  Cluster empty = c;
  empty.slot_owner.clear();
  Demux e(empty, hosted);
  EXPECT_EQ(e.route(request(wire::kGet, "k")).kind, Route::kForeign);
}

}  // namespace
}  // namespace exo::emu
