// Checks the C++ wire format and key hash against proto/wire_vectors.json, the same file the
// Python tests read (tests/unit/test_wire_vectors.py), so the two cannot drift.
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
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

TEST(Constants, MatchSharedVectors) {
  const auto& c = vectors()["constants"];
  EXPECT_EQ(exo::kHashBits, c["hash_bits"].get<int>());
  EXPECT_EQ(exo::kPrefixGet, c["prefix_get"].get<uint8_t>());
  EXPECT_EQ(exo::kPrefixOther, c["prefix_other"].get<uint8_t>());
  EXPECT_EQ(exo::kPrefixForwarded, c["prefix_forwarded"].get<uint8_t>());
  EXPECT_EQ(exo::kPrefixAnyMask, c["prefix_any_mask"].get<uint8_t>());
  EXPECT_EQ(exo::kPrefixReadMask, c["prefix_read_mask"].get<uint8_t>());
  EXPECT_EQ(exo::kPrefixWriteMask, c["prefix_write_mask"].get<uint8_t>());
  EXPECT_EQ(exo::wire::kMagic, c["magic"].get<uint16_t>());
  EXPECT_EQ(exo::wire::kVersion, c["version"].get<uint8_t>());
  EXPECT_EQ(exo::wire::kMaxKeyLen, c["max_key_len"].get<size_t>());
  EXPECT_EQ(exo::wire::kGet, c["op_get"].get<uint8_t>());
  EXPECT_EQ(exo::wire::kPut, c["op_put"].get<uint8_t>());
  EXPECT_EQ(exo::wire::kDelete, c["op_delete"].get<uint8_t>());
  EXPECT_EQ(exo::wire::kReplyBit, c["op_reply"].get<uint8_t>());
  EXPECT_EQ(exo::wire::kFromCache, c["flag_from_cache"].get<uint8_t>());
  EXPECT_EQ(exo::wire::kForwarded, c["flag_forwarded"].get<uint8_t>());
  EXPECT_EQ(exo::wire::kForwardedDscp, c["forwarded_dscp"].get<uint8_t>());
  EXPECT_EQ(exo::wire::kMinFrame, c["min_frame"].get<size_t>());
}

