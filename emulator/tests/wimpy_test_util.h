// Shared helpers for the wimpy emulator tests and fuzzer: an in-code cluster with three db
// nodes, two hosted by emulator "emu0" and one real node elsewhere, and frame builders (the db
// node tests' request(), reused).
#pragma once

#include <string>
#include <vector>

#include "../../db-node/tests/test_util.h"
#include "cluster.h"
#include "wire.h"

namespace exo::emu::testing {

using exo::db::testing::B;
using exo::db::testing::key_owned_by;
using exo::db::testing::request;

// db0 and db1 on emulator emu0 (shared ip and iface, own macs and grpc), db2 a real db node.
// Four partitions: db0, db1, db2, db1. `dir` holds the gRPC unix sockets.
inline Cluster emu_cluster(const std::string& dir = "/nonexistent", double rate = 0,
                           uint32_t burst = 32, uint32_t value_size = 512) {
  Cluster c = exo::db::testing::test_cluster();
  c.partition_bits = 2;
  DbNodeInfo d2 = c.db_nodes[1];
  d2.name = "db2";
  d2.mac = {0x02, 0, 0, 0, 2, 3};
  d2.ip = 0x0a000203;
  d2.iface = "db2-eth0";
  c.db_nodes.push_back(d2);
  for (int i = 0; i < 3; ++i) c.db_nodes[i].grpc = "unix:" + dir + "/db" + std::to_string(i) + ".sock";
  for (int i = 0; i < 2; ++i) {
    c.db_nodes[i].emulator = "emu0";
    c.db_nodes[i].ip = 0x0a000240;
    c.db_nodes[i].iface = "emu0-eth0";
    c.db_nodes[i].switch_port = 5;
  }
  c.slot_owner = {0, 1, 2, 1};
  c.emulation.db_rate_limit_rps = rate;
  c.emulation.burst = burst;
  c.emulation.value_size = value_size;
  return c;
}

// A frame of another protocol: an ARP request (broadcast).
inline std::vector<uint8_t> arp_frame() {
  std::vector<uint8_t> f(60, 0);
  for (int i = 0; i < 6; ++i) f[i] = 0xff;
  f[6] = 0x02;
  f[11] = 0x09;
  f[12] = 0x08;
  f[13] = 0x06;
  return f;
}

// `f` with its destination MAC replaced.
inline std::vector<uint8_t> to_mac(std::vector<uint8_t> f, const Mac& dst) {
  for (int i = 0; i < 6; ++i) f[i] = dst[i];
  return f;
}

}  // namespace exo::emu::testing
