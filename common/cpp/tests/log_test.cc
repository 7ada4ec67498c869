// Every log line starts with the UTC time (ISO 8601, milliseconds), the program and the kernel
// thread id (log.h).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <thread>

#include "log.h"

namespace {

std::string logged(void (*fn)()) {
  testing::internal::CaptureStderr();
  fn();
  return testing::internal::GetCapturedStderr();
}

TEST(Log, LinesCarryUtcTimeAndThreadId) {
  exo::log_program() = "exo-test";
  const std::string line = logged([] { LOG_WARN("hello %d", 42); });
  const std::regex re(R"(^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) exo-test tid=(\d+) warn: hello 42\n$)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(line, m, re)) << line;
  EXPECT_EQ(std::stol(m[2]), static_cast<long>(gettid()));

  // Another thread: another id.
  const std::string other = logged([] { std::thread([] { LOG_ERROR("from a thread"); }).join(); });
  std::smatch n;
  ASSERT_TRUE(std::regex_search(other, n, std::regex(R"( tid=(\d+) error: from a thread\n)"))) << other;
  EXPECT_NE(n[1], m[2]);
}

TEST(Log, LevelFilterStillApplies) {
  exo::set_log_level("error");
  EXPECT_EQ(logged([] { LOG_INFO("hidden"); }), "");
  exo::set_log_level("info");
}

}  // namespace
