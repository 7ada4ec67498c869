// exo-proxy's options (options.h): every error names the option or config field at fault, and a
// good command line resolves into the client endpoint and the frame limits of the cluster.
#include <gtest/gtest.h>

#include "options.h"
#include "wire.h"

namespace exo::proxy {
namespace {

CliResult parse(std::vector<std::string> args, Options* o) {
  args.insert(args.begin(), "exo-proxy");
  return parse_options(args, o);
}

Cluster cluster() {
  Cluster c;
  c.mtu = 1500;
  c.udp_port = 7777;
  NodeInfo web;
  web.name = "web1";
  web.mac = {2, 0, 0, 0, 3, 1};
  web.ip = 0x0A000301;
  web.iface = "web1-eth0";
  c.clients.push_back(web);
  return c;
}

std::string plan_error(std::vector<std::string> args, Cluster c = cluster()) {
  Options o;
  args.insert(args.begin(), {"--config", "c.json", "--client", "web1"});
  const CliResult r = parse(args, &o);
  if (!r.run) return "parse: " + r.message;
  Plan p;
  return plan_proxy(o, c, &p);
}

TEST(ProxyOptions, ConfigAndClientAreRequired) {
  Options o;
  const CliResult r = parse({"--client", "web1"}, &o);
  EXPECT_FALSE(r.run);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.message.find("--config"), std::string::npos) << r.message;
}

TEST(ProxyOptions, AGoodCommandLineResolvesAgainstTheCluster) {
  Options o;
  ASSERT_TRUE(parse({"--config", "c.json", "--client", "web1", "--listen", "127.0.0.1:0", "--unix", "/tmp/p.sock",
                     "--window", "64", "--timeout-ms", "100", "--retries", "3", "--max-conns", "10"},
                    &o)
                  .run);
  Plan p;
  ASSERT_EQ(plan_proxy(o, cluster(), &p), "");
  EXPECT_EQ(p.iface, "web1-eth0");
  EXPECT_EQ(p.listen.ip, 0x7F000001u);
  EXPECT_EQ(p.listen.port, 0);
  EXPECT_EQ(p.endpoint.mac, (std::array<uint8_t, 6>{2, 0, 0, 0, 3, 1}));
  EXPECT_EQ(p.endpoint.ip, 0x0A000301u);
  EXPECT_EQ(p.endpoint.udp_port, 7777);
  EXPECT_EQ(p.engine.window, 64u);
  EXPECT_DOUBLE_EQ(p.engine.timeout_s, 0.1);
  EXPECT_EQ(p.engine.retries, 3);
  EXPECT_EQ(p.loop.max_conns, 10u);
  EXPECT_EQ(p.loop.session.max_kv, wire::max_kv_bytes(1500));
  EXPECT_EQ(p.loop.session.limits.max_value, wire::max_kv_bytes(1500) - 1);
}

TEST(ProxyOptions, EachErrorNamesItsOptionOrField) {
  EXPECT_NE(plan_error({"--window", "0"}).find("--window: must be in 1.."), std::string::npos);
  EXPECT_NE(plan_error({"--timeout-ms", "0"}).find("--timeout-ms"), std::string::npos);
  EXPECT_NE(plan_error({"--max-conns", "0"}).find("--max-conns"), std::string::npos);
  EXPECT_NE(plan_error({"--listen", "localhost"}).find("--listen"), std::string::npos);
  EXPECT_NE(plan_error({"--listen", "127.0.0.1:70000"}).find("--listen"), std::string::npos);
  EXPECT_NE(plan_error({"--window", "x"}).find("--window"), std::string::npos);

  Options o;
  ASSERT_TRUE(parse({"--config", "c.json", "--client", "web9"}, &o).run);
  Plan p;
  EXPECT_EQ(plan_proxy(o, cluster(), &p), "--client: no client named 'web9' in c.json clients[] (have: web1)");

  Cluster no_iface = cluster();
  no_iface.clients[0].iface.clear();
  EXPECT_EQ(plan_error({}, no_iface), "c.json: clients[web1].iface: empty (or give --iface)");
  EXPECT_EQ(plan_error({"--iface", "eth1"}, no_iface), "");
  Cluster multicast = cluster();
  multicast.clients[0].mac[0] = 1;
  EXPECT_EQ(plan_error({}, multicast), "c.json: clients[web1].mac: must be a unicast MAC");
  Cluster tiny = cluster();
  tiny.mtu = 40;
  EXPECT_NE(plan_error({}, tiny).find("cluster.mtu"), std::string::npos);
}

TEST(ProxyOptions, HostPortParsing) {
  EXPECT_EQ(parse_host_port("127.0.0.1:11211")->port, 11211);
  EXPECT_EQ(parse_host_port("10.0.0.2:0")->ip, 0x0A000002u);
  EXPECT_FALSE(parse_host_port("127.0.0.1"));
  EXPECT_FALSE(parse_host_port("127.0.0.1:"));
  EXPECT_FALSE(parse_host_port("127.0.0.1:-1"));
  EXPECT_FALSE(parse_host_port("::1:11211"));
}

}  // namespace
}  // namespace exo::proxy
