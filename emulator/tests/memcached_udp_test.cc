// --protocol memcached: the request bytes, reply parsing (VALUE, END, error lines, truncated,
// wrong header, multi-datagram), the parser never reading past its buffer, request id -> seq
// (wraparound, ids never sent, replies older than 65,536 requests), the ReplyHandler's booking,
// and the TX and RX loops end to end against a fake memcached over a socketpair.
#include "loadgen/memcached_udp.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "loadgen/clock.h"
#include "loadgen/hot_set_swap.h"
#include "loadgen/reply_handler.h"
#include "loadgen/sender.h"
#include "loadgen_test_util.h"
#include "socketpair_rig.h"
#include "wire.h"

namespace exo::loadgen {
namespace {

using testing::RigResult;
using testing::run_over_socketpair;
using testing::test_endpoint;

constexpr uint64_t kSec = 1'000'000'000;
constexpr uint64_t kStart = 100 * kSec;
constexpr Mac kServerMac = {0x02, 0x00, 0x00, 0x00, 0x0b, 0x02};
constexpr uint32_t kServerIp = 0x0a090002;  // 10.9.0.2

// The client's endpoint in memcached mode: requests go to kServerMac, 10.9.0.2:11211.
Endpoint mc_endpoint(uint16_t src_port = 40000) {
  Endpoint ep = test_endpoint(src_port);
  ep.service_ip = kServerIp;
  ep.udp_port = kMemcachedPort;
  ep.fixed_dst_mac = true;
  ep.dst_mac = kServerMac;
  return ep;
}

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// memcached's frame header + text: one reply datagram's UDP payload.
std::vector<uint8_t> payload(uint16_t request_id, const std::string& text, uint16_t seq = 0,
                             uint16_t total = 1) {
  std::vector<uint8_t> p(kMcHeaderLen + text.size());
  auto* h = reinterpret_cast<McUdpHeader*>(p.data());
  h->request_id.set(request_id);
  h->seq.set(seq);
  h->total.set(total);
  std::copy(text.begin(), text.end(), p.begin() + kMcHeaderLen);
  return p;
}

// The frame the server's kernel would send for a UDP payload: Ethernet + IPv4 + UDP, from the
// server's MAC/IP/port to the client's, with a valid IPv4 header checksum.
std::vector<uint8_t> reply_frame(const Endpoint& ep, const std::vector<uint8_t>& udp_payload,
                                 uint16_t from_port = kMemcachedPort, uint32_t from_ip = kServerIp) {
  std::vector<uint8_t> f(kMcPayloadOffset + udp_payload.size());
  wire::FrameHeader* h = wire::header_of(f.data());
  std::memcpy(h->eth.dst, ep.mac.data(), 6);
  std::memcpy(h->eth.src, kServerMac.data(), 6);
  h->eth.ethertype.set(wire::kEtherTypeIpv4);
  h->ip.version_ihl = wire::kIpv4NoOptions;
  h->ip.total_len.set(static_cast<uint16_t>(f.size() - wire::kEthLen));
  h->ip.ttl = 64;
  h->ip.protocol = wire::kIpProtoUdp;
  h->ip.src.set(from_ip);
  h->ip.dst.set(ep.ip);
  h->ip.checksum.set(wire::ipv4_checksum(f.data() + wire::kEthLen));
  h->udp.src_port.set(from_port);
  h->udp.dst_port.set(ep.src_port);
  h->udp.length.set(static_cast<uint16_t>(wire::kUdpLen + udp_payload.size()));
  std::copy(udp_payload.begin(), udp_payload.end(), f.begin() + kMcPayloadOffset);
  return f;
}

McOutcome outcome_of(const std::vector<uint8_t>& p) { return parse_mc_reply(p).outcome; }

TEST(MemcachedRequest, BytesOfAGet) {
  const Endpoint ep = mc_endpoint(40001);
  const MemcachedRequestBuilder b(ep, 16);
  ASSERT_EQ(b.max_frame_len(), 42u + 8u + 4u + 16u + 2u);
  std::vector<uint8_t> f(b.max_frame_len());
  ASSERT_EQ(b.write(f.data(), false, 42, 0x12345678), f.size());

  const std::vector<uint8_t> expected_payload = {
      0x56, 0x78,  // request id: the seq's low 16 bits
      0x00, 0x00,  // sequence number 0
      0x00, 0x01,  // 1 datagram
      0x00, 0x00,  // reserved
      'g', 'e', 't', ' ', 'k', 'e', 'y', ':', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0',
      '4', '2', '\r', '\n'};
  EXPECT_EQ(std::vector<uint8_t>(f.begin() + 42, f.end()), expected_payload);

  const std::vector<uint8_t> expected_head = {
      0x02, 0x00, 0x00, 0x00, 0x0b, 0x02,  // dst: the server's MAC
      0x02, 0x00, 0x00, 0x00, 0x03, 0x01,  // src: the client's
      0x08, 0x00,                          // IPv4
      0x45, 0x00, 0x00, 20 + 8 + 30,       // version/IHL, TOS, total length 58
      0x00, 0x00, 0x40, 0x00,              // id 0, DF
      64, 17,                              // TTL, UDP
  };
  EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.begin() + 24), expected_head);
  const wire::FrameHeader* h = wire::header_of(f.data());
  EXPECT_EQ(wire::ipv4_checksum(f.data() + wire::kEthLen), 0);  // a valid header sums to 0
  EXPECT_EQ(h->ip.src.get(), ep.ip);
  EXPECT_EQ(h->ip.dst.get(), kServerIp);
  EXPECT_EQ(h->udp.src_port.get(), 40001);
  EXPECT_EQ(h->udp.dst_port.get(), 11211);
  EXPECT_EQ(h->udp.length.get(), 8 + 30);
  EXPECT_EQ(h->udp.checksum.get(), 0);  // none

