// RequestBuilder: patched template frames parse with the project's wire parser (IPv4 header
// checksum included), carry the right prefix + key hash in the dst MAC and request_ip(key hash)
// in the IPv4 dst, and equal what wire::build writes from scratch.
#include "loadgen/request_builder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "keyhash.h"
#include "loadgen/hot_set_swap.h"
#include "loadgen_test_util.h"
#include "wire.h"

namespace exo::loadgen {
namespace {

using testing::test_endpoint;

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<uint8_t> build_fresh(const Endpoint& ep, uint32_t client_id, bool put, uint64_t id,
                                 uint32_t seq, size_t key_size, size_t value_size,
                                 const std::vector<uint8_t>& value_from) {
  const std::string key = key_name(id, key_size);
  const uint64_t hash = key_hash(bytes(key));
  const Mac dst = ep.fixed_dst_mac ? ep.dst_mac : request_mac(put ? kPrefixOther : kPrefixGet, hash);
  const uint32_t ip_dst = ep.ip_dst_fixed() ? ep.service_ip : request_ip(hash);
  wire::Header h;
  h.opcode = put ? wire::kPut : wire::kGet;
  h.client_id = client_id;
  h.seq = seq;
  std::vector<uint8_t> out(1514);
  const wire::Addr src{ep.mac.data(), ep.ip, ep.src_port};
  const std::vector<uint8_t> value(value_from.end() - static_cast<long>(value_size), value_from.end());
  out.resize(wire::build(out, dst.data(), src, ip_dst, ep.udp_port, h, bytes(key),
                         put ? std::span<const uint8_t>(value) : std::span<const uint8_t>()));
  return out;
}

TEST(RequestBuilder, GetRoundTripsThroughTheWireParser) {
  const Endpoint ep = test_endpoint(40001);
  const RequestBuilder b(ep, 0xC0FFEE01, 16, 512, 1500);
  std::vector<uint8_t> f(b.frame_len(false));
  ASSERT_EQ(b.write(f.data(), false, 42, 0xDEADBEEF), 62u + 16u);
  wire::FrameView v{};
  ASSERT_EQ(wire::parse(f, v), wire::ParseError::kNone);
  const std::string key(v.key.begin(), v.key.end());
  EXPECT_EQ(key, "key:000000000042");
  EXPECT_EQ(v.eth_dst[0], kPrefixGet);
  EXPECT_EQ(hash_from_mac(v.eth_dst), key_hash(v.key));
  EXPECT_EQ(std::vector<uint8_t>(v.eth_src, v.eth_src + 6), std::vector<uint8_t>(ep.mac.begin(), ep.mac.end()));
  EXPECT_EQ(v.opcode, wire::kGet);
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.flags, 0);
  EXPECT_EQ(v.client_id, 0xC0FFEE01u);
  EXPECT_EQ(v.seq, 0xDEADBEEFu);
  EXPECT_EQ(v.ip_src, ep.ip);
  EXPECT_EQ(v.ip_dst, request_ip(key_hash(v.key)));  // not ep.service_ip
  EXPECT_NE(v.ip_dst, ep.service_ip);
  EXPECT_EQ(v.udp_src, 40001);
  EXPECT_EQ(v.udp_dst, 7777);
  EXPECT_TRUE(v.value.empty());
  EXPECT_EQ(wire::ipv4_checksum(f.data() + wire::kEthLen), 0);  // a valid header sums to 0
}

TEST(RequestBuilder, PutCarriesTheOtherPrefixAndTheValue) {
  const RequestBuilder b(test_endpoint(), 7, 16, 512, 1500);
  std::vector<uint8_t> f(b.frame_len(true));
  ASSERT_EQ(b.write(f.data(), true, 99'999'999, 3), 62u + 16u + 512u);
  wire::FrameView v{};
  ASSERT_EQ(wire::parse(f, v), wire::ParseError::kNone);
  EXPECT_EQ(v.eth_dst[0], kPrefixOther);
  EXPECT_EQ(hash_from_mac(v.eth_dst), key_hash(bytes("key:000099999999")));
  EXPECT_EQ(v.ip_dst, request_ip(key_hash(bytes("key:000099999999"))));
  EXPECT_EQ(v.opcode, wire::kPut);
  EXPECT_EQ(v.value.size(), 512u);
  EXPECT_EQ(v.seq, 3u);
}

TEST(RequestBuilder, EqualsAFreshWireBuildForManyKeysAndSeqs) {
  Endpoint fixed_ip = test_endpoint(5555);
  fixed_ip.fixed_dst_ip = true;  // --dst-ip: the MAC is patched, the IPv4 dst is not
  Endpoint fixed_mac = test_endpoint(5555);
  fixed_mac.fixed_dst_mac = true;  // --dst-mac: neither is patched
  fixed_mac.dst_mac = {0x02, 0, 0, 0, 0x0b, 0x02};
  for (const Endpoint& ep : {test_endpoint(5555), fixed_ip, fixed_mac}) {
    for (size_t key_size : {9u, 16u, 40u, 250u}) {
      const RequestBuilder b(ep, 0x01020304, key_size, 100, 1500);
      // The value the builder uses is whatever its PUT template carries: read it back once.
      std::vector<uint8_t> put(b.frame_len(true));
      b.write(put.data(), true, 0, 0);
      const std::vector<uint8_t> value(put.end() - 100, put.end());
      std::vector<uint8_t> buf(b.max_frame_len(), 0xEE);  // reused: a PUT, then a GET over it
      for (uint64_t id : {0ull, 1ull, 12345ull, 99999ull}) {
        for (uint32_t seq : {0u, 1u, 0x80000000u, 0xFFFFFFFFu}) {
          for (bool is_put : {true, false}) {
            const size_t n = b.write(buf.data(), is_put, id, seq);
            const std::vector<uint8_t> got(buf.begin(), buf.begin() + static_cast<long>(n));
            EXPECT_EQ(got, build_fresh(ep, 0x01020304, is_put, id, seq, key_size, 100, value))
                << "key_size " << key_size << " id " << id << " seq " << seq << " put " << is_put
                << " fixed mac " << ep.fixed_dst_mac << " fixed ip " << ep.fixed_dst_ip;
            wire::FrameView v{};
            ASSERT_EQ(wire::parse(got, v), wire::ParseError::kNone);  // IPv4 checksum valid
          }
        }
      }
    }
  }
}

TEST(RequestBuilder, DistinctKeysGetTheirOwnHash) {
  const RequestBuilder b(test_endpoint(), 1, 16, 0, 1500);
  std::vector<uint8_t> f1(b.frame_len(false)), f2(b.frame_len(false));
  b.write(f1.data(), false, 1, 0);
  b.write(f2.data(), false, 2, 0);
  EXPECT_NE(std::vector<uint8_t>(f1.begin(), f1.begin() + 6), std::vector<uint8_t>(f2.begin(), f2.begin() + 6));
  EXPECT_NE(wire::header_of(f1.data())->ip.dst.get(), wire::header_of(f2.data())->ip.dst.get());
}

// The IPv4 dst of every request is request_ip(key hash), with a valid IPv4 header checksum,
// over a buffer reused for PUTs and GETs of many keys.
TEST(RequestBuilder, IpDstIsTheKeysRequestIpWithAValidChecksum) {
  const Endpoint ep = test_endpoint();
  const RequestBuilder b(ep, 3, 16, 64, 1500);
  std::vector<uint8_t> buf(b.max_frame_len());
  for (uint64_t id = 0; id < 2000; ++id) {
    const bool put = id % 3 == 0;
    const size_t n = b.write(buf.data(), put, id * 7919, static_cast<uint32_t>(id));
    wire::FrameView v{};
    ASSERT_EQ(wire::parse(std::span<const uint8_t>(buf.data(), n), v), wire::ParseError::kNone) << id;
    ASSERT_EQ(v.ip_dst, request_ip(key_hash(v.key))) << id;
    ASSERT_EQ(v.ip_dst, static_cast<uint32_t>(hash_from_mac(v.eth_dst) >> 8)) << id;
    ASSERT_EQ(wire::ipv4_checksum(buf.data() + wire::kEthLen), 0) << id;
  }
}

// --dst-mac (reflect / memcached servers) and --dst-ip keep one fixed IPv4 dst: service_ip.
TEST(RequestBuilder, AFixedDestinationKeepsServiceIp) {
  Endpoint ep = test_endpoint();
  ep.fixed_dst_mac = true;
  ep.dst_mac = {0x02, 0, 0, 0, 0x0b, 0x02};
  Endpoint ip_only = test_endpoint();
  ip_only.fixed_dst_ip = true;
  for (const Endpoint& e : {ep, ip_only}) {
    const RequestBuilder b(e, 3, 16, 0, 1500);
    std::vector<uint8_t> f(b.frame_len(false));
    for (uint64_t id : {1ull, 2ull, 77ull}) {
      b.write(f.data(), false, id, 1);
      wire::FrameView v{};
      ASSERT_EQ(wire::parse(f, v), wire::ParseError::kNone);
      EXPECT_EQ(v.ip_dst, 0x0a0000feu);
      if (e.fixed_dst_mac) {
        EXPECT_EQ(std::vector<uint8_t>(v.eth_dst, v.eth_dst + 6),
                  std::vector<uint8_t>(e.dst_mac.begin(), e.dst_mac.end()));
      } else {
        EXPECT_EQ(hash_from_mac(v.eth_dst), key_hash(v.key));
      }
    }
  }
}

TEST(RequestBuilder, RefusesFramesBeyondTheMtu) {
  // 62 + 16 + 1436 = 1514 = 14 + 1500 fits exactly; one more byte does not.
  EXPECT_NO_THROW(RequestBuilder(test_endpoint(), 1, 16, 1436, 1500));
  try {
    RequestBuilder(test_endpoint(), 1, 16, 1437, 1500);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--value-size"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RequestBuilder(test_endpoint(), 1, 251, 0, 1500), std::invalid_argument);
}

}  // namespace
}  // namespace exo::loadgen
