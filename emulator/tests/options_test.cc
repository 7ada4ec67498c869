// exo-loadgen options: parsing, and every validation error names its option.
#include "loadgen/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace exo::loadgen {
namespace {

Cluster test_cluster() {
  Cluster c;
  c.mtu = 1500;
  c.udp_port = 7777;
  c.service_ip = 0x0a0000fe;
  NodeInfo a;
  a.name = "client0";
  a.mac = {0x02, 0, 0, 0, 3, 1};
  a.ip = 0x0a000301;
  a.iface = "client0-eth0";
  NodeInfo b = a;
  b.name = "client1";
  b.iface = "client1-eth0";
  c.clients = {a, b};
  return c;
}

Options base() {
  Options o;
  o.config = "c.json";
  o.client = "client0";
  o.rate = 1000;
  return o;
}

// The error of plan_run for `o`, "" if it is accepted.
std::string error_of(const Options& o, const Cluster& c = test_cluster()) {
  RunPlan p;
  return plan_run(o, c, &p);
}

::testing::AssertionResult names(const std::string& err, const std::string& option) {
  if (err.rfind(option, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "error '" << err << "' does not start with " << option;
}

TEST(Options, ParsesTheCommandLine) {
  Options o;
  const auto r = parse_options({"exo-loadgen", "--config", "x.json", "--client", "client1", "--rate",
                                "2500.5", "--duration", "3", "--alpha", "0", "--get-ratio", "0.9",
                                "--seed", "17", "--client-id", "4294967295", "--out", "o.json"},
                               &o);
  ASSERT_TRUE(r.run) << r.message;
  EXPECT_EQ(o.config, "x.json");
  EXPECT_EQ(o.client, "client1");
  EXPECT_DOUBLE_EQ(o.rate, 2500.5);
  EXPECT_DOUBLE_EQ(o.duration_s, 3);
  EXPECT_EQ(o.alpha, 0.0);
  EXPECT_TRUE(o.has_seed);
  EXPECT_EQ(o.seed, 17u);
  EXPECT_TRUE(o.has_client_id);
  EXPECT_EQ(o.client_id, 4294967295u);
  EXPECT_EQ(o.drain_ms, 500u);        // defaults
  EXPECT_EQ(o.keys, 100'000'000u);
  EXPECT_EQ(o.key_size, 16u);
  EXPECT_EQ(o.value_size, 512u);
}

TEST(Options, ParseErrorsExitWithUsage) {
  Options o;
  auto r = parse_options({"exo-loadgen", "--config", "x.json", "--client", "c"}, &o);
  EXPECT_FALSE(r.run);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.message.find("--rate"), std::string::npos) << r.message;
  r = parse_options({"exo-loadgen", "--config", "x", "--client", "c", "--rate", "fast"}, &o);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.message.find("--rate"), std::string::npos) << r.message;
  r = parse_options({"exo-loadgen", "--help"}, &o);
  EXPECT_FALSE(r.run);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.message.find("--swap-every"), std::string::npos);
}

TEST(Options, ValidationNamesTheOption) {
  EXPECT_EQ(error_of(base()), "");
  Options o = base();
  o.rate = 0;
  EXPECT_TRUE(names(error_of(o), "--rate"));
  o.rate = -5;
  EXPECT_TRUE(names(error_of(o), "--rate"));
  o = base();
  o.duration_s = 0;
  EXPECT_TRUE(names(error_of(o), "--duration"));
  o = base();
  o.key_size = 8;
  EXPECT_TRUE(names(error_of(o), "--key-size"));
  o.key_size = 251;
  EXPECT_TRUE(names(error_of(o), "--key-size"));
  o.key_size = 9;  // 5 digits: ids up to 99999
  o.keys = 100'000;
  EXPECT_EQ(error_of(o), "");
  o.keys = 100'001;
  EXPECT_TRUE(names(error_of(o), "--keys"));
  o = base();
  o.alpha = 3.5;
  EXPECT_TRUE(names(error_of(o), "--alpha"));
  o = base();
  o.get_ratio = 1.01;
  EXPECT_TRUE(names(error_of(o), "--get-ratio"));
  o = base();
  o.swap_count = 10;
  EXPECT_TRUE(names(error_of(o), "--swap-every"));
  o.swap_every_s = 5;
  EXPECT_EQ(error_of(o), "");
  o.keys = 19;
  EXPECT_TRUE(names(error_of(o), "--swap-count"));
  o = base();
  o.catch_up_ms = 10'001;
  EXPECT_TRUE(names(error_of(o), "--catch-up-ms"));
  o = base();
  o.rate = 5e7;  // 50M/s x 1.51 s in flight: more than the reply window allows
  EXPECT_TRUE(names(error_of(o), "--rate"));
  o = base();
  o.client = "nobody";
  const std::string err = error_of(o);
  EXPECT_TRUE(names(err, "--client"));
  EXPECT_NE(err.find("client0, client1"), std::string::npos) << err;
}

TEST(Options, ValueMustFitTheMtu) {
  Options o = base();
  o.value_size = 1436;  // 62 + 16 + 1436 = 1514 = 14 + 1500
  EXPECT_EQ(error_of(o), "");
  o.value_size = 1437;
  EXPECT_TRUE(names(error_of(o), "--value-size"));
  Cluster jumbo = test_cluster();
  jumbo.mtu = 9000;
  EXPECT_EQ(error_of(o, jumbo), "");
}

TEST(Options, PlanResolvesTheClientAndSizes) {
  Options o = base();
  o.client = "client1";
  o.rate = 100'000;
  o.drain_ms = 500;
  o.has_seed = true;
  o.seed = 99;
  o.has_client_id = true;
  o.client_id = 1234;
  RunPlan p;
  ASSERT_EQ(plan_run(o, test_cluster(), &p), "");
  EXPECT_EQ(p.iface, "client1-eth0");
  EXPECT_EQ(p.endpoint.udp_port, 7777);
  EXPECT_EQ(p.endpoint.service_ip, 0x0a0000feu);
  EXPECT_EQ(p.seed, 99u);
  EXPECT_EQ(p.client_id, 1234u);
  EXPECT_EQ(p.batch, 20u);  // 100k/s x 200 us
  EXPECT_GE(p.window, 150'000u);
  EXPECT_EQ(p.window & (p.window - 1), 0u);
  o.iface = "veth9";
  o.batch = 7;
  ASSERT_EQ(plan_run(o, test_cluster(), &p), "");
  EXPECT_EQ(p.iface, "veth9");
  EXPECT_EQ(p.batch, 7u);
  const auto j = params_json(o, p);
  for (const char* k : {"rate", "duration_s", "catch_up_ms", "drain_ms", "keys", "alpha", "swap_every_s",
                        "swap_count", "key_size", "value_size", "get_ratio", "seed", "client_id",
                        "iface", "client", "batch", "window"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["client_ip"], "10.0.3.1");
}

}  // namespace
}  // namespace exo::loadgen
