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

TEST(Options, ParsesProtocolAndAddressOverrides) {
  Options o;
  const auto r = parse_options({"exo-loadgen", "--config", "x.json", "--client", "client0", "--rate",
                                "1000", "--protocol", "memcached", "--dst-mac", "02:00:00:00:0b:02",
                                "--dst-ip", "10.9.0.2", "--dst-port", "11311", "--src-mac",
                                "02:00:00:00:0a:01", "--src-ip", "10.9.0.1"},
                               &o);
  ASSERT_TRUE(r.run) << r.message;
  EXPECT_EQ(o.protocol, "memcached");
  EXPECT_EQ(o.dst_mac, "02:00:00:00:0b:02");
  EXPECT_EQ(o.dst_ip, "10.9.0.2");
  EXPECT_TRUE(o.has_dst_port);
  EXPECT_EQ(o.dst_port, 11311u);
  EXPECT_EQ(o.src_mac, "02:00:00:00:0a:01");
  EXPECT_EQ(o.src_ip, "10.9.0.1");
  Options d;
  ASSERT_TRUE(parse_options({"exo-loadgen", "--config", "x", "--client", "c", "--rate", "1"}, &d).run);
  EXPECT_EQ(d.protocol, "exo");  // the default: unchanged behaviour
  EXPECT_FALSE(d.has_dst_port);
  EXPECT_TRUE(d.dst_mac.empty() && d.dst_ip.empty() && d.src_mac.empty() && d.src_ip.empty());
}

Options memcached() {
  Options o = base();
  o.protocol = "memcached";
  o.dst_mac = "02:00:00:00:0b:02";
  o.dst_ip = "10.9.0.2";
  return o;
}

TEST(Options, ProtocolAndAddressErrorsNameTheOption) {
  Options o = base();
  o.protocol = "redis";
  EXPECT_TRUE(names(error_of(o), "--protocol"));
  for (const char* bad : {"02:00:00:00:0b", "zz:00:00:00:0b:02", "00:00:00:00:00:00", "junk"}) {
    o = base();
    o.dst_mac = bad;
    EXPECT_TRUE(names(error_of(o), "--dst-mac")) << bad;
    o = base();
    o.src_mac = bad;
    EXPECT_TRUE(names(error_of(o), "--src-mac")) << bad;
  }
  o = base();
  o.src_mac = "03:00:00:00:0a:01";  // multicast: no source
  EXPECT_TRUE(names(error_of(o), "--src-mac"));
  o.src_mac = "";
  o.dst_mac = "ff:ff:ff:ff:ff:ff";  // a destination may be anything but zero
  EXPECT_EQ(error_of(o), "");
  for (const char* bad : {"10.9.0", "10.9.0.256", "0.0.0.0", "host"}) {
    o = base();
    o.dst_ip = bad;
    EXPECT_TRUE(names(error_of(o), "--dst-ip")) << bad;
    o = base();
    o.src_ip = bad;
    EXPECT_TRUE(names(error_of(o), "--src-ip")) << bad;
  }
  o = base();
  o.has_dst_port = true;
  o.dst_port = 0;
  EXPECT_TRUE(names(error_of(o), "--dst-port"));
  o.dst_port = 65536;
  EXPECT_TRUE(names(error_of(o), "--dst-port"));
  Options p;
  const auto r = parse_options({"exo-loadgen", "--config", "x", "--client", "c", "--rate", "1",
                                "--dst-port", "port"}, &p);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.message.find("--dst-port"), std::string::npos) << r.message;
}

TEST(Options, MemcachedNeedsTheServerAndGetsOnly) {
  EXPECT_EQ(error_of(memcached()), "");
  Options o = memcached();
  o.dst_mac = "";
  EXPECT_TRUE(names(error_of(o), "--dst-mac"));
  o = memcached();
  o.dst_ip = "";
  EXPECT_TRUE(names(error_of(o), "--dst-ip"));
  o = memcached();
  o.get_ratio = 0.95;
  const std::string err = error_of(o);
  EXPECT_TRUE(names(err, "--get-ratio"));
  EXPECT_NE(err.find("GETs only"), std::string::npos) << err;
  o = memcached();
  o.value_size = 5000;  // no PUTs: the value size does not matter
  EXPECT_EQ(error_of(o), "");
  // reflect sends the exo requests: PUTs allowed, no server address needed.
  o = base();
  o.protocol = "reflect";
  o.get_ratio = 0.5;
  EXPECT_EQ(error_of(o), "");
}

