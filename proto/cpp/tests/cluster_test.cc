#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cluster.h"

namespace {

std::string write_tmp(const std::string& text) {
  char path[] = "/tmp/exo_cluster_testXXXXXX";
  int fd = mkstemp(path);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

const char* kGood = R"({
 "cluster": {"name": "t", "mtu": 1500, "udp_port": 7777, "service_ip": "10.0.0.254"},
 "switch": {"partition_bits": 1},
 "controller": {"grpc": "unix:/tmp/c.sock"},
 "cache_nodes": [{"name": "cache0", "mac": "02:00:00:00:01:01", "ip": "10.0.1.1", "switch_port": 1,
   "iface": "cache0-eth0", "grpc": "unix:/tmp/x", "capacity": 10, "lcores": "0", "burst": 32,
   "idle_sleep_us": 20, "eal_args": []}],
 "db_nodes": [
  {"name": "db0", "mac": "02:00:00:00:02:01", "ip": "10.0.2.1", "switch_port": 2, "iface": "db0-eth0",
   "grpc": "unix:/tmp/d0", "data_dir": "/tmp/d0", "threads": 1, "sync_writes": false, "cache_node": "cache0"},
  {"name": "db1", "mac": "02:00:00:00:02:02", "ip": "10.0.2.2", "switch_port": 3, "iface": "db1-eth0",
   "grpc": "unix:/tmp/d1", "data_dir": "/tmp/d1", "threads": 1, "sync_writes": true, "cache_node": null}],
 "clients": [],
 "partitions": ["db1", "db0"]
})";

TEST(Cluster, LoadsResolvedJson) {
  auto c = exo::load_cluster(write_tmp(kGood));
  ASSERT_EQ(c.db_nodes.size(), 2u);
  EXPECT_EQ(c.owner(0).name, "db1");                            // top bit 0 -> slot 0
  EXPECT_EQ(c.owner(uint64_t{1} << 39).name, "db0");            // top bit 1 -> slot 1
  EXPECT_EQ(c.db_nodes[0].cache_node, "cache0");
  EXPECT_EQ(c.db_nodes[1].cache_node, "");
  EXPECT_EQ(c.cache_nodes[0].mac[5], 0x01);
  EXPECT_EQ(c.db_nodes[1].ip, 0x0a000202u);
}

TEST(Cluster, ErrorsNameTheField) {
  std::string bad = kGood;
  bad.replace(bad.find("02:00:00:00:02:02"), 17, "zz:00:00:00:02:02");
  try {
    exo::load_cluster(write_tmp(bad));
    FAIL() << "expected ClusterError";
  } catch (const exo::ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("db_nodes[1]"), std::string::npos) << e.what();
  }
}

TEST(Cluster, HotKeysAndCacheFillSections) {
  std::string text = kGood;
  text.replace(text.find(R"( "clients": [],)"), 15,
               R"( "clients": [],
 "hot_keys": {"top_k": 7, "sample_rate": 0.5, "segment_ms": 100, "segments": 2, "weights": [3, 1],
   "load_ewma_alpha": 0.2, "report_interval_ms": 50, "report_keys": 5},
 "cache_fill": {"enabled": false, "interval_ms": 20, "min_rate": 2.5, "hysteresis": 0.2,
   "report_ttl_ms": 900, "hit_ewma_alpha": 0.4, "max_fetch_batch": 9},)");
  auto c = exo::load_cluster(write_tmp(text));
  EXPECT_EQ(c.hot_keys.top_k, 7u);
  EXPECT_EQ(c.hot_keys.weights, (std::vector<double>{3, 1}));
  EXPECT_EQ(c.cache_fill.enabled, false);
  EXPECT_EQ(c.cache_fill.max_fetch_batch, 9u);
  // Absent sections keep the defaults.
  auto d = exo::load_cluster(write_tmp(kGood));
  EXPECT_EQ(d.hot_keys.segments, d.hot_keys.weights.size());
  EXPECT_TRUE(d.cache_fill.enabled);
}

TEST(Cluster, HotKeysWeightsMustMatchSegments) {
  std::string text = kGood;
  text.replace(text.find(R"( "clients": [],)"), 15,
               R"( "clients": [],
 "hot_keys": {"top_k": 7, "sample_rate": 0.5, "segment_ms": 100, "segments": 3, "weights": [3, 1],
   "load_ewma_alpha": 0.2, "report_interval_ms": 50, "report_keys": 5},)");
  try {
    exo::load_cluster(write_tmp(text));
    FAIL() << "expected ClusterError";
  } catch (const exo::ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("hot_keys.weights"), std::string::npos) << e.what();
  }
}

