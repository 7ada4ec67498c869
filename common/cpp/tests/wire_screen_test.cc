// The one frame pre-filter (wire::screen) and the checksums: the IPv4 header checksum and a
// non-zero UDP checksum are verified, a UDP checksum of 0 means none; the fast sums agree with
// a textbook RFC 1071 sum on random frames; the forward rewrite keeps a checksum valid.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "keyhash.h"
#include "wire.h"

namespace {

using exo::wire::ParseError;
using exo::wire::Screen;
namespace off = exo::wire::off;

const exo::Mac kClientMac{0x02, 0, 0, 0, 3, 1};
const exo::Mac kNodeMac{0x02, 0, 0, 0, 2, 1};

std::vector<uint8_t> request(uint8_t op, const std::string& key, size_t value_len = 0,
                             bool udp_checksum = false) {
  std::vector<uint8_t> f(2048);
  const auto* k = reinterpret_cast<const uint8_t*>(key.data());
  const uint64_t hash = exo::key_hash({k, key.size()});
  const exo::Mac dst = exo::request_mac(op == exo::wire::kGet ? exo::kPrefixGet : exo::kPrefixOther, hash);
  exo::wire::Header h;
  h.opcode = op;
  h.client_id = 7;
  h.seq = 9;
  std::vector<uint8_t> value(value_len, 'v');
  const exo::wire::Addr src{kClientMac.data(), 0x0a000301, 40000};
  f.resize(exo::wire::build(f, dst.data(), src, exo::request_ip(hash), 7777, h, {k, key.size()}, value));
  if (udp_checksum) exo::wire::set_udp_checksum(f);
  return f;
}

uint16_t udp_field(const std::vector<uint8_t>& f) {
  return exo::wire::header_of(f.data())->udp.checksum.get();
}

// RFC 1071 as written: big-endian 16-bit words, odd byte padded, folded, complemented.
uint16_t textbook_udp_checksum(const std::vector<uint8_t>& f) {
  const size_t udp_len = exo::wire::header_of(f.data())->udp.length.get();
  std::vector<uint8_t> d(f.begin() + off::kIpSrc, f.begin() + off::kIpSrc + 8);
  d.push_back(0);
  d.push_back(17);
  d.push_back(static_cast<uint8_t>(udp_len >> 8));
  d.push_back(static_cast<uint8_t>(udp_len));
  const size_t udp_at = d.size();
  d.insert(d.end(), f.begin() + off::kUdp, f.begin() + off::kUdp + udp_len);
  d.at(udp_at + 6) = 0;  // the checksum field itself
  d.at(udp_at + 7) = 0;
  if (d.size() % 2) d.push_back(0);
  uint32_t s = 0;
  for (size_t i = 0; i < d.size(); i += 2) s += uint32_t{d[i]} << 8 | d[i + 1];
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  const uint16_t c = static_cast<uint16_t>(~s);
  return c == 0 ? 0xffff : c;
}

struct FrameViewHolder {
  exo::wire::FrameView v{};
};

Screen screen(const std::vector<uint8_t>& f, ParseError* why = nullptr, size_t max_frame = 1514) {
  exo::wire::ScreenPolicy p;
  p.udp_port = 7777;
  p.max_frame = max_frame;
  p.self_mac = kNodeMac.data();
  exo::wire::FrameView v{};
  return exo::wire::screen(f, p, v, why);
}

TEST(Checksum, FastSumsEqualTheTextbookSumOnRandomFrames) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const size_t value_len = 1 + rng() % 1400;  // odd and even UDP lengths
    auto f = request(exo::wire::kPut, "key:" + std::to_string(rng()), value_len);
    for (size_t j = exo::wire::kMinFrame; j < f.size(); ++j) f[j] = static_cast<uint8_t>(rng());
    exo::wire::header_of(f.data())->ip.src.set(static_cast<uint32_t>(rng()));
    const uint16_t want = textbook_udp_checksum(f);
    ASSERT_EQ(exo::wire::udp_checksum(f.data()), want) << value_len;
    exo::wire::set_udp_checksum(f);
    ASSERT_EQ(udp_field(f), want);
    ASSERT_TRUE(exo::wire::udp_checksum_ok(f.data()));
    // One changed byte of the value always changes the sum (a 16-bit word moves by 1..65280).
    f[f.size() - 1 - rng() % value_len] ^= static_cast<uint8_t>(1 + rng() % 255);
    ASSERT_FALSE(exo::wire::udp_checksum_ok(f.data()));
  }
}

