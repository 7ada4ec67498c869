// SendRing and ReplyHandler: answered once, duplicates, late beyond the window, foreign
// client ids, FROM_CACHE / NOT_FOUND / ERROR booking, malformed and unrelated frames.
#include "loadgen/reply_handler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "loadgen/send_ring.h"
#include "loadgen_test_util.h"

namespace exo::loadgen {
namespace {

using testing::reply_for;
using testing::test_endpoint;

constexpr uint64_t kSec = 1'000'000'000;
constexpr uint64_t kStart = 100 * kSec;

struct Fixture {
  Endpoint ep = test_endpoint(40000);
  RequestBuilder builder{ep, 0xABCD0001, 16, 64, 1500};
  SendRing ring{8};
  Series series{kStart, 10};
  ReplyHandler handler{ep, 0xABCD0001, ring, series};
  const RxCounters& c() const { return handler.counters(); }
};

TEST(SendRing, WindowIsAPowerOfTwo) {
  EXPECT_EQ(SendRing(0).window(), 2u);
  EXPECT_EQ(SendRing(8).window(), 8u);
  EXPECT_EQ(SendRing(9).window(), 16u);
  EXPECT_EQ(SendRing(150'001).window(), 262'144u);
}

TEST(SendRing, MatchesOnceThenDuplicateLateOrUnknown) {
  SendRing ring(4);
  uint64_t t = 0;
  EXPECT_EQ(ring.match(0, &t), SendRing::Match::kUnknown);  // nothing sent yet
  ring.on_send(0, 1000);
  ring.on_send(1, 2000);
  EXPECT_EQ(ring.match(1, &t), SendRing::Match::kAnswered);
  EXPECT_EQ(t, 2000u);
  EXPECT_EQ(ring.match(1, &t), SendRing::Match::kDuplicate);
  EXPECT_EQ(ring.match(5, &t), SendRing::Match::kUnknown);  // same slot as 1, never sent
  for (uint32_t s = 2; s <= 4; ++s) ring.on_send(s, s * 1000);  // 4 reuses 0's slot
  EXPECT_EQ(ring.match(0, &t), SendRing::Match::kLate);
  EXPECT_EQ(ring.match(4, &t), SendRing::Match::kAnswered);
  EXPECT_EQ(t, 4000u);
  ring.on_send(6, 6000);
  ring.cancel(6);  // the frame never left
  EXPECT_EQ(ring.match(6, &t), SendRing::Match::kUnknown);
}

TEST(SendRing, SeqWrapsAround) {
  SendRing ring(4);
  uint64_t t = 0;
  for (uint32_t s = 0xFFFFFFFE; s != 3; ++s) ring.on_send(s, s);  // ..FE, ..FF, 0, 1, 2
  EXPECT_EQ(ring.match(0xFFFFFFFE, &t), SendRing::Match::kLate);  // slot reused by 2
  EXPECT_EQ(ring.match(0xFFFFFFFF, &t), SendRing::Match::kAnswered);
  EXPECT_EQ(ring.match(2, &t), SendRing::Match::kAnswered);
  EXPECT_EQ(t, 2u);
}

// One writer racing one matcher over a small window: every match that succeeds must return the
// send time written with that very seq, and no request may be answered twice.
TEST(SendRing, ConcurrentSendAndMatchNeverPairsTheWrongTime) {
  SendRing ring(64);
  constexpr uint32_t kN = 400'000;
  std::atomic<uint32_t> head{0}, matched_to{0};
  std::thread tx([&] {
    for (uint32_t s = 0; s < kN; ++s) {
      // Run up to 80 ahead of the matcher, past the 64-slot window, so that the slot it
      // is matching is often being reused under it (also when both threads share one core).
      while (s > matched_to.load(std::memory_order_relaxed) + 80) std::this_thread::yield();
      ring.on_send(s, uint64_t{s} * 10 + 7);
      head.store(s + 1, std::memory_order_release);
    }
  });
  uint64_t answered = 0, late = 0, wrong = 0;
  std::vector<uint8_t> seen(kN, 0);
  for (uint32_t next = 0; next < kN; ++next) {
    while (head.load(std::memory_order_acquire) <= next) std::this_thread::yield();
    uint64_t t = 0;
    switch (ring.match(next, &t)) {
      case SendRing::Match::kAnswered:
        ++answered;
        if (t != uint64_t{next} * 10 + 7 || seen[next]++) ++wrong;
        break;
      case SendRing::Match::kLate: ++late; break;
      default: ++wrong; break;  // every seq was sent, once: never unknown or duplicate
    }
    matched_to.store(next + 1, std::memory_order_relaxed);
  }
  tx.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(answered + late, kN);
  EXPECT_GT(answered, 100u) << late << " late";  // how many win depends on scheduling
}

TEST(ReplyHandler, BooksTheFirstReplyAndIgnoresDuplicates) {
  Fixture f;
  f.ring.on_send(3, kStart + kSec / 2);
  const auto reply = reply_for(f.builder, 3);
  f.handler.handle(reply, kStart + kSec / 2 + 250'000);  // 250 us later
  f.handler.handle(reply, kStart + kSec / 2 + 900'000);  // duplicate
  EXPECT_EQ(f.c().answered, 1u);
  EXPECT_EQ(f.c().duplicates, 1u);
  EXPECT_EQ(f.series.answered(), 1u);
  const auto rows = f.series.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].answered, 1u);
  EXPECT_EQ(rows[0].rx, 1u);
  ASSERT_TRUE(rows[0].p50_us.has_value());
  EXPECT_NEAR(*rows[0].p50_us, 250.0, 1.0);
}

TEST(ReplyHandler, LateBeyondTheWindowIsNotAnswered) {
  Fixture f;  // window 8
  for (uint32_t s = 0; s < 9; ++s) f.ring.on_send(s, kStart + s);
  f.handler.handle(reply_for(f.builder, 0), kStart + 1000);
  EXPECT_EQ(f.c().late, 1u);
  EXPECT_EQ(f.c().answered, 0u);
  f.handler.handle(reply_for(f.builder, 100), kStart + 1000);  // never sent
  EXPECT_EQ(f.c().unknown, 1u);
  EXPECT_EQ(f.series.answered(), 0u);
}

TEST(ReplyHandler, ForeignClientIdIsCountedNotAnswered) {
  Fixture f;
  f.ring.on_send(1, kStart);
  const RequestBuilder other(f.ep, 0x11111111, 16, 64, 1500);
  f.handler.handle(reply_for(other, 1), kStart + 10);
  EXPECT_EQ(f.c().foreign, 1u);
  EXPECT_EQ(f.c().answered, 0u);
  f.handler.handle(reply_for(f.builder, 1), kStart + 10);  // still answerable
  EXPECT_EQ(f.c().answered, 1u);
}

TEST(ReplyHandler, StatusAndFromCacheGoToTheSendSecond) {
  Fixture f;
  f.ring.on_send(0, kStart + 100);          // second 0
  f.ring.on_send(1, kStart + kSec + 100);   // second 1
  f.ring.on_send(2, kStart + kSec + 200);   // second 1
  f.ring.on_send(3, kStart + kSec + 300);   // second 1
  f.handler.handle(reply_for(f.builder, 0, wire::kOk, wire::kFromCache), kStart + 2 * kSec);
  f.handler.handle(reply_for(f.builder, 1, wire::kNotFound), kStart + 2 * kSec);
  f.handler.handle(reply_for(f.builder, 2, wire::kBusy), kStart + 2 * kSec);
  f.handler.handle(reply_for(f.builder, 3, wire::kOk, wire::kForwarded, true), kStart + 2 * kSec);
  const auto rows = f.series.rows();
  ASSERT_EQ(rows.size(), 3u);  // second 2 holds the arrivals
  EXPECT_EQ(rows[0].answered, 1u);
  EXPECT_EQ(rows[0].from_cache, 1u);
  EXPECT_EQ(rows[1].answered, 3u);
  EXPECT_EQ(rows[1].from_cache, 0u);
  EXPECT_EQ(rows[1].not_found, 1u);
  EXPECT_EQ(rows[1].errors, 1u);
  EXPECT_EQ(rows[0].rx + rows[1].rx, 0u);
  EXPECT_EQ(rows[2].rx, 4u);
}

TEST(ReplyHandler, MalformedAndUnrelatedFrames) {
  Fixture f;
  f.ring.on_send(5, kStart);
  auto good = reply_for(f.builder, 5);

  auto truncated = good;
  truncated.resize(good.size() - 3);
  f.handler.handle(truncated, kStart + 1);
  auto bad_magic = good;
  bad_magic[wire::off::kMagic] ^= 0xFF;
  f.handler.handle(bad_magic, kStart + 1);
  auto bad_ip_checksum = good;
  bad_ip_checksum[wire::off::kIpTtl] ^= 1;  // header changed, its checksum not: not a reply
  f.handler.handle(bad_ip_checksum, kStart + 1);
  std::vector<uint8_t> request(f.builder.frame_len(false));
  f.builder.write(request.data(), false, 1, 5);
  std::copy(f.ep.mac.begin(), f.ep.mac.end(), request.begin());  // a request to our MAC
  wire::header_of(request.data())->udp.dst_port.set(f.ep.src_port);  // ... and our port
  wire::FrameView rv{};
  ASSERT_EQ(wire::parse(request, rv), wire::ParseError::kNone);
  f.handler.handle(request, kStart + 1);
  EXPECT_EQ(f.c().malformed, 4u);

  auto other_mac = good;
  other_mac[5] ^= 1;
  f.handler.handle(other_mac, kStart + 1);
  auto other_port = good;
  other_port[wire::off::kUdpDst + 1] ^= 1;  // UDP dst port, low byte
  f.handler.handle(other_port, kStart + 1);
  std::vector<uint8_t> arp(good.begin(), good.begin() + 42);
  arp[12] = 0x08;
  arp[13] = 0x06;
  f.handler.handle(arp, kStart + 1);
  f.handler.handle(std::span<const uint8_t>(good.data(), 3), kStart + 1);
  EXPECT_EQ(f.c().other, 4u);

  EXPECT_EQ(f.c().answered, 0u);
  f.handler.handle(good, kStart + 1);
  EXPECT_EQ(f.c().answered, 1u);
  EXPECT_EQ(f.c().frames, 9u);
}

}  // namespace
}  // namespace exo::loadgen