  // The next request patches only the key and the request id; seq 0x0001FFFF wraps to id 0xFFFF.
  std::vector<uint8_t> g(b.max_frame_len());
  b.write(g.data(), false, 99'999'999'999, 0x0001FFFF);
  EXPECT_EQ(g[42], 0xFF);
  EXPECT_EQ(g[43], 0xFF);
  EXPECT_EQ(std::string(g.begin() + kMcKeyOffset, g.end() - 2), "key:099999999999");
  EXPECT_EQ(std::vector<uint8_t>(g.begin(), g.begin() + 42), std::vector<uint8_t>(f.begin(), f.begin() + 42));
}

TEST(MemcachedRequest, SameKeysAsTheExoRequests) {
  const Endpoint ep = mc_endpoint();
  const MemcachedRequestBuilder mc(ep, 20);
  const RequestBuilder exo(test_endpoint(), 1, 20, 0, 1500);
  std::vector<uint8_t> a(mc.max_frame_len()), e(exo.max_frame_len());
  for (uint64_t id : {uint64_t{0}, uint64_t{7}, uint64_t{123'456'789}}) {
    mc.write(a.data(), false, id, 1);
    exo.write(e.data(), false, id, 1);
    EXPECT_EQ(std::string(a.begin() + kMcKeyOffset, a.begin() + kMcKeyOffset + 20),
              std::string(e.begin() + wire::kMinFrame, e.begin() + wire::kMinFrame + 20));
  }
}

TEST(MemcachedRequest, NeedsTheServersMac) {
  Endpoint ep = mc_endpoint();
  ep.fixed_dst_mac = false;
  EXPECT_THROW(MemcachedRequestBuilder(ep, 16), std::invalid_argument);
  EXPECT_THROW(MemcachedRequestBuilder(mc_endpoint(), 251), std::invalid_argument);
}

TEST(MemcachedReply, ValueIsOk) {
  const auto p = payload(0xBEEF, "VALUE key:000000000042 7 5\r\nhello\r\nEND\r\n");
  const McReply r = parse_mc_reply(p);
  EXPECT_EQ(r.outcome, McOutcome::kOk);
  EXPECT_TRUE(r.has_id);
  EXPECT_EQ(r.request_id, 0xBEEF);
  EXPECT_EQ(std::string(r.key.begin(), r.key.end()), "key:000000000042");
  EXPECT_EQ(std::string(r.value.begin(), r.value.end()), "hello");
  // The data is counted, not scanned: it may hold \r\n and "END".
  EXPECT_EQ(outcome_of(payload(1, "VALUE k 0 9\r\nEND\r\nab\r\n\r\nEND\r\n")), McOutcome::kOk);
  EXPECT_EQ(outcome_of(payload(1, "VALUE k 4294967295 0\r\n\r\nEND\r\n")), McOutcome::kOk);
}

TEST(MemcachedReply, EndAloneIsNotFound) {
  const McReply r = parse_mc_reply(payload(7, "END\r\n"));
  EXPECT_EQ(r.outcome, McOutcome::kNotFound);
  EXPECT_EQ(r.request_id, 7);
  EXPECT_EQ(outcome_of(payload(7, "END\r\nEND\r\n")), McOutcome::kMalformed);
  EXPECT_EQ(outcome_of(payload(7, "END")), McOutcome::kMalformed);
}

TEST(MemcachedReply, ErrorLines) {
  for (const char* t : {"ERROR\r\n", "SERVER_ERROR out of memory storing object\r\n",
                        "CLIENT_ERROR bad command line format\r\n", "ERROR unknown command\r\n"})
    EXPECT_EQ(outcome_of(payload(3, t)), McOutcome::kError) << t;
  for (const char* t : {"ERRORS\r\n", "SERVER_ERROR no end of line", "SERVER_ERROR a\r\nb\r\n",
                        "CLIENT_ERROR\r\nEND\r\n", "SERVER_ERRORx\r\n", "error\r\n"})
    EXPECT_EQ(outcome_of(payload(3, t)), McOutcome::kMalformed) << t;
}

TEST(MemcachedReply, TruncatedOrGarbledIsMalformed) {
  for (const char* t : {"", "VALUE key:1 0 5\r\nhell\r\nEND\r\n",    // fewer data bytes than said
                        "VALUE key:1 0 5\r\nhello!\r\nEND\r\n",      // more
                        "VALUE key:1 0 5\r\nhello\r\n",              // no END
                        "VALUE key:1 0 5\r\nhello\r\nEND\r\nx",      // trailing bytes
                        "VALUE key:1 0 5 17\r\nhello\r\nEND\r\n",    // a cas: we never ask gets
                        "VALUE  0 5\r\nhello\r\nEND\r\n",            // no key
                        "VALUE key:1 -1 5\r\nhello\r\nEND\r\n",      // signed flags
                        "VALUE key:1 0 4294967296\r\nhello\r\nEND\r\n",  // > u32
                        "VALUE key:1 0 99999999999999999999\r\nx\r\nEND\r\n",
                        "VALUE key:1 0 5\nhello\r\nEND\r\n",         // bare \n
                        "STORED\r\n", "hello"})
    EXPECT_EQ(outcome_of(payload(3, t)), McOutcome::kMalformed) << t;
  const std::string long_key(251, 'k');
  EXPECT_EQ(outcome_of(payload(3, "VALUE " + long_key + " 0 1\r\nx\r\nEND\r\n")), McOutcome::kMalformed);
  EXPECT_EQ(outcome_of(payload(3, "VALUE " + long_key.substr(1) + " 0 1\r\nx\r\nEND\r\n")), McOutcome::kOk);
  // Shorter than the frame header: no request id at all.
  const McReply r = parse_mc_reply(bytes("\x01\x02\x00"));
  EXPECT_EQ(r.outcome, McOutcome::kMalformed);
  EXPECT_FALSE(r.has_id);
}

TEST(MemcachedReply, WrongHeaderOrMultiDatagramIsMalformed) {
  const std::string ok = "VALUE key:1 0 5\r\nhello\r\nEND\r\n";
  EXPECT_EQ(outcome_of(payload(9, ok, 0, 1)), McOutcome::kOk);
  EXPECT_EQ(outcome_of(payload(9, ok, 0, 2)), McOutcome::kMalformed);  // first of two
  EXPECT_EQ(outcome_of(payload(9, "x\r\nEND\r\n", 1, 2)), McOutcome::kMalformed);  // second of two
  EXPECT_EQ(outcome_of(payload(9, ok, 0, 0)), McOutcome::kMalformed);
  EXPECT_EQ(outcome_of(payload(9, ok, 1, 1)), McOutcome::kMalformed);
  const McReply r = parse_mc_reply(payload(9, ok, 0, 2));
  EXPECT_TRUE(r.has_id);  // the id is read, but nothing is booked for a partial reply
  EXPECT_TRUE(r.key.empty());
}

// Every strict prefix of a valid reply is malformed, and parsing it reads only its own bytes:
// each prefix sits in a heap block of exactly its size, so a read past it is a heap overflow
// under AddressSanitizer (make sanitize). The same for single-byte corruptions of each reply
// and for the frame parser over prefixes of a whole reply frame.
TEST(MemcachedReply, ParserNeverReadsPastTheBuffer) {
  const Endpoint ep = mc_endpoint();
  for (const std::string text : {"VALUE key:000000000042 0 5\r\nhello\r\nEND\r\n", "END\r\n",
                                 "ERROR\r\n", "SERVER_ERROR object too large for cache\r\n"}) {
    const std::vector<uint8_t> full = payload(0x1234, text);
    for (size_t n = 0; n <= full.size(); ++n) {
      std::unique_ptr<uint8_t[]> block(new uint8_t[n == 0 ? 1 : n]);
      std::memcpy(block.get(), full.data(), n);
      const McReply r = parse_mc_reply(std::span<const uint8_t>(block.get(), n));
      if (n < full.size()) EXPECT_EQ(r.outcome, McOutcome::kMalformed) << text << " cut to " << n;
      else EXPECT_NE(r.outcome, McOutcome::kMalformed) << text;
      if (r.outcome == McOutcome::kOk) {
        EXPECT_GE(r.value.data(), block.get());
        EXPECT_LE(r.value.data() + r.value.size(), block.get() + n);
      }
    }
    for (size_t i = 0; i < full.size(); ++i) {
      for (uint8_t x : {0x01, 0x20, 0x80, 0xFF}) {
        std::unique_ptr<uint8_t[]> block(new uint8_t[full.size()]);
        std::memcpy(block.get(), full.data(), full.size());
        block[i] ^= x;
        (void)parse_mc_reply(std::span<const uint8_t>(block.get(), full.size()));
      }
    }
    const std::vector<uint8_t> frame = reply_frame(ep, full);
    for (size_t n = 0; n <= frame.size(); ++n) {
      std::unique_ptr<uint8_t[]> block(new uint8_t[n == 0 ? 1 : n]);
      std::memcpy(block.get(), frame.data(), n);
      std::span<const uint8_t> p;
      const McFrame k = parse_mc_frame(std::span<const uint8_t>(block.get(), n), ep.src_port,
                                       kServerIp, kMemcachedPort, &p);
      EXPECT_EQ(k == McFrame::kReply, n == frame.size()) << n;
      if (k == McFrame::kReply) {
        EXPECT_EQ(p.size(), full.size());
      }
    }
  }
}

TEST(MemcachedFrame, AddressingLengthsAndChecksum) {
  const Endpoint ep = mc_endpoint();
  const auto p = payload(5, "END\r\n");
  std::span<const uint8_t> out;
  const auto kind = [&](const std::vector<uint8_t>& f) {
    return parse_mc_frame(f, ep.src_port, kServerIp, kMemcachedPort, &out);
  };
  auto good = reply_frame(ep, p);
  good.resize(good.size() + 6);  // Ethernet padding after the datagram is ignored
  ASSERT_EQ(kind(good), McFrame::kReply);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.end()), p);
  EXPECT_EQ(kind(reply_frame(ep, p, 11212)), McFrame::kOther);  // another source port
  EXPECT_EQ(kind(reply_frame(ep, p, kMemcachedPort, kServerIp + 1)), McFrame::kOther);
  auto to_other_port = reply_frame(ep, p);
  wire::header_of(to_other_port.data())->udp.dst_port.set(ep.src_port + 1);
  EXPECT_EQ(kind(to_other_port), McFrame::kOther);
  auto bad_sum = reply_frame(ep, p);
  bad_sum[wire::off::kIpTtl] ^= 1;
  EXPECT_EQ(kind(bad_sum), McFrame::kMalformed);
  auto long_udp = reply_frame(ep, p);
  wire::header_of(long_udp.data())->udp.length.set(200);
  EXPECT_EQ(kind(long_udp), McFrame::kMalformed);
  auto cut = reply_frame(ep, p);
  cut.resize(cut.size() - 1);  // shorter than the IPv4 total length
  EXPECT_EQ(kind(cut), McFrame::kMalformed);
  auto first_fragment = reply_frame(ep, p);
  wire::FrameHeader* fh = wire::header_of(first_fragment.data());
  fh->ip.frag.set(0x2000);  // more fragments
  fh->ip.checksum.set(0);
  fh->ip.checksum.set(wire::ipv4_checksum(first_fragment.data() + wire::kEthLen));
  EXPECT_EQ(kind(first_fragment), McFrame::kMalformed);
  fh->ip.frag.set(0x0010);  // a later fragment: no UDP header to judge
  EXPECT_EQ(kind(first_fragment), McFrame::kOther);
}