// Every field of FrameHeader against the layout Python computes from its field list.
TEST(Layout, FrameHeaderMatchesSharedVectors) {
  namespace off = exo::wire::off;
  using exo::wire::FrameHeader;
  const std::vector<std::pair<std::string, std::pair<size_t, size_t>>> fields = {
      {"eth_dst", {off::kEthDst, sizeof FrameHeader::eth.dst}},
      {"eth_src", {off::kEthSrc, sizeof FrameHeader::eth.src}},
      {"ethertype", {off::kEtherType, sizeof FrameHeader::eth.ethertype}},
      {"ip_version_ihl", {off::kIpVersionIhl, sizeof FrameHeader::ip.version_ihl}},
      {"ip_tos", {off::kIp + offsetof(exo::wire::Ipv4Header, tos), sizeof FrameHeader::ip.tos}},
      {"ip_total_len", {off::kIpTotalLen, sizeof FrameHeader::ip.total_len}},
      {"ip_id", {off::kIpId, sizeof FrameHeader::ip.id}},
      {"ip_frag", {off::kIpFrag, sizeof FrameHeader::ip.frag}},
      {"ip_ttl", {off::kIpTtl, sizeof FrameHeader::ip.ttl}},
      {"ip_protocol", {off::kIpProtocol, sizeof FrameHeader::ip.protocol}},
      {"ip_checksum", {off::kIpChecksum, sizeof FrameHeader::ip.checksum}},
      {"ip_src", {off::kIpSrc, sizeof FrameHeader::ip.src}},
      {"ip_dst", {off::kIpDst, sizeof FrameHeader::ip.dst}},
      {"udp_src", {off::kUdpSrc, sizeof FrameHeader::udp.src_port}},
      {"udp_dst", {off::kUdpDst, sizeof FrameHeader::udp.dst_port}},
      {"udp_length", {off::kUdpLength, sizeof FrameHeader::udp.length}},
      {"udp_checksum", {off::kUdpChecksum, sizeof FrameHeader::udp.checksum}},
      {"magic", {off::kMagic, sizeof FrameHeader::exo.magic}},
      {"version", {off::kVersion, sizeof FrameHeader::exo.version}},
      {"opcode", {off::kOpcode, sizeof FrameHeader::exo.opcode}},
      {"status", {off::kStatus, sizeof FrameHeader::exo.status}},
      {"flags", {off::kFlags, sizeof FrameHeader::exo.flags}},
      {"key_len", {off::kKeyLen, sizeof FrameHeader::exo.key_len}},
      {"value_len", {off::kValueLen, sizeof FrameHeader::exo.value_len}},
      {"client_id", {off::kClientId, sizeof FrameHeader::exo.client_id}},
      {"seq", {off::kSeq, sizeof FrameHeader::exo.seq}},
      {"key", {off::kKey, 0}},
  };
  const auto& layout = vectors()["layout"];
  ASSERT_EQ(layout.size(), fields.size());
  for (const auto& [name, at_size] : fields) {
    ASSERT_TRUE(layout.contains(name)) << name;
    EXPECT_EQ(layout[name][0].get<size_t>(), at_size.first) << name;
    EXPECT_EQ(layout[name][1].get<size_t>(), at_size.second) << name;
  }
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
    EXPECT_EQ(exo::format_mac(exo::request_mac(exo::kPrefixForwarded, h).data()), v["forwarded_mac"]);
    EXPECT_EQ(exo::hash_from_mac(exo::request_mac(exo::kPrefixGet, h).data()), h);
    EXPECT_EQ(exo::request_ip(h), exo::parse_ipv4(v["request_ip"])) << v["key_hex"];
    EXPECT_EQ(exo::request_ip(h), uint32_t(h >> 8));  // the top 32 of the 40 bits
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
    if (!f.is_reply()) {  // a request's IPv4 dst carries its key's hash
      EXPECT_EQ(f.ip_dst, exo::request_ip(exo::key_hash(f.key))) << v["name"];
    }
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
    // build() sends no UDP checksum, as every sender of the project; a vector may carry one.
    if (v["udp_checksum"].get<bool>()) exo::wire::set_udp_checksum(out);
    EXPECT_EQ(out, unhex(v["frame_hex"])) << v["name"];
  }
}

TEST(Wire, RejectsSharedMalformedFramesWithTheSharedReason) {
  const auto& ms = vectors()["malformed"];
  ASSERT_GT(ms.size(), 10u);
  for (const auto& v : ms) {
    auto raw = unhex(v["frame_hex"]);
    exo::wire::FrameView f{};
    const exo::wire::ParseError e = exo::wire::parse(raw, f);
    EXPECT_NE(e, exo::wire::ParseError::kNone) << v["name"];
    EXPECT_EQ(std::string(exo::wire::to_string(e)), v["error"].get<std::string>()) << v["name"];
  }
}

// The cache node's rewrite of a forwarded GET, incremental UDP checksum update included, gives
// the bytes Python computes by recomputing the whole checksum.
TEST(Wire, MarkForwardedMatchesSharedVectors) {
  const auto& fs = vectors()["forwarded"];
  ASSERT_GE(fs.size(), 3u);
  for (const auto& v : fs) {
    auto raw = unhex(v["request_hex"]);
    exo::wire::FrameView f{};
    ASSERT_EQ(exo::wire::parse(raw, f), exo::wire::ParseError::kNone) << v["name"];
    exo::wire::mark_forwarded(raw.data());
    EXPECT_EQ(raw, unhex(v["forwarded_hex"])) << v["name"];
    ASSERT_EQ(exo::wire::parse(raw, f), exo::wire::ParseError::kNone) << v["name"];
    EXPECT_EQ(f.eth_dst[0], exo::kPrefixForwarded);
    EXPECT_TRUE(f.flags & exo::wire::kForwarded);
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
