// --protocol reflect: our own request, macswapped (dpdk-testpmd --forward-mode=macswap), counts
// as its answer; a frame that was not swapped, a reply, a foreign client_id or a source MAC the
// request was not sent to does not. Requests with a fixed --dst-mac. The TX and RX loops end to
// end against a fake macswap reflector over a socketpair.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "keyhash.h"
#include "loadgen/clock.h"
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
constexpr uint32_t kClientId = 0xABCD0001;

// What macswap does to a frame: the two Ethernet addresses trade places, nothing else changes.
void macswap(uint8_t* f) { std::swap_ranges(f, f + 6, f + 6); }

struct Fixture {
  Endpoint ep;
  RequestBuilder builder;
  SendRing ring{8};
  Series series{kStart, 10};
  ReplyHandler handler;
  explicit Fixture(const Endpoint& e = test_endpoint(40000))
      : ep(e), builder(ep, kClientId, 16, 64, 1500),
        handler(ep, kClientId, ring, series, Protocol::kReflect) {}
  const RxCounters& c() const { return handler.counters(); }
  std::vector<uint8_t> request(uint32_t seq, bool put = false, uint64_t key = 42) const {
    std::vector<uint8_t> f(builder.frame_len(put));
    builder.write(f.data(), put, key, seq);
    return f;
  }
  std::vector<uint8_t> reflected(uint32_t seq, bool put = false) const {
    auto f = request(seq, put);
    macswap(f.data());
    return f;
  }
};

TEST(Reflect, AcceptsAMacswappedRequest) {
  Fixture f;
  f.ring.on_send(3, kStart + kSec / 2);
  f.ring.on_send(4, kStart + kSec / 2);
  f.handler.handle(f.reflected(3), kStart + kSec / 2 + 40'000);  // 40 us later
  f.handler.handle(f.reflected(4, /*put=*/true), kStart + kSec / 2 + 40'000);
  EXPECT_EQ(f.c().answered, 2u);
  const auto rows = f.series.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].answered, 2u);
  EXPECT_EQ(rows[0].not_found + rows[0].errors + rows[0].from_cache, 0u);
  ASSERT_TRUE(rows[0].p50_us.has_value());
  EXPECT_NEAR(*rows[0].p50_us, 40.0, 0.5);
  // Matched as any reply: a second copy is a duplicate, a seq never sent unknown, an old one late.
  f.handler.handle(f.reflected(3), kStart + kSec);
  EXPECT_EQ(f.c().duplicates, 1u);
  f.handler.handle(f.reflected(5), kStart + kSec);
  EXPECT_EQ(f.c().unknown, 1u);
  for (uint32_t s = 5; s < 20; ++s) f.ring.on_send(s, kStart + kSec);
  f.handler.handle(f.reflected(6), kStart + kSec);  // window 8: slot reused by 14
  EXPECT_EQ(f.c().late, 1u);
}

TEST(Reflect, RejectsWhatIsNotOurSwappedRequest) {
  Fixture f;
  f.ring.on_send(1, kStart);
  // Not swapped: still addressed to the key-hash MAC.
  f.handler.handle(f.request(1), kStart + 10);
  EXPECT_EQ(f.c().other, 1u);
  // Another generator's request (another client_id), swapped back to our MAC.
  const RequestBuilder other(f.ep, 0x11111111, 16, 64, 1500);
  std::vector<uint8_t> foreign(other.frame_len(false));
  other.write(foreign.data(), false, 42, 1);
  macswap(foreign.data());
  f.handler.handle(foreign, kStart + 10);
  EXPECT_EQ(f.c().foreign, 1u);
  // To our MAC and from our port, but from a MAC the request was not sent to.
  auto wrong_src = f.reflected(1);
  wrong_src[wire::off::kEthSrc + 5] ^= 1;
  f.handler.handle(wrong_src, kStart + 10);
  // A node's reply to it, turned around to come from our port: a reply is no reflection.
  const auto req = f.request(1);
  auto reply = testing::reply_to(req);
  wire::FrameHeader* h = wire::header_of(reply.data());
  h->udp.src_port.set(f.ep.src_port);
  std::copy(req.begin(), req.begin() + 6, h->eth.src);
  f.handler.handle(reply, kStart + 10);
  // Broken on the way: the IPv4 header checksum no longer holds.
  auto broken = f.reflected(1);
  broken[wire::off::kIpTtl] ^= 1;
  f.handler.handle(broken, kStart + 10);
  EXPECT_EQ(f.c().malformed, 3u);
  // Another generator's port on the same MAC: not ours.
  const RequestBuilder other_port(test_endpoint(40001), kClientId, 16, 64, 1500);
  std::vector<uint8_t> op(other_port.frame_len(false));
  other_port.write(op.data(), false, 42, 1);
  macswap(op.data());
  f.handler.handle(op, kStart + 10);
  EXPECT_EQ(f.c().other, 2u);
  EXPECT_EQ(f.c().answered, 0u);
  f.handler.handle(f.reflected(1), kStart + 10);  // still answerable
  EXPECT_EQ(f.c().answered, 1u);
}

