#include <gtest/gtest.h>

#include "eal_args.h"

namespace {

using exo::cache::build_eal_args;
using exo::cache::count_lcores;
using Args = std::vector<std::string>;

exo::CacheNodeInfo node() {
  exo::CacheNodeInfo n;
  n.name = "cache0";
  n.iface = "cache0-eth0";
  n.lcores = "1";
  return n;
}

TEST(EalArgs, CountLcores) {
  EXPECT_EQ(count_lcores("1"), 1u);
  EXPECT_EQ(count_lcores("0-3"), 4u);
  EXPECT_EQ(count_lcores("0,2-3,7"), 4u);
  EXPECT_THROW(count_lcores(""), std::invalid_argument);
  EXPECT_THROW(count_lcores("3-1"), std::invalid_argument);
  EXPECT_THROW(count_lcores("a"), std::invalid_argument);
  EXPECT_THROW(count_lcores("1,"), std::invalid_argument);
}

TEST(EalArgs, EmulationDefault) {
  EXPECT_EQ(build_eal_args("prog", node(), 1500, {}),
            (Args{"prog", "-l", "1", "--file-prefix", "exo-cache0", "--log-level=*:warning",
                  "--no-huge", "-m", "256", "--no-pci",
                  "--vdev=net_af_packet0,iface=cache0-eth0,qpairs=1"}));
}

TEST(EalArgs, QueuePairsFollowLcoreCount) {
  auto n = node();
  n.lcores = "0-1";
  const auto a = build_eal_args("prog", n, 1500, {});
  EXPECT_EQ(a.back(), "--vdev=net_af_packet0,iface=cache0-eth0,qpairs=2");
}

TEST(EalArgs, ConfiguredArgsReplaceTheEmulationDefault) {
  auto n = node();
  n.eal_args = {"-a", "0000:3b:00.0", "-n", "4"};
  EXPECT_EQ(build_eal_args("prog", n, 9000, {"--huge-dir", "/mnt/huge"}),
            (Args{"prog", "-l", "1", "--file-prefix", "exo-cache0", "--log-level=*:warning", "-a",
                  "0000:3b:00.0", "-n", "4", "--huge-dir", "/mnt/huge"}));
}

TEST(EalArgs, JumboMtuGetsBiggerAfPacketFrames) {
  EXPECT_EQ(exo::cache::af_packet_framesz(1500), 2048u);
  EXPECT_EQ(exo::cache::af_packet_framesz(9000), 16384u);
  EXPECT_EQ(build_eal_args("prog", node(), 9000, {}).back(),
            "--vdev=net_af_packet0,iface=cache0-eth0,qpairs=1,framesz=16384,blocksz=16384");
}

TEST(EalArgs, CountLcoresRefusesHugeIdsWithInvalidArgument) {
  EXPECT_EQ(count_lcores("1023"), 1u);
  EXPECT_EQ(count_lcores("0-1023"), 1024u);
  EXPECT_THROW(count_lcores("1024"), std::invalid_argument);
  // std::stoul would throw out_of_range here, and the range count would overflow.
  EXPECT_THROW(count_lcores("99999999999999999999999"), std::invalid_argument);
  EXPECT_THROW(count_lcores("0-4294967295"), std::invalid_argument);
  EXPECT_THROW(count_lcores("1,,2"), std::invalid_argument);
  EXPECT_THROW(count_lcores("-"), std::invalid_argument);
}

}  // namespace
