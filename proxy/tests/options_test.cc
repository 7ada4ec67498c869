// exo-proxy's options (options.h): every error names the option or config field at fault, and a
// good command line resolves into the client endpoint and the frame limits of the cluster.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "net.h"
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

// The proxies[] entry (its metrics address) is found by --name, or else by the client it speaks as.
TEST(ProxyOptions, FindsItsProxiesEntryByNameOrClient) {
  Cluster c = cluster();
  c.proxies.push_back(ProxyInfo{"web1proxy", "web1", "172.31.0.201:9180"});
  Options o;
  ASSERT_TRUE(parse({"--config", "c.json", "--client", "web1"}, &o).run);
  Plan p;
  ASSERT_EQ(plan_proxy(o, c, &p), "");
  EXPECT_EQ(p.name, "web1proxy");
  EXPECT_EQ(p.metrics, "172.31.0.201:9180");
  ASSERT_EQ(plan_proxy(o, cluster(), &p), "") << "no proxies[] entry: no /metrics, still a proxy";
  EXPECT_EQ(p.metrics, "");

  EXPECT_EQ(plan_error({"--name", "web1proxy"}, c), "");
  EXPECT_EQ(plan_error({"--name", "nosuch"}, c), "--name: no proxies[] entry named 'nosuch' in c.json");
  c.proxies[0].client = "web2";
  EXPECT_EQ(plan_error({"--name", "web1proxy"}, c),
            "--name: proxies[web1proxy].client is 'web2', not --client 'web1'");
}

TEST(ProxyOptions, UnixSocketAccessOptions) {
  Options o;
  ASSERT_TRUE(parse({"--config", "c.json", "--client", "web1", "--unix", "/run/p.sock", "--unix-mode", "0600",
                     "--unix-group", "www-data"},
                    &o)
                  .run);
  Plan p;
  ASSERT_EQ(plan_proxy(o, cluster(), &p), "");
  EXPECT_EQ(p.unix_mode, 0600u);
  EXPECT_EQ(p.unix_group, "www-data");
  EXPECT_TRUE(p.tcp);

  Options d;  // the default: owner and group may connect
  ASSERT_TRUE(parse({"--config", "c.json", "--client", "web1", "--unix", "/run/p.sock"}, &d).run);
  ASSERT_EQ(plan_proxy(d, cluster(), &p), "");
  EXPECT_EQ(p.unix_mode, 0660u);
  EXPECT_EQ(p.unix_group, "");

  EXPECT_EQ(plan_error({"--unix", "/run/p.sock", "--unix-mode", "0888"}),
            "--unix-mode: want an octal mode 0..0777, e.g. 0660 (got '0888')");
  EXPECT_NE(plan_error({"--unix", "/run/p.sock", "--unix-mode", "4755"}).find("--unix-mode"), std::string::npos);
  EXPECT_NE(plan_error({"--unix", "/run/p.sock", "--unix-mode", "rw"}).find("--unix-mode"), std::string::npos);
  EXPECT_NE(plan_error({"--unix", "/run/p.sock", "--unix-mode", ""}).find("--unix-mode"), std::string::npos);
  EXPECT_EQ(plan_error({"--unix-mode", "0660"}), "--unix-mode: needs --unix");
  EXPECT_EQ(plan_error({"--unix-group", "www-data"}), "--unix-group: needs --unix");
  EXPECT_EQ(plan_error({"--unix", "/run/p.sock", "--unix-group", ""}), "--unix-group: empty group name");
}

TEST(ProxyOptions, ListenNoneNeedsTheUnixSocket) {
  EXPECT_EQ(plan_error({"--listen", "none"}), "--listen none: needs --unix (else nothing would listen)");
  Options o;
  ASSERT_TRUE(parse({"--config", "c.json", "--client", "web1", "--listen", "none", "--unix", "/run/p.sock"}, &o).run);
  Plan p;
  ASSERT_EQ(plan_proxy(o, cluster(), &p), "");
  EXPECT_FALSE(p.tcp);
}

TEST(ProxyOptions, UnixModeParsing) {
  EXPECT_EQ(parse_unix_mode("0660"), 0660u);
  EXPECT_EQ(parse_unix_mode("660"), 0660u);
  EXPECT_EQ(parse_unix_mode("0"), 0u);
  EXPECT_EQ(parse_unix_mode("0777"), 0777u);
  EXPECT_FALSE(parse_unix_mode("1777"));   // sticky
  EXPECT_FALSE(parse_unix_mode("00660"));  // five digits
  EXPECT_FALSE(parse_unix_mode("-660"));
  EXPECT_FALSE(parse_unix_mode("0x1b6"));
}

TEST(ProxyOptions, GroupLookup) {
  int64_t gid = -1;
  std::string err;
  ASSERT_TRUE(lookup_group("root", &gid, &err)) << err;
  EXPECT_EQ(gid, 0);
  ASSERT_TRUE(lookup_group("54321", &gid, &err)) << err;  // a number is used as it is, like chgrp
  EXPECT_EQ(gid, 54321);
  EXPECT_FALSE(lookup_group("exo-no-such-group", &gid, &err));
  EXPECT_EQ(err, "--unix-group: no group named 'exo-no-such-group' on this host");
  EXPECT_FALSE(lookup_group("", &gid, &err));
  EXPECT_NE(err.find("--unix-group"), std::string::npos);
}

// The socket file gets the mode and group asked for, and a chgrp the proxy may not make fails
// naming --unix-group and leaves no socket file behind.
class UnixSocketFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("exo-proxy-opt-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "p.sock").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(UnixSocketFile, GetsTheModeAndGroup) {
  // A group this process may give a file: its own (root may give any; 54321 exercises that).
  const int64_t gid = geteuid() == 0 ? 54321 : static_cast<int64_t>(getegid());
  std::string err;
  const int fd = listen_unix(path_, &err, UnixAccess{0640, gid});
  ASSERT_GE(fd, 0) << err;
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(static_cast<int64_t>(st.st_gid), gid);
  close(fd);

  unlink(path_.c_str());
  const int dflt = listen_unix(path_, &err);  // the default: 0660, the proxy's group
  ASSERT_GE(dflt, 0) << err;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, getegid());
  close(dflt);
}

TEST_F(UnixSocketFile, AChgrpThatIsRefusedNamesTheOptionAndRemovesTheFile) {
  if (geteuid() == 0) {
    // root may chgrp to any group; drop to nobody for this test only in a child process.
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::filesystem::permissions(dir_, std::filesystem::perms::all);
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
      std::string err;
      const int fd = listen_unix(path_, &err, UnixAccess{0660, 0});  // nobody is not in group root
      const bool named = err.find("--unix-group: chgrp") != std::string::npos;
      const bool removed = access(path_.c_str(), F_OK) != 0;
      _exit(fd < 0 && named && removed ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "3: could not become nobody; 1: the refusal was not reported as expected";
    return;
  }
  std::string err;
  EXPECT_LT(listen_unix(path_, &err, UnixAccess{0660, 0}), 0);  // not root: not in group root
  EXPECT_NE(err.find("--unix-group: chgrp"), std::string::npos) << err;
  EXPECT_NE(access(path_.c_str(), F_OK), 0);
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
