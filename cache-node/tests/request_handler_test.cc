#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "request_handler.h"

namespace {

using namespace exo::cache;
namespace wire = exo::wire;
using Bytes = std::vector<uint8_t>;

const exo::Mac kClientMac{0x02, 0, 0, 0, 3, 1};
constexpr uint32_t kClientIp = 0x0a000301;
constexpr uint16_t kClientPort = 40000;

SelfInfo self_info() {
  SelfInfo s;
  s.mac = {0x02, 0, 0, 0, 1, 1};
  s.ip = 0x0a000101;
  s.udp_port = 7777;
  return s;
}

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A request frame in a 2048-byte buffer (like an mbuf's data room); `len` is the frame length.
struct Frame {
  Bytes buf = Bytes(2048, 0);
  size_t len = 0;
};

Frame make_request(const std::string& key, uint8_t opcode = wire::kGet, uint8_t prefix = exo::kPrefixGet,
                   const exo::Mac& src = kClientMac, uint16_t dport = 7777, const std::string& value = "") {
  Frame f;
  const uint64_t hash = exo::key_hash(bytes(key));
  const exo::Mac dst = exo::request_mac(prefix, hash);
  wire::Header h;
  h.opcode = opcode;
  h.client_id = 0xC0FFEE;
  h.seq = 42;
  f.len = wire::build(f.buf, dst.data(), {src.data(), kClientIp, kClientPort}, exo::request_ip(hash), dport, h,
                      bytes(key), bytes(value));
  EXPECT_GT(f.len, 0u);
  return f;
}

struct Harness {
  CacheState state{16};
  DpCounters c;
  SelfInfo self = self_info();

  Action run(Frame& f, size_t cap = 2048) {
    FrameRef r{f.buf.data(), f.len, cap};
    process_burst(&r, 1, state, self, c);
    last_out_len = r.out_len;
    return r.action;
  }
  size_t last_out_len = 0;
};

TEST(RequestHandler, HitIsAnsweredInPlace) {
  Harness h;
  h.state.map.insert("user:1", "hello-value", nullptr);
  Frame f = make_request("user:1");
  ASSERT_EQ(h.run(f), Action::kReply);

  Bytes expected(2048);
  wire::Header eh;
  eh.opcode = wire::kGet | wire::kReplyBit;
  eh.status = wire::kOk;
  eh.flags = wire::kFromCache;
  eh.client_id = 0xC0FFEE;
  eh.seq = 42;
  const size_t elen = wire::build(expected, kClientMac.data(), {h.self.mac.data(), h.self.ip, 7777},
                                  kClientIp, kClientPort, eh, bytes("user:1"), bytes("hello-value"));
  ASSERT_EQ(h.last_out_len, elen);
  EXPECT_EQ(Bytes(f.buf.begin(), f.buf.begin() + elen), Bytes(expected.begin(), expected.begin() + elen));

  // And it parses as a proper reply.
  wire::FrameView v;
  ASSERT_EQ(wire::parse({f.buf.data(), h.last_out_len}, v), wire::ParseError::kNone);
  EXPECT_EQ(std::string(v.value.begin(), v.value.end()), "hello-value");
  EXPECT_EQ(v.flags, wire::kFromCache) << "FROM_CACHE only: no reply carries FORWARDED";
  EXPECT_EQ(h.c.rx_frames, 1u);
  EXPECT_EQ(h.c.gets, 1u);
  EXPECT_EQ(h.c.hits, 1u);
  EXPECT_EQ(h.c.requests_served, 1u);
  EXPECT_EQ(h.c.forwarded_misses, 0u);
  EXPECT_EQ(h.state.map.find("user:1")->hits, 1u);
}

TEST(RequestHandler, MissIsForwardedWithPrefixAE) {
  Harness h;
  Frame f = make_request("nope");
  const Bytes before(f.buf.begin(), f.buf.begin() + f.len);
  ASSERT_EQ(h.run(f), Action::kForward);
  EXPECT_EQ(h.last_out_len, f.len);
  EXPECT_EQ(f.buf[0], exo::kPrefixForwarded);
  EXPECT_EQ(f.buf[wire::off::kFlags], wire::kForwarded);
  // Nothing else changed: the key hash bytes, src MAC (the db node replies to the client), rest
  // (the UDP checksum is 0, "none", and stays so).
  for (size_t i = 1; i < f.len; ++i)
    if (i != wire::off::kFlags) {
      ASSERT_EQ(f.buf[i], before[i]) << "byte " << i;
    }
  wire::FrameView v;
  ASSERT_EQ(wire::parse({f.buf.data(), f.len}, v), wire::ParseError::kNone);
  EXPECT_EQ(v.flags, wire::kForwarded);
  EXPECT_EQ(h.c.forwarded_misses, 1u);
  EXPECT_EQ(h.c.hits, 0u);
  EXPECT_EQ(h.c.gets, 1u);
}

TEST(RequestHandler, AWrongHashInTheMacIsAMissNotAWrongHit) {
  // The lookup uses the hash in the dst MAC; the key comparison keeps a lying client safe.
  Harness h;
  h.state.map.insert("user:1", "v1", nullptr);
  Frame f = make_request("user:1");
  const exo::Mac other = exo::request_mac(exo::kPrefixGet, exo::key_hash(bytes("user:2")));
  std::copy(other.begin(), other.end(), f.buf.begin());
  EXPECT_EQ(h.run(f), Action::kForward);
  EXPECT_EQ(h.c.hits.load(), 0u);
  EXPECT_EQ(h.c.forwarded_misses.load(), 1u);
}

TEST(RequestHandler, PendingKeyIsForwardedUntilCommit) {
  Harness h;
  h.state.map.insert("k", "old", nullptr);
  h.state.keys.prepare("k", 5, false, "new");
  Frame f = make_request("k");
  EXPECT_EQ(h.run(f), Action::kForward);
  EXPECT_EQ(f.buf[0], exo::kPrefixForwarded);
  h.state.keys.commit("k", 5, false);
  Frame g = make_request("k");
  ASSERT_EQ(h.run(g), Action::kReply);
  wire::FrameView v;
  ASSERT_EQ(wire::parse({g.buf.data(), h.last_out_len}, v), wire::ParseError::kNone);
  EXPECT_EQ(std::string(v.value.begin(), v.value.end()), "new");
}

TEST(RequestHandler, ReplyThatDoesNotFitIsForwarded) {
  Harness h;
  h.state.map.insert("big", std::string(1000, 'x'), nullptr);
  Frame f = make_request("big");
  EXPECT_EQ(h.run(f, /*cap=*/200), Action::kForward);
  EXPECT_EQ(f.buf[0], exo::kPrefixForwarded);
  EXPECT_EQ(h.c.forwarded_misses, 1u);
}

TEST(RequestHandler, PaddedRequestGetsExactReplyLength) {
  Harness h;
  h.state.map.insert("k", "v", nullptr);
  Frame f = make_request("k");
  const size_t frame_len = f.len;
  f.len += 10;  // link-layer padding after the IP packet
  ASSERT_EQ(h.run(f), Action::kReply);
  EXPECT_EQ(h.last_out_len, frame_len + 1);
}

TEST(RequestHandler, MalformedFramesAreDroppedAndCounted) {
  Harness h;
  std::vector<Frame> bad;
  Frame t = make_request("k");
  t.len = 50;  // truncated
  bad.push_back(t);
  Frame m = make_request("k");
  m.buf[wire::off::kMagic] = 0x00;  // bad magic
  bad.push_back(m);
  Frame k = make_request("k");
  k.buf[wire::off::kKeyLen] = 0x00, k.buf[wire::off::kKeyLen + 1] = 0x00;  // key_len 0
  bad.push_back(k);
  bad.push_back(make_request("k", wire::kPut, exo::kPrefixOther, kClientMac, 7777, "v"));  // PUT
  bad.push_back(make_request("k", wire::kGet | wire::kReplyBit));                          // a reply
  bad.push_back(make_request("k", wire::kGet, exo::kPrefixOther));  // 0xBA GET: not for a cache
  bad.push_back(make_request("k", wire::kGet, exo::kPrefixForwarded));  // forwarded: a loop
  for (auto& f : bad) EXPECT_EQ(h.run(f), Action::kDrop);
  EXPECT_EQ(h.c.malformed_dropped, bad.size());
  EXPECT_EQ(h.c.gets, 0u);
  EXPECT_EQ(h.c.ignored, 0u);
}

// The checks every node makes (wire::screen): a wrong IPv4 header checksum or a wrong
// non-zero UDP checksum is malformed, never served; a correct UDP checksum (or 0) is served.
TEST(RequestHandler, FramesWithWrongChecksumsAreDroppedAndCounted) {
  Harness h;
  h.state.map.insert("k", "v", nullptr);
  Frame bad_ip = make_request("k");
  bad_ip.buf[wire::off::kIpTtl] = 1;  // header changed, checksum not
  EXPECT_EQ(h.run(bad_ip), Action::kDrop);
  Frame bad_udp = make_request("k");
  wire::set_udp_checksum({bad_udp.buf.data(), bad_udp.len});
  bad_udp.buf[bad_udp.len - 1] ^= 0x20;  // the key changed on the way
  EXPECT_EQ(h.run(bad_udp), Action::kDrop);
  EXPECT_EQ(h.c.malformed_dropped, 2u);
  EXPECT_EQ(h.c.gets, 0u);

  Frame good_udp = make_request("k");
  wire::set_udp_checksum({good_udp.buf.data(), good_udp.len});
  EXPECT_EQ(h.run(good_udp), Action::kReply);
  EXPECT_EQ(h.c.hits, 1u);
}

TEST(RequestHandler, ForwardedMissKeepsTheClientsUdpChecksumValid) {
  // The db node verifies a non-zero UDP checksum; the FORWARDED flag is inside the payload.
  Harness h;
  Frame f = make_request("nope");
  wire::set_udp_checksum({f.buf.data(), f.len});
  ASSERT_EQ(h.run(f), Action::kForward);
  EXPECT_NE(wire::header_of(f.buf.data())->udp.checksum.get(), 0);
  EXPECT_TRUE(wire::udp_checksum_ok(f.buf.data()));
  wire::FrameView v;
  ASSERT_EQ(wire::parse({f.buf.data(), f.len}, v), wire::ParseError::kNone);
  EXPECT_EQ(v.flags, wire::kForwarded);
}

TEST(RequestHandler, ForeignFramesAreIgnored) {
  Harness h;
  std::vector<Frame> foreign;
  foreign.push_back(make_request("k", wire::kGet, 0x02));                              // unicast MAC
  foreign.push_back(make_request("k", wire::kGet, exo::kPrefixGet, h.self.mac));       // our own
  foreign.push_back(make_request("k", wire::kGet, exo::kPrefixGet, kClientMac, 9999));  // port
  Frame tiny;
  tiny.len = 5;
  foreign.push_back(tiny);
  for (auto& f : foreign) EXPECT_EQ(h.run(f), Action::kDrop);
  EXPECT_EQ(h.c.ignored, foreign.size());
  EXPECT_EQ(h.c.malformed_dropped, 0u);
  EXPECT_EQ(h.c.rx_frames, foreign.size());
}

TEST(RequestHandler, MixedBurst) {
  Harness h;
  h.state.map.insert("hot", "H", nullptr);
  std::vector<Frame> fs{make_request("hot"), make_request("cold"), make_request("x", wire::kGet, 0x02),
                        make_request("hot")};
  fs[1].len = 30;  // truncated -> malformed
  std::vector<FrameRef> refs;
  for (auto& f : fs) refs.push_back({f.buf.data(), f.len, f.buf.size()});
  fs.push_back(make_request("cold"));
  refs.push_back({fs.back().buf.data(), fs.back().len, fs.back().buf.size()});
  process_burst(refs.data(), refs.size(), h.state, h.self, h.c);
  EXPECT_EQ(refs[0].action, Action::kReply);
  EXPECT_EQ(refs[1].action, Action::kDrop);
  EXPECT_EQ(refs[2].action, Action::kDrop);
  EXPECT_EQ(refs[3].action, Action::kReply);
  EXPECT_EQ(refs[4].action, Action::kForward);
  EXPECT_EQ(h.c.rx_frames, 5u);
  EXPECT_EQ(h.c.hits, 2u);
  EXPECT_EQ(h.c.forwarded_misses, 1u);
  EXPECT_EQ(h.c.malformed_dropped, 1u);
  EXPECT_EQ(h.c.ignored, 1u);
  EXPECT_EQ(h.state.map.find("hot")->hits, 2u);
}

TEST(RequestHandler, RandomCorruptionNeverCrashesAndIsAlwaysAccounted) {
  Harness h;
  h.state.map.insert("k", "v", nullptr);
  std::mt19937 rng(1234);
  const int kRuns = 20000;
  for (int i = 0; i < kRuns; ++i) {
    Frame f = make_request("k");
    const int flips = 1 + rng() % 4;
    for (int j = 0; j < flips; ++j) f.buf[rng() % (f.len + 8)] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) f.len = rng() % (f.len + 1);
    f.buf[0] = exo::kPrefixGet;
    h.run(f, 64 + rng() % 1984);
  }
  EXPECT_EQ(h.c.rx_frames, static_cast<uint64_t>(kRuns));
  EXPECT_EQ(h.c.ignored + h.c.malformed_dropped + h.c.gets, h.c.rx_frames);
  EXPECT_EQ(h.c.hits + h.c.forwarded_misses, h.c.gets);
  EXPECT_GT(h.c.malformed_dropped, 0u);
  EXPECT_GT(h.c.gets, 0u);
}

TEST(RequestHandler, OversizedFramesAreDroppedAndCountedAsMalformed) {
  Harness h;
  h.state.map.insert("k", "v", nullptr);
  // A GET padded to 14 + mtu is fine; one byte more is over the link MTU.
  Frame ok = make_request("k");
  ok.len = h.self.max_frame;
  EXPECT_EQ(h.run(ok), Action::kReply);
  Frame big = make_request("k");
  big.len = h.self.max_frame + 1;
  EXPECT_EQ(h.run(big), Action::kDrop);
  // A well-formed frame whose IP length says it is larger than the MTU (a PUT-sized GET).
  Frame huge = make_request("k", wire::kGet, exo::kPrefixGet, kClientMac, 7777, std::string(1600, 'x'));
  EXPECT_EQ(h.run(huge), Action::kDrop);
  EXPECT_EQ(h.c.malformed_dropped, 2u);
  EXPECT_EQ(h.c.gets, 1u);
  // Foreign oversized traffic is still just ignored.
  Frame foreign = make_request("k", wire::kGet, 0x02);
  foreign.len = 2000;
  EXPECT_EQ(h.run(foreign), Action::kDrop);
  EXPECT_EQ(h.c.ignored, 1u);
  EXPECT_EQ(h.c.rx_frames, 4u);
}

TEST(RequestHandler, TruncatedFramesAreMalformedNeverAnswered) {
  // A chained mbuf: only its first segment is visible, and it holds a complete-looking GET.
  Harness h;
  h.state.map.insert("k", "v", nullptr);
  Frame f = make_request("k");
  FrameRef r{f.buf.data(), f.len, f.len};
  r.truncated = true;
  process_burst(&r, 1, h.state, h.self, h.c);
  EXPECT_EQ(r.action, Action::kDrop);
  EXPECT_EQ(h.c.malformed_dropped, 1u);
  Frame foreign = make_request("k", wire::kGet, 0x02);
  FrameRef g{foreign.buf.data(), foreign.len, foreign.len};
  g.truncated = true;
  process_burst(&g, 1, h.state, h.self, h.c);
  EXPECT_EQ(h.c.ignored, 1u);
  EXPECT_EQ(h.c.gets, 0u);
}

}  // namespace
