// Checks the C++ wire format and key hash against proto/wire_vectors.json, the same file the
// Python tests read (tests/unit/test_wire_vectors.py), so the two cannot drift.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster.h"
#include "keyhash.h"
#include "wire.h"

namespace {

using json = nlohmann::json;

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(std::stoi(s.substr(i, 2), nullptr, 16));
  return out;
}

const json& vectors() {
  static const json j = [] {
    std::ifstream in(std::string(EXO_SOURCE_DIR) + "/proto/wire_vectors.json");
    json v;
    in >> v;
    return v;
  }();
  return j;
}

TEST(KeyHash, MatchesSharedVectors) {
  const auto& vs = vectors()["hash"]["vectors"];
  ASSERT_GT(vs.size(), 3u);
  for (const auto& v : vs) {
    auto key = unhex(v["key_hex"]);
    const uint64_t h = exo::key_hash(key);
    EXPECT_EQ(h, v["hash40"].get<uint64_t>()) << v["key_hex"];
    EXPECT_EQ(exo::format_mac(exo::request_mac(exo::kPrefixGet, h).data()), v["get_mac"]);
    EXPECT_EQ(exo::format_mac(exo::request_mac(exo::kPrefixOther, h).data()), v["other_mac"]);
    EXPECT_EQ(exo::hash_from_mac(exo::request_mac(exo::kPrefixGet, h).data()), h);
  }
}

TEST(Wire, ParsesSharedFrames) {
  for (const auto& v : vectors()["frames"]) {
    auto raw = unhex(v["frame_hex"]);
    exo::wire::FrameView f{};
    ASSERT_EQ(exo::wire::parse(raw, f), exo::wire::ParseError::kNone) << v["name"];
    EXPECT_EQ(exo::format_mac(f.eth_dst), v["eth_dst"]);
    EXPECT_EQ(exo::format_mac(f.eth_src), v["eth_src"]);
    EXPECT_EQ(f.ip_src, exo::parse_ipv4(v["ip_src"]));
    EXPECT_EQ(f.ip_dst, exo::parse_ipv4(v["ip_dst"]));
    EXPECT_EQ(f.udp_src, v["udp_src"].get<uint16_t>());
    EXPECT_EQ(f.udp_dst, v["udp_dst"].get<uint16_t>());
    EXPECT_EQ(f.opcode, v["opcode"].get<uint8_t>());
    EXPECT_EQ(f.status, v["status"].get<uint8_t>());
    EXPECT_EQ(f.flags, v["flags"].get<uint8_t>());
    EXPECT_EQ(f.client_id, v["client_id"].get<uint32_t>());
    EXPECT_EQ(f.seq, v["seq"].get<uint32_t>());
    EXPECT_EQ(std::vector<uint8_t>(f.key.begin(), f.key.end()), unhex(v["key_hex"]));
    EXPECT_EQ(std::vector<uint8_t>(f.value.begin(), f.value.end()), unhex(v["value_hex"]));
    EXPECT_EQ(f.frame_len, raw.size());
  }
}

TEST(Wire, BuildsSharedFramesByteForByte) {
  for (const auto& v : vectors()["frames"]) {
    const auto mac_dst = exo::parse_mac(v["eth_dst"]);
    const auto mac_src = exo::parse_mac(v["eth_src"]);
    exo::wire::Addr src{mac_src.data(), exo::parse_ipv4(v["ip_src"]), v["udp_src"].get<uint16_t>()};
    exo::wire::Header h{v["opcode"].get<uint8_t>(), v["status"].get<uint8_t>(), v["flags"].get<uint8_t>(),
                        v["client_id"].get<uint32_t>(), v["seq"].get<uint32_t>()};
    auto key = unhex(v["key_hex"]);
    auto value = unhex(v["value_hex"]);
    std::vector<uint8_t> out(2048);
    const size_t n = exo::wire::build(out, mac_dst.data(), src, exo::parse_ipv4(v["ip_dst"]),
                                      v["udp_dst"].get<uint16_t>(), h, key, value);
    out.resize(n);
    EXPECT_EQ(out, unhex(v["frame_hex"])) << v["name"];
  }
}

TEST(Wire, RejectsSharedMalformedFrames) {
  const auto& ms = vectors()["malformed"];
  ASSERT_GT(ms.size(), 10u);
  for (const auto& v : ms) {
    auto raw = unhex(v["frame_hex"]);
    exo::wire::FrameView f{};
    EXPECT_NE(exo::wire::parse(raw, f), exo::wire::ParseError::kNone) << v["name"];
  }
}

TEST(Wire, InPlaceReplyMatchesVector) {
  // The GET request vector, answered in place from the node in the reply vector.
  const auto& frames = vectors()["frames"];
  auto raw = unhex(frames[0]["frame_hex"]);
  const auto& rep = frames[3];
  raw.resize(2048);
  exo::wire::FrameView req{};
  ASSERT_EQ(exo::wire::parse(raw, req), exo::wire::ParseError::kNone);
  const auto node_mac = exo::parse_mac(rep["eth_src"]);
  exo::wire::Addr self{node_mac.data(), exo::parse_ipv4(rep["ip_src"]), rep["udp_src"].get<uint16_t>()};
  auto value = unhex(rep["value_hex"]);
  const size_t n = exo::wire::build_reply(raw, req, self, rep["status"].get<uint8_t>(),
                                          rep["flags"].get<uint8_t>(), value);
  raw.resize(n);
  EXPECT_EQ(raw, unhex(rep["frame_hex"]));
}

TEST(Wire, ReplyThatDoesNotFitIsRefused) {
  auto raw = unhex(vectors()["frames"][0]["frame_hex"]);
  exo::wire::FrameView req{};
  ASSERT_EQ(exo::wire::parse(raw, req), exo::wire::ParseError::kNone);
  std::vector<uint8_t> value(4000);
  std::vector<uint8_t> out(1514);
  exo::Mac mac{};
  exo::wire::Addr self{mac.data(), 1, 2};
  EXPECT_EQ(exo::wire::build_reply(out, req, self, 0, 0, value), 0u);
}

}  // namespace