TEST(Checksum, Ipv4HeaderChecksumCatchesAnyChangedByte) {
  auto f = request(exo::wire::kGet, "k");
  ASSERT_TRUE(exo::wire::ipv4_checksum_ok(f.data() + off::kIp));
  for (size_t i = off::kIp; i < off::kIp + exo::wire::kIpLen; ++i) {
    auto g = f;
    g[i] ^= 0x10;
    EXPECT_FALSE(exo::wire::ipv4_checksum_ok(g.data() + off::kIp)) << i;
    FrameViewHolder h;
    EXPECT_NE(exo::wire::parse(g, h.v), ParseError::kNone) << i;
  }
}

// Exactly the three prefixes a sender of the cluster uses are requests: 0xAA (client GET), 0xAE
// (GET a cache node forwards), 0xBA (PUT/DELETE). 0xBE is never sent, so it stays foreign.
TEST(Screen, RequestMacsAreExactlyTheThreePrefixes) {
  int requests = 0;
  for (int b = 0; b < 256; ++b) {
    const uint8_t mac[6] = {static_cast<uint8_t>(b), 1, 2, 3, 4, 5};
    const bool want = b == 0xAA || b == 0xAE || b == 0xBA;
    EXPECT_EQ(exo::wire::is_request_mac(mac), want) << b;
    requests += exo::wire::is_request_mac(mac);
  }
  EXPECT_EQ(requests, 3);
}

TEST(Screen, SortsFramesIntoIgnoredMalformedAndRequests) {
  ParseError why = ParseError::kNone;
  const auto get = request(exo::wire::kGet, "user:1");
  EXPECT_EQ(screen(get), Screen::kRequest);
  EXPECT_EQ(udp_field(get), 0) << "senders of the project send no UDP checksum";

  // Ignored: not ours.
  auto foreign = get;
  foreign[0] = 0x02;
  EXPECT_EQ(screen(foreign), Screen::kIgnore);
  EXPECT_EQ(screen(std::vector<uint8_t>(get.begin(), get.begin() + 13)), Screen::kIgnore);
  auto own = get;
  std::memcpy(own.data() + off::kEthSrc, kNodeMac.data(), 6);
  EXPECT_EQ(screen(own), Screen::kIgnore);
  auto other_port = get;
  exo::wire::header_of(other_port.data())->udp.dst_port.set(5353);
  EXPECT_EQ(screen(other_port), Screen::kIgnore);
  // ... even with a broken checksum: someone else's traffic is never counted.
  exo::wire::header_of(other_port.data())->ip.checksum.set(0x1234);
  EXPECT_EQ(screen(other_port), Screen::kIgnore);

  // Malformed: ours, but broken.
  auto bad_ip = get;
  bad_ip[off::kIpTtl] = 63;  // a changed header without a new checksum
  EXPECT_EQ(screen(bad_ip, &why), Screen::kMalformed);
  EXPECT_EQ(why, ParseError::kIpChecksum);
  auto bad_udp = request(exo::wire::kGet, "user:1", 0, /*udp_checksum=*/true);
  EXPECT_EQ(screen(bad_udp), Screen::kRequest);
  bad_udp.back() ^= 1;
  EXPECT_EQ(screen(bad_udp, &why), Screen::kMalformed);
  EXPECT_EQ(why, ParseError::kUdpChecksum);
  auto reply = get;
  reply[off::kOpcode] |= exo::wire::kReplyBit;  // UDP checksum 0: no other field to fix
  EXPECT_EQ(screen(reply, &why), Screen::kMalformed);
  EXPECT_EQ(why, ParseError::kNotRequest);
  EXPECT_EQ(screen(get, &why, get.size() - 1), Screen::kMalformed);
  EXPECT_EQ(why, ParseError::kOversize);
  auto bad_magic = get;
  bad_magic[off::kMagic] = 0;
  EXPECT_EQ(screen(bad_magic, &why), Screen::kMalformed);
  EXPECT_EQ(why, ParseError::kBadMagic);
}