TEST(Reflect, WithAFixedDestinationMac) {
  Endpoint ep = test_endpoint(40000);
  ep.fixed_dst_mac = true;
  ep.dst_mac = {0x02, 0x00, 0x00, 0x00, 0x0b, 0x02};
  Fixture f(ep);
  for (uint64_t key : {1, 2, 99'999}) {  // every request goes to the one MAC
    const auto r = f.request(0, key % 2 == 0, key);
    EXPECT_TRUE(std::equal(ep.dst_mac.begin(), ep.dst_mac.end(), r.begin()));
    wire::FrameView v{};
    EXPECT_EQ(wire::parse(r, v), wire::ParseError::kNone);
    EXPECT_EQ(v.seq, 0u);
  }
  f.ring.on_send(2, kStart);
  f.handler.handle(f.reflected(2), kStart + 10);
  EXPECT_EQ(f.c().answered, 1u);
  // A reflection of a key-hash-addressed request is not one of this run's.
  f.ring.on_send(3, kStart);
  Fixture hashed;
  auto r = hashed.reflected(3);
  f.handler.handle(r, kStart + 10);
  EXPECT_EQ(f.c().malformed, 1u);
}

// macswap on the far end of a socketpair: swaps and returns every frame but every 10th seq.
struct FakeReflector {
  uint64_t frames = 0, dropped = 0;

  void serve(std::vector<uint8_t>& buf, size_t n, int fd) {
    if (n < wire::kMinFrame) return;
    ++frames;
    if (wire::header_of(buf.data())->exo.seq.get() % 10 == 9) {
      ++dropped;
      return;
    }
    macswap(buf.data());
    if (send(fd, buf.data(), n, 0) < 0) ADD_FAILURE() << "send: " << errno;
  }
};

TEST(Reflect, EndToEndOverASocketpair) {
  FakeReflector reflector;
  const Endpoint ep = test_endpoint();
  const RequestBuilder builder(ep, kClientId, 16, 100, 1500);
  SendRing ring(8192);
  Series series(mono_ns(), 4);
  ReplyHandler handler(ep, kClientId, ring, series, Protocol::kReflect);
  SenderConfig cfg;
  cfg.rate = 4000;
  cfg.duration_ns = kSec / 2;
  cfg.batch = 1;
  cfg.keys = 1000;
  cfg.alpha = 0.99;
  cfg.seed = 9;
  cfg.get_ratio = 0.9;  // PUTs reflect as well
  cfg.catch_up_s = 1.0;
  const RigResult rig = run_over_socketpair(cfg, builder, ring, series, handler,
                                            [&](auto& buf, size_t n, int fd) { reflector.serve(buf, n, fd); });
  const TxStats& st = rig.tx;
  const std::string& rx_error = rig.rx_error;

  EXPECT_GE(st.sent, 1000u);
  EXPECT_EQ(reflector.frames, st.sent);
  const RxCounters& c = handler.counters();
  EXPECT_EQ(c.answered, st.sent - reflector.dropped);
  EXPECT_EQ(c.foreign + c.malformed + c.late + c.unknown + c.errors + c.other + c.duplicates, 0u)
      << rx_error;
}

}  // namespace
}  // namespace exo::loadgen