TEST(Cluster, MissingFileIsAClearError) {
  EXPECT_THROW(exo::load_cluster("/nonexistent/cluster.json"), exo::ClusterError);
}

}  // namespace

namespace {
TEST(Cluster, MissingSectionNamesIt) {
  try {
    exo::load_cluster(write_tmp("{}"));
    FAIL() << "expected ClusterError";
  } catch (const exo::ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("cluster: missing section"), std::string::npos) << e.what();
  }
}
// Every way the text can be wrong ends in a ClusterError naming the place, never in another
// exception or a wrapped-around number (cluster_parse_fuzz runs this parser on random text).
TEST(Cluster, BadShapesAndNumbersAreClusterErrors) {
  auto expect_error = [](const std::string& text, const std::string& what) {
    try {
      exo::parse_cluster(text, "t.json");
      ADD_FAILURE() << "accepted: " << what;
    } catch (const exo::ClusterError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kGood;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  expect_error("[1, 2]", "cluster: missing section");
  expect_error("{\"cluster\": ", "not valid JSON");
  expect_error(with("\"mtu\": 1500", "\"mtu\": 1e20"), "cluster.mtu");
  expect_error(with("\"mtu\": 1500", "\"mtu\": -1"), "cluster.mtu");
  expect_error(with("\"mtu\": 1500", "\"mtu\": 1500.5"), "cluster.mtu");
  expect_error(with("\"mtu\": 1500", "\"mtu\": 20"), "cluster.mtu");
  expect_error(with("\"udp_port\": 7777", "\"udp_port\": 70000"), "cluster.udp_port");
  expect_error(with("\"partition_bits\": 1", "\"partition_bits\": 64"), "partition_bits");
  expect_error(with("\"clients\": []", "\"clients\": \"x\""), "clients: not a list");
  expect_error(with("\"clients\": []", "\"clients\": {\"a\": 1}"), "clients: not a list");
  expect_error(with("\"clients\": []", "\"clients\": [7]"), "clients[0].name: missing");
  expect_error(with("\"sync_writes\": false", "\"sync_writes\": 0"), "db_nodes[0].sync_writes");
  expect_error(with("\"capacity\": 10", "\"capacity\": \"10\""), "cache_nodes[0].capacity");
  expect_error(with("\"eal_args\": []", "\"eal_args\": [1]"), "cache_nodes[0].eal_args");
  expect_error(with("\"partitions\": [\"db1\", \"db0\"]", "\"partitions\": [\"db1\"]"),
               "partitions");
  EXPECT_EQ(exo::parse_cluster(kGood, "t.json").db_nodes.size(), 2u);
}

}  // namespace

namespace {
// Wimpy emulation: a db node may name its emulator process, the cache node may be capped, and
// the emulation section carries the emulator's settings (absent: defaults, a real cluster).
TEST(Cluster, EmulationFields) {
  std::string text = kGood;
  text.replace(text.find(R"("cache_node": "cache0"})"), 23,
               R"("cache_node": "cache0", "emulator": "emu0"})");
  text.replace(text.find(R"("eal_args": []})"), 15, R"("eal_args": [], "rate_limit_rps": 1500.5})");
  text.replace(text.find(R"( "clients": [],)"), 15,
               R"( "clients": [],
 "emulation": {"value_size": 64, "db_rate_limit_rps": 250, "lcores": "1", "burst": 8,
   "idle_sleep_us": 5, "eal_args": ["--no-pci"]},)");
  auto c = exo::parse_cluster(text, "t.json");
  EXPECT_EQ(c.db_nodes[0].emulator, "emu0");
  EXPECT_EQ(c.db_nodes[1].emulator, "");
  EXPECT_DOUBLE_EQ(c.cache_nodes[0].rate_limit_rps, 1500.5);
  EXPECT_EQ(c.emulation.value_size, 64u);
  EXPECT_DOUBLE_EQ(c.emulation.db_rate_limit_rps, 250);
  EXPECT_EQ(c.emulation.eal_args, (std::vector<std::string>{"--no-pci"}));
  auto d = exo::parse_cluster(kGood, "t.json");
  EXPECT_DOUBLE_EQ(d.cache_nodes[0].rate_limit_rps, 0);
  EXPECT_EQ(d.emulation.value_size, 512u);

  std::string bad = text;
  bad.replace(bad.find("\"db_rate_limit_rps\": 250"), 24, "\"db_rate_limit_rps\": -1");
  try {
    exo::parse_cluster(bad, "t.json");
    FAIL() << "expected ClusterError";
  } catch (const exo::ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("emulation.db_rate_limit_rps"), std::string::npos) << e.what();
  }
}
}  // namespace