TEST(Screen, AcceptsAValidUdpChecksumIncludingFfff) {
  // A client may send a UDP checksum; a correct one is accepted on every frame size, and a
  // computed 0 goes on the wire as 0xFFFF (RFC 768) and is accepted too.
  for (size_t value_len : {0, 1, 2, 3, 100, 1000, 1431}) {
    const auto f = request(exo::wire::kPut, "user:1", value_len, true);
    EXPECT_NE(udp_field(f), 0);
    EXPECT_EQ(screen(f), Screen::kRequest) << value_len;
  }
  bool saw_ffff = false;
  for (uint32_t seq = 0; seq < 400000 && !saw_ffff; ++seq) {
    auto f = request(exo::wire::kGet, "zero");
    exo::wire::header_of(f.data())->exo.seq.set(seq);
    exo::wire::set_udp_checksum(f);
    if (udp_field(f) != 0xffff) continue;
    saw_ffff = true;
    EXPECT_EQ(screen(f), Screen::kRequest);
  }
  EXPECT_TRUE(saw_ffff);
}

TEST(Forward, RewriteKeepsAnyUdpChecksumValid) {
  std::mt19937 rng(5);
  for (int i = 0; i < 3000; ++i) {
    auto f = request(exo::wire::kGet, "key:" + std::to_string(rng()), 0, /*udp_checksum=*/i % 4 != 0);
    exo::wire::header_of(f.data())->exo.flags = static_cast<uint8_t>(rng() & 0xfd);
    exo::wire::header_of(f.data())->exo.status = static_cast<uint8_t>(rng());
    if (udp_field(f) != 0) exo::wire::set_udp_checksum(f);
    const bool had_checksum = udp_field(f) != 0;
    exo::wire::mark_forwarded(f.data());
    ASSERT_EQ(f[0], exo::kPrefixForwarded);
    ASSERT_TRUE(f[off::kFlags] & exo::wire::kForwarded);
    ASSERT_EQ(udp_field(f) != 0, had_checksum) << "0 stays 'none', a checksum stays one";
    ASSERT_TRUE(exo::wire::udp_checksum_ok(f.data()));
    if (had_checksum) {
      ASSERT_EQ(udp_field(f), textbook_udp_checksum(f));
    }
  }
}

TEST(Reply, NeverCarriesForwardedFromTheRequest) {
  // build_reply takes the reply's flags from its caller, never from the request: a db node
  // answering a forwarded GET (flags 0) sends no FORWARDED back (docs/wire-format.md).
  auto f = request(exo::wire::kGet, "user:1");
  exo::wire::mark_forwarded(f.data());
  f.resize(2048);
  exo::wire::FrameView req{};
  ASSERT_EQ(exo::wire::parse(f, req), ParseError::kNone);
  ASSERT_TRUE(req.flags & exo::wire::kForwarded);
  const exo::wire::Addr self{kNodeMac.data(), 0x0a000201, 7777};
  f.resize(exo::wire::build_reply(f, req, self, exo::wire::kOk, 0, {}));
  exo::wire::FrameView rep{};
  ASSERT_EQ(exo::wire::parse(f, rep), ParseError::kNone);
  EXPECT_EQ(rep.flags, 0);
  EXPECT_EQ(udp_field(f), 0);
}

}  // namespace