TEST(MemcachedSeq, RequestIdMapsToTheMostRecentSeq) {
  uint32_t s = 0;
  ASSERT_TRUE(seq_for_request_id(1000, 1000, 1001, &s));
  EXPECT_EQ(s, 1000u);
  ASSERT_TRUE(seq_for_request_id(0, 1000, 1001, &s));
  EXPECT_EQ(s, 0u);
  EXPECT_FALSE(seq_for_request_id(1001, 1000, 1001, &s));  // would be 65,535 back: never sent
  // Past 65,536 requests, an id names the newest seq carrying it.
  ASSERT_TRUE(seq_for_request_id(5, 0x00030005, 1 << 20, &s));
  EXPECT_EQ(s, 0x00030005u);
  ASSERT_TRUE(seq_for_request_id(6, 0x00030005, 1 << 20, &s));
  EXPECT_EQ(s, 0x00020006u);
  ASSERT_TRUE(seq_for_request_id(0xFFFF, 0x00030005, 1 << 20, &s));
  EXPECT_EQ(s, 0x0002FFFFu);
  // Across the 32-bit wrap of the seq.
  ASSERT_TRUE(seq_for_request_id(0xFFFF, 3, uint64_t{1} << 33, &s));
  EXPECT_EQ(s, 0xFFFFFFFFu);
  ASSERT_TRUE(seq_for_request_id(0xFFF0, 3, uint64_t{1} << 33, &s));
  EXPECT_EQ(s, 0xFFFFFFF0u);
}

