// The resolved cluster config reader (cluster.cc) on what Python's `exo config resolve` writes:
// tests/data/defaults.resolved.json, the resolved form of tests/data/defaults.yaml, which
// tests/unit/test_config.py keeps equal to the current schema's output.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cluster.h"

namespace {

const std::string kDefaultsPath = std::string(EXO_SOURCE_DIR) + "/common/cpp/tests/data/defaults.resolved.json";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Python's resolved output for a config that sets only what has no default.
const std::string& defaults_text() {
  static const std::string text = read_file(kDefaultsPath);
  return text;
}

// The defaults text with the first `from` replaced by `to` (the test fails if `from` is absent).
std::string with(const std::string& from, const std::string& to, std::string text = defaults_text()) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "fixture lacks: " << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The defaults file as JSON, edited by `edit`, as text again.
template <typename Edit>
std::string edited(Edit edit) {
  auto j = nlohmann::json::parse(defaults_text());
  edit(j);
  return j.dump(1);
}

// The defaults text with partition_bits 1, the given two-slot table and, unless given, the
// chains of factor 1 ([owner] per slot).
std::string two_slots(const std::string& table, const std::string& chains = "") {
  return edited([&](nlohmann::json& j) {
    j["switch"]["partition_bits"] = 1;
    j["partitions"] = nlohmann::json::parse(table);
    if (!chains.empty()) {
      j["chains"] = nlohmann::json::parse(chains);
      return;
    }
    j["chains"] = nlohmann::json::array();
    for (const auto& owner : j["partitions"]) {
      nlohmann::json chain;
      chain["nodes"] = nlohmann::json::array();
      chain["nodes"].push_back(owner);
      j["chains"].push_back(chain);
    }
  });
}

std::string write_tmp(const std::string& text) {
  char path[] = "/tmp/exo_cluster_testXXXXXX";
  int fd = mkstemp(path);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

void expect_error(const std::string& text, const std::string& what) {
  try {
    exo::parse_cluster(text, "t.json");
    ADD_FAILURE() << "accepted; expected an error naming " << what;
  } catch (const exo::ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("t.json: ", 0), 0u) << "names the file: " << e.what();
  }
}

TEST(Cluster, LoadsPythonsResolvedJson) {
  auto c = exo::load_cluster(kDefaultsPath);
  ASSERT_EQ(c.db_nodes.size(), 2u);
  ASSERT_EQ(c.cache_nodes.size(), 1u);
  ASSERT_EQ(c.clients.size(), 1u);
  EXPECT_EQ(c.cache_nodes[0].mac[5], 0x01);
  EXPECT_EQ(c.cache_nodes[0].iface, "cache0-eth0");  // resolved by Python
  EXPECT_EQ(c.db_nodes[1].ip, 0x0a000202u);
  EXPECT_EQ(c.db_nodes[1].cache_node, "cache0");     // round-robin, resolved by Python
  EXPECT_EQ(c.db_nodes[0].emulator, "");              // null in the file
  EXPECT_EQ(c.service_ip, 0x0a0000feu);
  // The slot table is Python's partitions list, in order.
  const auto j = nlohmann::json::parse(defaults_text());
  ASSERT_EQ(c.slot_owner.size(), j["partitions"].size());
  for (size_t s = 0; s < c.slot_owner.size(); ++s)
    ASSERT_EQ(c.db_nodes[c.slot_owner[s]].name, j["partitions"][s].get<std::string>()) << s;
  EXPECT_EQ(c.owner(uint64_t{255} << 32).name, j["partitions"][255].get<std::string>());
  // Factor 1: every chain is the slot's owner alone, as Python wrote it.
  EXPECT_EQ(c.replication.factor, 1u);
  EXPECT_TRUE(c.db_nodes[0].member && c.db_nodes[1].member);
  ASSERT_EQ(c.slot_chain.size(), c.slot_owner.size());
  for (size_t s = 0; s < c.slot_chain.size(); ++s) {
    ASSERT_EQ(c.slot_chain[s], std::vector<uint32_t>{c.slot_owner[s]}) << s;
    ASSERT_EQ(j["chains"][s]["nodes"].size(), 1u) << s;
    ASSERT_EQ(j["chains"][s]["nodes"][0], j["partitions"][s]) << s;
  }
}

TEST(Cluster, RoutesByTheSlotTable) {
  auto c = exo::parse_cluster(two_slots(R"(["db1", "db0"])"), "t.json");
  EXPECT_EQ(c.owner(0).name, "db1");                  // top bit 0 -> slot 0
  EXPECT_EQ(c.owner(uint64_t{1} << 39).name, "db0");  // top bit 1 -> slot 1
}

// cluster.h's member initialisers (for hand-built structs) that differ from Python's defaults,
// as read from Python's resolved output `py`.
std::vector<std::string> default_drift(const exo::Cluster& py) {
  std::vector<std::string> drift;
  auto check = [&](bool same, const char* what) {
    if (!same) drift.push_back(what);
  };
  check(exo::HotKeysConfig{} == py.hot_keys, "hot_keys");
  check(exo::CacheFillConfig{} == py.cache_fill, "cache_fill");
  check(exo::EmulationConfig{} == py.emulation, "emulation");
  const exo::Cluster c;
  check(c.mtu == py.mtu, "cluster.mtu");
  check(c.udp_port == py.udp_port, "cluster.udp_port");
  check(c.partition_bits == py.partition_bits, "switch.partition_bits");
  const exo::CacheNodeInfo cache;
  check(cache.burst == py.cache_nodes.at(0).burst, "cache_nodes[].burst");
  check(cache.idle_sleep_us == py.cache_nodes.at(0).idle_sleep_us, "cache_nodes[].idle_sleep_us");
  check(cache.rate_limit_rps == py.cache_nodes.at(0).rate_limit_rps, "cache_nodes[].rate_limit_rps");
  const exo::DbNodeInfo db;
  check(db.threads == py.db_nodes.at(0).threads, "db_nodes[].threads");
  check(db.sync_writes == py.db_nodes.at(0).sync_writes, "db_nodes[].sync_writes");
  check(db.member == py.db_nodes.at(0).member, "db_nodes[].member");
  check(exo::ReplicationConfig{} == py.replication, "replication");
  return drift;
}

// One definition of every default, config.py: the C++ initialisers must equal it. The drift this
// catches happened once (db_nodes[].threads said 1 in C++, 2 in Python).
TEST(Cluster, StructDefaultsArePythons) {
  const auto py = exo::load_cluster(kDefaultsPath);
  EXPECT_EQ(default_drift(py), std::vector<std::string>{});
  auto drifted = py;  // the known-bad case: Python's threads default differing from cluster.h's
  drifted.db_nodes[0].threads = 1;
  drifted.hot_keys.weights.back() = 0.5;
  drifted.replication.factor = 3;
  EXPECT_EQ(default_drift(drifted), (std::vector<std::string>{"hot_keys", "db_nodes[].threads", "replication"}));
}

TEST(Cluster, MissingFileIsAClearError) {
  EXPECT_THROW(exo::load_cluster("/nonexistent/cluster.json"), exo::ClusterError);
}

// Every field must be in the file: a node never runs on a default of its own.
TEST(Cluster, MissingFieldsNameTheField) {
  expect_error("{}", "cluster: missing");
  expect_error(with("\"threads\": 2,", ""), "db_nodes[0].threads: missing");
  expect_error(with("\"confidence_z\": 1.0,", ""), "hot_keys.confidence_z: missing");
  expect_error(with("\"rate_limit_rps\": 0.0", "\"rate_limit_rps\": null"), "cache_nodes[0].rate_limit_rps: missing");
  // The two nullable fields: null is "none".
  auto c = exo::parse_cluster(with("\"cache_node\": \"cache0\"", "\"cache_node\": null"), "t.json");
  EXPECT_EQ(c.db_nodes[0].cache_node, "");
}

// Every way the text can be wrong ends in a ClusterError naming the file and the place, never in
// another exception or a wrapped-around number (cluster_parse_fuzz runs this parser on random
// text).
TEST(Cluster, BadShapesAndNumbersAreClusterErrors) {
  expect_error("[1, 2]", "Root element must be a message");
  expect_error("{\"cluster\": ", "not a resolved cluster config");
  expect_error(with("\"mtu\": 1500", "\"mtu\": 1e20"), "cluster.mtu");
  expect_error(with("\"mtu\": 1500", "\"mtu\": -1"), "cluster.mtu");
  expect_error(with("\"mtu\": 1500", "\"mtu\": 1500.5"), "cluster.mtu");
  expect_error(with("\"mtu\": 1500", "\"mtu\": 20"), "cluster.mtu: must be in 576..9000");
  expect_error(with("\"udp_port\": 7777", "\"udp_port\": 70000"), "cluster.udp_port");
  expect_error(with("\"service_ip\": \"10.0.0.254\"", "\"service_ip\": \"10.0.0\""), "cluster.service_ip");
  expect_error(with("\"partition_bits\": 8", "\"partition_bits\": 64"), "switch.partition_bits");
  expect_error(with("\"clients\": [", "\"clients\": \"x\", \"x\": ["), "not a resolved cluster config");
  expect_error(with("\"sync_writes\": true", "\"sync_writes\": 0"), "db_nodes[0].sync_writes");
  expect_error(with("\"capacity\": 1000", "\"capacity\": -10"), "cache_nodes[0].capacity");
  expect_error(with("\"eal_args\": []", "\"eal_args\": [1]"), "eal_args[0]");
  expect_error(with("\"02:00:00:00:02:02\"", "\"zz:00:00:00:02:02\""), "db_nodes[1].mac");
  expect_error(with("\"ip\": \"10.0.3.1\"", "\"ip\": \"10.0.3.256\""), "clients[0].ip");
  // The proto JSON mapping spells non-finite doubles as strings; no node can use them.
  expect_error(with("\"min_rate\": 1.0", "\"min_rate\": \"NaN\""), "cache_fill.min_rate: not a finite number");
  expect_error(with("\"rate_limit_rps\": 0.0", "\"rate_limit_rps\": \"-Infinity\""),
               "cache_nodes[0].rate_limit_rps: not a finite number");
  expect_error(with("8.0,", "\"Infinity\","), "hot_keys.weights[0]: not a finite number");
  expect_error(two_slots(R"(["db1"])"), "partitions: expected 2^partition_bits = 2 entries, found 1");
  expect_error(two_slots(R"(["db1", "db7"])"), "partitions[1]: unknown db node 'db7'");
}

// A key the reader does not know is an error, not silently dropped: a file from another version.
TEST(Cluster, UnknownKeysAreErrors) {
  expect_error(with("\"threads\": 2,", "\"thread\": 2,"), "thread: Cannot find field");
  expect_error(with("\"hot_keys\": {", "\"hotkeys\": {}, \"hot_keys\": {"), "hotkeys");
}

TEST(Cluster, HotKeysAndCacheFillSections) {
  std::string text = with("\"top_k\": 256", "\"top_k\": 7");
  text = with("\"segments\": 4", "\"segments\": 2", text);
  text = with("8.0,\n   4.0,\n   2.0,\n   1.0", "3, 1", text);
  text = with("\"enabled\": true", "\"enabled\": false", text);
  text = with("\"max_fetch_batch\": 256", "\"max_fetch_batch\": 9", text);
  auto c = exo::parse_cluster(text, "t.json");
  EXPECT_EQ(c.hot_keys.top_k, 7u);
  EXPECT_EQ(c.hot_keys.weights, (std::vector<double>{3, 1}));
  EXPECT_EQ(c.cache_fill.enabled, false);
  EXPECT_EQ(c.cache_fill.max_fetch_batch, 9u);
}

TEST(Cluster, HotKeysWeightsMustMatchSegments) {
  expect_error(with("\"segments\": 4", "\"segments\": 3"), "hot_keys.weights: needs one entry per segment (3)");
  expect_error(with("\"segments\": 4", "\"segments\": 0"), "hot_keys.segments: must be >= 1");
  expect_error(with("\"sample_rate\": 0.0625", "\"sample_rate\": 0"), "hot_keys.sample_rate");
  expect_error(with("\"interval_ms\": 100", "\"interval_ms\": 0"), "cache_fill.interval_ms");
}

// Wimpy emulation: a db node may name its emulator process, the cache node may be capped, and
// the emulation section carries the emulator's settings.
TEST(Cluster, EmulationFields) {
  std::string text = with("\"emulator\": null", "\"emulator\": \"emu0\"");
  text = with("\"rate_limit_rps\": 0.0", "\"rate_limit_rps\": 1500.5", text);
  text = with("\"value_size\": 512", "\"value_size\": 64", text);
  text = with("\"db_rate_limit_rps\": 0.0", "\"db_rate_limit_rps\": 250", text);
  text = with("\"eal_args\": []", "\"eal_args\": [\"--no-pci\"]", text);  // emulation's: first in the file
  auto c = exo::parse_cluster(text, "t.json");
  EXPECT_EQ(c.db_nodes[0].emulator, "emu0");
  EXPECT_EQ(c.db_nodes[1].emulator, "");
  EXPECT_DOUBLE_EQ(c.cache_nodes[0].rate_limit_rps, 1500.5);
  EXPECT_EQ(c.emulation.value_size, 64u);
  EXPECT_DOUBLE_EQ(c.emulation.db_rate_limit_rps, 250);
  EXPECT_EQ(c.emulation.eal_args, (std::vector<std::string>{"--no-pci"}));
  EXPECT_TRUE(c.cache_nodes[0].eal_args.empty());

  expect_error(with("\"db_rate_limit_rps\": 250", "\"db_rate_limit_rps\": -1", text), "emulation.db_rate_limit_rps");
  expect_error(with("\"rate_limit_rps\": 1500.5", "\"rate_limit_rps\": -5", text), "cache_nodes[0].rate_limit_rps");
}

// two_slots(table, chains) with replication.factor 2 and a third db node, db2, that is a spare.
std::string factor2(const std::string& table, const std::string& chains) {
  auto j = nlohmann::json::parse(two_slots(table, chains));
  j["replication"]["factor"] = 2;
  j["db_nodes"].push_back(j["db_nodes"][1]);
  j["db_nodes"][2]["name"] = "db2";
  j["db_nodes"][2]["member"] = false;
  return j.dump();
}

// Chains of up to two, and a spare: read as indices into db_nodes, head first.
TEST(Cluster, ReadsChainsAndSpares) {
  auto c = exo::parse_cluster(factor2(R"(["db1", "db0"])", R"([{"nodes": ["db1", "db0"]}, {"nodes": ["db0"]}])"), "t");
  EXPECT_EQ(c.replication.factor, 2u);
  EXPECT_EQ(c.slot_chain, (std::vector<std::vector<uint32_t>>{{1, 0}, {0}}));  // a short chain is allowed
  EXPECT_EQ(c.slot_owner, (std::vector<uint32_t>{1, 0}));
  EXPECT_FALSE(c.db_nodes[2].member);
  EXPECT_TRUE(c.db_nodes[1].member);
}

// The known-bad chain tables: each refused with the chain named (chains[i]).
TEST(Cluster, RefusesBadChains) {
  const std::string owners = R"(["db1", "db0"])";
  expect_error(factor2(owners, R"([{"nodes": ["db1", "db0"]}, {"nodes": []}])"), "chains[1]: empty");
  expect_error(factor2(owners, R"([{"nodes": ["db1", "db1"]}, {"nodes": ["db0"]}])"), "chains[0]: repeats db node 'db1'");
  expect_error(factor2(owners, R"([{"nodes": ["db0", "db1"]}, {"nodes": ["db0"]}])"),
               "chains[0].nodes[0]: head 'db0', but partitions[0] is 'db1'");
  expect_error(factor2(owners, R"([{"nodes": ["db1", "db0", "db2"]}, {"nodes": ["db0"]}])"),
               "chains[0]: 3 nodes, more than replication.factor 2");
  expect_error(factor2(owners, R"([{"nodes": ["db1", "db7"]}, {"nodes": ["db0"]}])"),
               "chains[0].nodes[1]: unknown db node 'db7'");
  expect_error(factor2(owners, R"([{"nodes": ["db1", "db2"]}, {"nodes": ["db0"]}])"),
               "chains[0].nodes[1]: db node 'db2' is a spare (member false)");
  expect_error(factor2(R"(["db2", "db0"])", R"([{"nodes": ["db2"]}, {"nodes": ["db0"]}])"),
               "chains[0].nodes[0]: db node 'db2' is a spare");
  expect_error(factor2(owners, R"([{"nodes": ["db1"]}])"), "chains: expected one chain per slot (2), found 1");
  expect_error(factor2(owners, R"([{"nodes": ["db1"]}, ["db0"]])"), "not a resolved cluster config");
  // At factor 1 (the defaults file), a second node is one too many.
  expect_error(two_slots(owners, R"([{"nodes": ["db1", "db0"]}, {"nodes": ["db0"]}])"),
               "chains[0]: 2 nodes, more than replication.factor 1");
  expect_error(with("\"factor\": 1", "\"factor\": 0"), "replication.factor: must be >= 1");
  expect_error(with("\"factor\": 1", "\"factor\": -1"), "replication.factor");
  expect_error(with("\"member\": true", "\"member\": null"), "db_nodes[0].member: missing");
  expect_error(edited([](nlohmann::json& j) { j.erase("replication"); }), "replication: missing");
  expect_error(edited([](nlohmann::json& j) { j.erase("chains"); }), "chains: expected one chain per slot (256), found 0");
}

// controller.instances: every controller process, the one a config without instances[] included.
TEST(Cluster, ReadsControllerInstances) {
  auto c = exo::parse_cluster(defaults_text(), "t.json");
  ASSERT_EQ(c.controllers.size(), 1u);
  EXPECT_EQ(c.controllers[0].name, "controller");
  EXPECT_EQ(c.controllers[0].grpc, c.controller_grpc);
  c = exo::parse_cluster(edited([](nlohmann::json& j) {
    j["controller"]["instances"] = nlohmann::json::parse(
        R"([{"name": "c1", "openflow_port": 6653, "grpc": "10.0.0.1:1", "metrics": ""},
            {"name": "c2", "openflow_port": 6654, "grpc": "10.0.0.1:2", "metrics": ""}])");
  }), "t.json");
  EXPECT_EQ(c.controllers, (std::vector<exo::ControllerInstanceInfo>{{"c1", "10.0.0.1:1"}, {"c2", "10.0.0.1:2"}}));
}

// Known-bad controller lists: each refused with the field named.
TEST(Cluster, RefusesBadControllerInstances) {
  expect_error(edited([](nlohmann::json& j) { j["controller"]["instances"] = nlohmann::json::array(); }),
               "controller.instances: empty");
  expect_error(edited([](nlohmann::json& j) { j["controller"]["instances"][0]["grpc"] = ""; }),
               "controller.instances[0].grpc: empty");
  expect_error(edited([](nlohmann::json& j) { j["controller"]["instances"][0].erase("openflow_port"); }),
               "controller.instances[0].openflow_port: missing");
  expect_error(edited([](nlohmann::json& j) {
                 j["controller"]["instances"].push_back(j["controller"]["instances"][0]);
               }),
               "controller.instances[1].name: 'controller' named twice");
}

TEST(Cluster, ReadsAFileWrittenToDisk) {
  const std::string path = write_tmp(with("\"threads\": 2,", "\"threads\": 3,"));
  EXPECT_EQ(exo::load_cluster(path).db_nodes[0].threads, 3u);
  std::remove(path.c_str());
}

}  // namespace
