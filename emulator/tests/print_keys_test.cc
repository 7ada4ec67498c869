// --print-keys: the hottest key names in rank order, as the sender maps ranks to keys.
#include "loadgen/print_keys.h"

#include <gtest/gtest.h>

#include "loadgen/hot_set_swap.h"

namespace exo::loadgen {
namespace {

std::string run(std::vector<std::string> args, int* rc) {
  args.insert(args.begin(), "exo-loadgen");
  testing::internal::CaptureStdout();
  EXPECT_TRUE(run_print_keys(args, rc));
  return testing::internal::GetCapturedStdout();
}

TEST(PrintKeys, HottestFirstBeforeAnySwap) {
  int rc = -1;
  EXPECT_EQ(run({"--print-keys", "3", "--keys", "1000"}, &rc),
            "key:000000000000\nkey:000000000001\nkey:000000000002\n");
  EXPECT_EQ(rc, 0);
}

TEST(PrintKeys, FollowsTheSwapSchedule) {
  int rc = -1;
  const std::string out = run({"--print-keys", "2", "--keys", "100", "--swap-count", "10", "--swaps", "1"}, &rc);
  const HotSetSwap order(100, 10);
  EXPECT_EQ(out, key_name(order.key_for_rank(1, 1)) + "\n" + key_name(order.key_for_rank(2, 1)) + "\n");
  EXPECT_EQ(rc, 0);
}

TEST(PrintKeys, OnlyWhenAskedAndBadInputIsAnError) {
  int rc = -1;
  EXPECT_FALSE(run_print_keys({"exo-loadgen", "--rate", "5"}, &rc));
  testing::internal::CaptureStderr();
  EXPECT_TRUE(run_print_keys({"exo-loadgen", "--print-keys", "20", "--keys", "10"}, &rc));
  testing::internal::GetCapturedStderr();
  EXPECT_NE(rc, 0);
}

}  // namespace
}  // namespace exo::loadgen