struct McFixture {
  Endpoint ep = mc_endpoint(40000);
  SendRing ring;
  Series series{kStart, 10};
  ReplyHandler handler{ep, 0, ring, series, Protocol::kMemcached};
  explicit McFixture(uint64_t window = 1 << 16) : ring(window) {}
  const RxCounters& c() const { return handler.counters(); }
  void reply(uint32_t seq, const std::string& text, uint64_t at = kStart + 1000) {
    handler.handle(reply_frame(ep, payload(mc_request_id(seq), text)), at);
  }
};

TEST(MemcachedHandler, BooksValueEndAndErrors) {
  McFixture f;
  for (uint32_t s = 0; s < 5; ++s) f.ring.on_send(s, kStart + s);
  f.reply(0, "VALUE key:000000000042 0 5\r\nhello\r\nEND\r\n", kStart + 250'000);
  f.reply(1, "END\r\n");
  f.reply(2, "SERVER_ERROR out of memory\r\n");
  f.reply(3, "VALUE key:1 0 5\r\nhel");  // malformed: request 3 stays unanswered
  f.reply(0, "VALUE key:000000000042 0 5\r\nhello\r\nEND\r\n");  // duplicate
  EXPECT_EQ(f.c().answered, 3u);
  EXPECT_EQ(f.c().malformed, 1u);
  EXPECT_EQ(f.c().duplicates, 1u);
  const auto rows = f.series.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].answered, 3u);
  EXPECT_EQ(rows[0].not_found, 1u);
  EXPECT_EQ(rows[0].errors, 1u);
  EXPECT_EQ(rows[0].from_cache, 0u);
  // An id no request carried yet, and any reply before the first request: unknown.
  f.reply(9, "END\r\n");
  EXPECT_EQ(f.c().unknown, 1u);
  McFixture empty;
  empty.reply(0, "END\r\n");
  EXPECT_EQ(empty.c().unknown, 1u);
}