TEST(Options, PlanAppliesTheOverrides) {
  RunPlan p;
  Options o = base();
  o.protocol = "reflect";  // no overrides: the cluster's service address and the key-hash MAC
  ASSERT_EQ(plan_run(o, test_cluster(), &p), "");
  EXPECT_EQ(p.protocol, Protocol::kReflect);
  EXPECT_FALSE(p.endpoint.fixed_dst_mac);
  EXPECT_FALSE(p.endpoint.ip_dst_fixed());  // each request's IPv4 dst is its key's request_ip
  EXPECT_EQ(p.endpoint.service_ip, 0x0a0000feu);
  EXPECT_EQ(p.endpoint.udp_port, 7777);
  EXPECT_EQ(p.endpoint.mac, (Mac{0x02, 0, 0, 0, 3, 1}));
  EXPECT_EQ(p.endpoint.ip, 0x0a000301u);
  auto j = params_json(o, p);
  EXPECT_EQ(j["protocol"], "reflect");
  EXPECT_TRUE(j["dst_mac"].is_null());
  EXPECT_TRUE(j["dst_ip"].is_null());
  EXPECT_TRUE(j["dst_port"].is_null());
  EXPECT_EQ(j["ip_dst"], "key hash");

  o = memcached();
  o.src_mac = "02:00:00:00:0a:01";
  o.src_ip = "10.9.0.1";
  ASSERT_EQ(plan_run(o, test_cluster(), &p), "");
  EXPECT_EQ(p.protocol, Protocol::kMemcached);
  EXPECT_TRUE(p.endpoint.fixed_dst_mac);
  EXPECT_EQ(p.endpoint.dst_mac, (Mac{0x02, 0, 0, 0, 0x0b, 0x02}));
  EXPECT_EQ(p.endpoint.service_ip, 0x0a090002u);
  EXPECT_EQ(p.endpoint.udp_port, 11211);  // memcached's port unless --dst-port
  EXPECT_EQ(p.endpoint.mac, (Mac{0x02, 0, 0, 0, 0x0a, 0x01}));
  EXPECT_EQ(p.endpoint.ip, 0x0a090001u);
  j = params_json(o, p);
  EXPECT_EQ(j["protocol"], "memcached");
  EXPECT_EQ(j["dst_mac"], "02:00:00:00:0b:02");
  EXPECT_EQ(j["dst_ip"], "10.9.0.2");
  EXPECT_EQ(j["service_ip"], "10.9.0.2");
  EXPECT_EQ(j["ip_dst"], "10.9.0.2");  // where the requests went
  EXPECT_EQ(j["udp_port"], 11211);
  EXPECT_EQ(j["client_mac"], "02:00:00:00:0a:01");  // the requests' source
  EXPECT_EQ(j["client_ip"], "10.9.0.1");
  EXPECT_EQ(j["src_ip"], "10.9.0.1");
  o.has_dst_port = true;
  o.dst_port = 11311;
  ASSERT_EQ(plan_run(o, test_cluster(), &p), "");
  EXPECT_EQ(p.endpoint.udp_port, 11311);
  o = base();
  o.dst_ip = "10.9.0.2";  // exo with a destination override
  o.has_dst_port = true;
  o.dst_port = 9999;
  ASSERT_EQ(plan_run(o, test_cluster(), &p), "");
  EXPECT_EQ(p.endpoint.service_ip, 0x0a090002u);
  EXPECT_EQ(p.endpoint.udp_port, 9999);
  EXPECT_FALSE(p.endpoint.fixed_dst_mac);
  EXPECT_TRUE(p.endpoint.fixed_dst_ip);  // --dst-ip fixes the IPv4 dst; the MAC stays the key's
  EXPECT_EQ(params_json(o, p)["ip_dst"], "10.9.0.2");
}

TEST(Options, MemcachedWindowIsAtMost65536) {
  RunPlan p;
  Options o = memcached();
  o.rate = 1'000'000;  // 1.51 M requests in flight would need a 2^21 window in exo mode
  ASSERT_EQ(plan_run(o, test_cluster(), &p), "");
  EXPECT_EQ(p.window, 65'536u);
  EXPECT_EQ(params_json(o, p)["window"], 65'536);
  o.rate = 5e7;  // beyond the exo window's limit, yet fine here: the window is capped
  EXPECT_EQ(error_of(o), "");
  o.rate = 10'000;  // small rates keep the smaller window
  ASSERT_EQ(plan_run(o, test_cluster(), &p), "");
  EXPECT_EQ(p.window, 16'384u);
  o.protocol = "exo";
  o.rate = 1'000'000;
  ASSERT_EQ(plan_run(o, test_cluster(), &p), "");
  EXPECT_EQ(p.window, 2'097'152u);
}

}  // namespace
}  // namespace exo::loadgen
