// The DPDK processes' command-line split and quit signal (dpdk/process.h).
#include "dpdk/process.h"

#include <gtest/gtest.h>

#include <csignal>

namespace {

TEST(Process, SplitsAtDoubleDash) {
  const char* args[] = {"prog", "--name", "x", "--", "-a", "0000:3b:00.0"};
  std::vector<std::string> extra;
  EXPECT_EQ(exo::dpdk::split_eal_extra(6, const_cast<char**>(args), &extra), 3);
  EXPECT_EQ(extra, (std::vector<std::string>{"-a", "0000:3b:00.0"}));
  std::vector<std::string> none;
  EXPECT_EQ(exo::dpdk::split_eal_extra(3, const_cast<char**>(args), &none), 3);
  EXPECT_TRUE(none.empty());
}

TEST(Process, TermSetsTheQuitFlag) {
  exo::dpdk::install_quit_signals();
  EXPECT_FALSE(exo::dpdk::quit_flag().load());
  std::raise(SIGTERM);
  EXPECT_TRUE(exo::dpdk::quit_flag().load());
  exo::dpdk::quit_flag() = false;
  std::signal(SIGTERM, SIG_DFL);
}

}  // namespace