TEST(MemcachedHandler, NotOursIsOther) {
  McFixture f;
  f.ring.on_send(0, kStart);
  const auto p = payload(0, "END\r\n");
  auto other_mac = reply_frame(f.ep, p);
  other_mac[0] ^= 2;
  f.handler.handle(other_mac, kStart + 1);
  f.handler.handle(reply_frame(f.ep, p, 11212), kStart + 1);  // another server port
  auto exo_reply = testing::reply_for(RequestBuilder(f.ep, 0, 16, 0, 1500), 0);  // an exo reply
  f.handler.handle(exo_reply, kStart + 1);
  EXPECT_EQ(f.c().other, 3u);
  EXPECT_EQ(f.c().answered, 0u);
  f.handler.handle(reply_frame(f.ep, p), kStart + 1);
  EXPECT_EQ(f.c().answered, 1u);
}

// Window 32,768 (the plan's for a slow rate): a reply 40,000 requests late finds its seq's slot
// reused (late). Beyond 65,536 the id names a newer request, which takes the old reply: the old
// request counts as lost, and the newer one's own reply then counts as a duplicate.
TEST(MemcachedHandler, LateAndTooOldReplies) {
  McFixture f(1 << 15);
  for (uint32_t s = 0; s < 40'000; ++s) f.ring.on_send(s, kStart + s);
  f.reply(100, "END\r\n");
  EXPECT_EQ(f.c().late, 1u);
  f.reply(39'999, "END\r\n");
  EXPECT_EQ(f.c().answered, 1u);
  for (uint32_t s = 40'000; s < 70'000; ++s) f.ring.on_send(s, kStart + s);
  f.reply(100, "END\r\n");  // id 100: now seq 65,636's
  EXPECT_EQ(f.c().answered, 2u);
  f.reply(65'636, "END\r\n");
  EXPECT_EQ(f.c().duplicates, 1u);
}

TEST(MemcachedHandler, SeqWrapsAround) {
  McFixture f;
  for (uint32_t s = 0xFFFFFFF0; s != 0x10; ++s) f.ring.on_send(s, kStart);
  f.reply(0xFFFFFFF8, "END\r\n");
  f.reply(0x0000000F, "END\r\n");
  EXPECT_EQ(f.c().answered, 2u);
  f.reply(0x00000010, "END\r\n");  // not sent yet
  EXPECT_EQ(f.c().unknown, 1u);
}

// A memcached on the far end of a socketpair: answers VALUE for even key ids, END for odd ones,
// drops every 10th request (by request id), and answers every 7th twice.
struct FakeMemcached {
  Endpoint client;
  uint64_t requests = 0, dropped = 0, duplicated = 0, values = 0, bad = 0;

  void serve(std::vector<uint8_t>& buf, size_t n, int fd) {
    ++requests;
    if (n < kMcTextOffset) {
      ++bad;
      return;
    }
    const std::string text(buf.begin() + kMcTextOffset, buf.begin() + static_cast<ptrdiff_t>(n));
    if (n != 72 || text.rfind("get key:000000000", 0) != 0 || text.substr(text.size() - 2) != "\r\n") {
      ++bad;
      return;
    }
    const uint16_t id = reinterpret_cast<const McUdpHeader*>(buf.data() + kMcPayloadOffset)->request_id.get();
    if (id % 10 == 9) {
      ++dropped;
      return;
    }
    const std::string key = text.substr(4, 16);
    const bool found = (key.back() - '0') % 2 == 0;
    values += found;
    const auto f = reply_frame(client, payload(id, found ? "VALUE " + key + " 0 2\r\nhi\r\nEND\r\n" : "END\r\n"));
    const int copies = id % 7 == 0 ? 2 : 1;
    duplicated += copies - 1;
    for (int i = 0; i < copies; ++i)
      if (send(fd, f.data(), f.size(), 0) < 0) ADD_FAILURE() << "send: " << errno;
  }
};

TEST(MemcachedEndToEnd, OverASocketpair) {
  const Endpoint ep = mc_endpoint();
  FakeMemcached server{ep};
  const MemcachedRequestBuilder builder(ep, 16);
  SendRing ring(1 << 16);
  Series series(mono_ns(), 4);
  ReplyHandler handler(ep, 0, ring, series, Protocol::kMemcached);
  SenderConfig cfg;
  cfg.rate = 4000;
  cfg.duration_ns = kSec / 2;
  cfg.keys = 1000;
  cfg.alpha = 0.99;
  cfg.seed = 5;
  cfg.catch_up_s = 1.0;
  const RigResult rig = run_over_socketpair(cfg, builder, ring, series, handler,
                                            [&](auto& buf, size_t n, int fd) { server.serve(buf, n, fd); });
  const TxStats& st = rig.tx;
  const std::string& rx_error = rig.rx_error;

  EXPECT_GE(st.sent, 1000u);
  EXPECT_EQ(server.requests, st.sent);
  EXPECT_EQ(server.bad, 0u);
  const RxCounters& c = handler.counters();
  EXPECT_EQ(c.answered, st.sent - server.dropped);
  EXPECT_EQ(c.duplicates, server.duplicated);
  EXPECT_EQ(c.foreign + c.malformed + c.late + c.unknown + c.errors + c.other, 0u) << rx_error;
  uint64_t not_found = 0, lost = 0;
  for (const SecondRow& r : series.rows()) {
    not_found += r.not_found;
    lost += r.lost;
  }
  EXPECT_EQ(not_found, c.answered - server.values);
  EXPECT_EQ(lost, server.dropped);
}

}  // namespace
}  // namespace exo::loadgen
