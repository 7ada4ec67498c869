// exo-mcload options: parsing, and every validation error names its option.
#include "mcload/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace exo::mcload {
namespace {

Options base() {
  Options o;
  o.rate = 1000;
  return o;
}

std::string error_of(const Options& o) {
  Plan p;
  return plan_run(o, &p);
}

::testing::AssertionResult names(const std::string& err, const std::string& option) {
  if (err.rfind(option, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "error '" << err << "' does not start with " << option;
}

TEST(McOptions, ParsesTheCommandLine) {
  Options o;
  const auto r = parse_options({"exo-mcload", "--server", "10.0.0.2:11311", "--rate", "50000", "--duration", "2",
                                "--connections", "128", "--depth", "4", "--keys", "10000", "--alpha", "0",
                                "--expect-value-size", "512", "--seed", "7", "--out", "o.json", "--quiet"},
                               &o);
  ASSERT_TRUE(r.run) << r.message;
  EXPECT_TRUE(o.has_server);
  EXPECT_EQ(o.connections, 128u);
  EXPECT_EQ(o.depth, 4u);
  EXPECT_TRUE(o.has_expect_value_size);
  EXPECT_EQ(o.expect_value_size, 512u);
  EXPECT_TRUE(o.has_seed);
  Plan p;
  ASSERT_EQ(plan_run(o, &p), "");
  EXPECT_FALSE(p.target.is_unix);
  EXPECT_EQ(p.target.ip, 0x0a000002u);
  EXPECT_EQ(p.target.port, 11311);
  EXPECT_EQ(p.target.describe(), "10.0.0.2:11311");
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(p.batch, 10u);  // 50,000/s x 200 us
  const auto j = params_json(o, p);
  EXPECT_EQ(j["connections"], 128);
  EXPECT_EQ(j["target"], "10.0.0.2:11311");
  EXPECT_EQ(j["protocol"], "memcached-tcp");
}

TEST(McOptions, DefaultsAndUnixTarget) {
  Options o = base();
  Plan p;
  ASSERT_EQ(plan_run(o, &p), "");
  EXPECT_EQ(p.target.describe(), "127.0.0.1:11211");
  EXPECT_EQ(p.batch, 1u);
  o.unix_path = "/run/exo-proxy.sock";
  ASSERT_EQ(plan_run(o, &p), "");
  EXPECT_TRUE(p.target.is_unix);
  EXPECT_EQ(p.target.describe(), "unix:/run/exo-proxy.sock");
}

TEST(McOptions, RequiredAndUnknownOptionsAreUsageErrors) {
  Options o;
  auto r = parse_options({"exo-mcload"}, &o);
  EXPECT_FALSE(r.run);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.message.find("--rate"), std::string::npos);
  r = parse_options({"exo-mcload", "--rate", "1", "--bogus"}, &o);
  EXPECT_EQ(r.exit_code, 2);
  r = parse_options({"exo-mcload", "--rate", "x"}, &o);
  EXPECT_EQ(r.exit_code, 2);
  r = parse_options({"exo-mcload", "--help"}, &o);
  EXPECT_FALSE(r.run);
  EXPECT_EQ(r.exit_code, 0);
}

TEST(McOptions, EveryRangeErrorNamesItsOption) {
  const auto with = [](auto change) {
    Options o = base();
    change(o);
    return error_of(o);
  };
  EXPECT_TRUE(names(with([](Options& o) { o.rate = 0; }), "--rate"));
  EXPECT_TRUE(names(with([](Options& o) { o.rate = 1e9; }), "--rate"));
  EXPECT_TRUE(names(with([](Options& o) { o.duration_s = 0; }), "--duration"));
  EXPECT_TRUE(names(with([](Options& o) { o.drain_ms = 700'000; }), "--drain-ms"));
  EXPECT_TRUE(names(with([](Options& o) { o.max_wait_ms = 700'000; }), "--max-wait-ms"));
  EXPECT_TRUE(names(with([](Options& o) { o.connections = 0; }), "--connections"));
  EXPECT_TRUE(names(with([](Options& o) { o.connections = 1'000'000; }), "--connections"));
  EXPECT_TRUE(names(with([](Options& o) { o.depth = 0; }), "--depth"));
  EXPECT_TRUE(names(with([](Options& o) { o.depth = 100'000; }), "--depth"));
  EXPECT_TRUE(names(with([](Options& o) { o.key_size = 4; }), "--key-size"));
  EXPECT_TRUE(names(with([](Options& o) { o.key_size = 251; }), "--key-size"));
  EXPECT_TRUE(names(with([](Options& o) { o.keys = 0; }), "--keys"));
  EXPECT_TRUE(names(with([](Options& o) { o.keys = 1'000'000; o.key_size = 9; }), "--keys"));
  EXPECT_TRUE(names(with([](Options& o) { o.alpha = -1; }), "--alpha"));
  EXPECT_TRUE(names(with([](Options& o) { o.has_expect_value_size = true; o.expect_value_size = 2u << 20; }),
                    "--expect-value-size"));
  EXPECT_TRUE(names(with([](Options& o) { o.batch = 5000; }), "--batch"));
  EXPECT_TRUE(names(with([](Options& o) { o.catch_up_ms = 20'000; }), "--catch-up-ms"));
  EXPECT_TRUE(names(with([](Options& o) { o.connect_timeout_ms = 0; }), "--connect-timeout-ms"));
  EXPECT_TRUE(names(with([](Options& o) { o.bin_ms = 1; }), "--bin-ms"));
  EXPECT_TRUE(names(with([](Options& o) { o.unix_path = std::string(200, 'p'); }), "--unix"));
  EXPECT_TRUE(names(with([](Options& o) { o.unix_path = "/x"; o.has_server = true; }), "--unix"));
  for (const char* s : {"127.0.0.1", "localhost:11211", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:x",
                        "0.0.0.0:11211", "1.2.3:80", ":11211"})
    EXPECT_TRUE(names(with([&](Options& o) { o.server = s; }), "--server")) << s;
}

}  // namespace
}  // namespace exo::mcload
