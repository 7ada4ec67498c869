// RequestEngine (request_engine.h) driven by hand with a fake clock: the window, resends under
// the same seq, BUSY under a new seq after the backoff, strays, the give-up completion, and the
// deadlines an event loop sleeps on. pipeline_test.cc runs the same engine through Pipeline.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "request_engine.h"
#include "tests/reply_builder.h"
#include "wire.h"

namespace exo::client {
namespace {

using namespace std::chrono_literals;
using Time = RequestEngine::Time;
using Payload = std::vector<uint8_t>;

const Time t0 = Time{} + 1000s;

Endpoint ep() {
  Endpoint e;
  e.mac = {2, 0, 0, 0, 0, 1};
  e.ip = 0x0A000001;
  e.port = 40000;
  return e;
}

wire::FrameView view(std::span<const uint8_t> frame) {
  wire::FrameView v{};
  EXPECT_EQ(wire::parse(frame, v), wire::ParseError::kNone);
  return v;
}

// The UDP payload a node would answer `frame` with.
Payload reply_to(std::span<const uint8_t> frame, uint8_t status, std::string value = "", uint8_t flags = 0) {
  return testing::reply_payload(view(frame), status, value, flags);
}

// Copies, since the engine's spans die at its next call.
std::vector<Payload> send(RequestEngine& e, Time now) {
  std::vector<Payload> out;
  for (auto f : e.frames_to_send(now)) out.emplace_back(f.begin(), f.end());
  return out;
}

EngineOptions opts(size_t window, int retries = 2) {
  EngineOptions o;
  o.window = window;
  o.timeout_s = 0.1;
  o.retries = retries;
  o.busy_backoff_s = 0.01;
  return o;
}

TEST(RequestEngine, TheWindowBoundsFramesAndRefillsAsRepliesCome) {
  RequestEngine e(ep(), 7, opts(2));
  for (int i = 0; i < 5; ++i) e.submit(wire::kGet, "k" + std::to_string(i), "", i);
  auto first = send(e, t0);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(e.in_flight(), 2u);
  EXPECT_EQ(e.queued(), 3u);
  EXPECT_TRUE(send(e, t0 + 1ms).empty()) << "window full";
  std::vector<Completion> done;
  e.on_reply(reply_to(first[1], wire::kOk, "v1", wire::kFromCache), t0 + 2ms, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_EQ(done[0].status, wire::kOk);
  EXPECT_EQ(done[0].value, "v1");
  EXPECT_EQ(done[0].flags, wire::kFromCache);
  EXPECT_EQ(done[0].attempts, 1);
  EXPECT_NEAR(done[0].latency_s, 0.002, 1e-9);
  EXPECT_EQ(e.next_deadline(), Time{}) << "a queued request fits now";
  auto second = send(e, t0 + 2ms);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(view(second[0]).seq, 3u) << "seqs in send order";
  EXPECT_EQ(e.stats().sent, 3u);
}

TEST(RequestEngine, ALostRequestIsResentUnderTheSameSeqAtItsDeadline) {
  RequestEngine e(ep(), 7, opts(8));
  e.submit(wire::kPut, "k", "v", 42);
  auto f = send(e, t0);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(e.next_deadline(), t0 + 100ms);
  EXPECT_TRUE(send(e, t0 + 99ms).empty());
  auto again = send(e, t0 + 100ms);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], f[0]) << "byte for byte the same frame: same (client_id, seq)";
  EXPECT_EQ(e.stats().resent, 1u);
  std::vector<Completion> done;
  e.on_reply(reply_to(again[0], wire::kOk), t0 + 150ms, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 42u);
  EXPECT_EQ(done[0].attempts, 2);
  EXPECT_TRUE(e.idle());
  EXPECT_EQ(e.next_deadline(), std::nullopt);
}

TEST(RequestEngine, NoReplyAfterEveryResendCompletesWithMinusOne) {
  RequestEngine e(ep(), 7, opts(8, 2));
  e.submit(wire::kPut, "k", "v", 5);
  std::vector<Completion> done;
  EXPECT_EQ(send(e, t0).size(), 1u);
  for (int i = 1; i <= 2; ++i) {
    e.expire(t0 + i * 100ms, done);
    EXPECT_TRUE(done.empty());
    EXPECT_EQ(send(e, t0 + i * 100ms).size(), 1u) << "resend " << i;
  }
  e.expire(t0 + 299ms, done);
  EXPECT_TRUE(done.empty());
  e.expire(t0 + 300ms, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 5u);
  EXPECT_EQ(done[0].status, -1);
  EXPECT_EQ(done[0].attempts, 3);
  EXPECT_TRUE(send(e, t0 + 300ms).empty());
  EXPECT_TRUE(e.idle());
  EXPECT_EQ(e.stats().timeouts, 1u);
}

TEST(RequestEngine, GivingUpFreesItsWindowSlot) {
  RequestEngine e(ep(), 7, opts(1, 0));
  e.submit(wire::kGet, "a", "", 1);
  e.submit(wire::kGet, "b", "", 2);
  EXPECT_EQ(send(e, t0).size(), 1u);
  auto next = send(e, t0 + 100ms);  // "a" gives up (retries 0), "b" takes its slot
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(std::string(view(next[0]).key.begin(), view(next[0]).key.end()), "b");
  std::vector<Completion> done;
  e.expire(t0 + 100ms, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 1u);
}

TEST(RequestEngine, BusyIsRetriedUnderANewSeqAfterTheBackoff) {
  RequestEngine e(ep(), 7, opts(8, 4));
  e.submit(wire::kPut, "k", "v", 9);
  auto f = send(e, t0);
  std::vector<Completion> done;
  e.on_reply(reply_to(f[0], wire::kBusy), t0 + 1ms, done);
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(e.in_flight(), 1u) << "a backoff holds its window slot";
  EXPECT_EQ(e.next_deadline(), t0 + 21ms) << "2 x busy_backoff_s after the BUSY";
  EXPECT_TRUE(send(e, t0 + 20ms).empty());
  auto retry = send(e, t0 + 21ms);
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_NE(view(retry[0]).seq, view(f[0]).seq);
  EXPECT_EQ(view(retry[0]).seq, view(f[0]).seq + 1);
  // A late copy of the BUSY id's answer is a stray now.
  e.on_reply(reply_to(f[0], wire::kOk), t0 + 22ms, done);
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(e.stats().stray_replies, 1u);
  // The second BUSY waits twice as long.
  e.on_reply(reply_to(retry[0], wire::kBusy), t0 + 30ms, done);
  EXPECT_EQ(e.next_deadline(), t0 + 70ms);
  auto third = send(e, t0 + 70ms);
  ASSERT_EQ(third.size(), 1u);
  e.on_reply(reply_to(third[0], wire::kOk), t0 + 71ms, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, wire::kOk);
  EXPECT_EQ(done[0].attempts, 3);
  EXPECT_EQ(e.stats().busy_retries, 2u);
  EXPECT_EQ(e.stats().sent, 3u);
}

// Past the last retry a BUSY is still retried until busy_budget_s after the first send (a
// chain's hand-over answers GETs BUSY for a little over 1 s); after that it is the outcome.
TEST(RequestEngine, ABusyAfterTheLastRetryIsRetriedUntilTheBusyBudgetThenIsTheOutcome) {
  RequestEngine e(ep(), 7, opts(8, 0));
  e.submit(wire::kPut, "k", "v", 3);
  auto f = send(e, t0);
  std::vector<Completion> done;
  e.on_reply(reply_to(f[0], wire::kBusy), t0 + 1ms, done);
  EXPECT_TRUE(done.empty());  // within the budget: retried under a new seq
  auto g = send(e, t0 + 1s);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_NE(reply_to(g[0], wire::kBusy), reply_to(f[0], wire::kBusy));  // another seq
  const auto past = t0 + std::chrono::duration_cast<RequestEngine::Clock::duration>(
                             std::chrono::duration<double>(EngineOptions{}.busy_budget_s + 0.1));
  e.on_reply(reply_to(g[0], wire::kBusy), past, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, wire::kBusy);
}

TEST(RequestEngine, StraysAreCountedAndIgnored) {
  RequestEngine e(ep(), 7, opts(8));
  e.submit(wire::kGet, "k", "", 1);
  auto f = send(e, t0);
  std::vector<Completion> done;
  Payload other_client = reply_to(f[0], wire::kOk);
  reinterpret_cast<wire::ExoHeader*>(other_client.data())->client_id.set(8);
  Payload wrong_key = reply_to(f[0], wire::kOk);
  wrong_key[wire::kHdrLen] ^= 1;
  Payload not_a_reply = reply_to(f[0], wire::kOk);
  reinterpret_cast<wire::ExoHeader*>(not_a_reply.data())->opcode = wire::kGet;
  Payload short_one = reply_to(f[0], wire::kOk);
  short_one.pop_back();
  for (const Payload& p : {other_client, wrong_key, not_a_reply, short_one, Payload(3, 0xFF)})
    e.on_reply(p, t0 + 1ms, done);
  EXPECT_TRUE(done.empty());
  e.on_reply(reply_to(f[0], wire::kOk, "yes"), t0 + 1ms, done);
  e.on_reply(reply_to(f[0], wire::kOk, "dup"), t0 + 1ms, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].value, "yes");
  EXPECT_EQ(e.stats().stray_replies, 6u);
  EXPECT_EQ(e.stats().replies, 1u);
}

TEST(RequestEngine, FramesCarryTheKeyHashAndTheEndpoint) {
  RequestEngine e(ep(), 7, opts(8));
  e.submit(wire::kGet, "key", "", 1);
  e.submit(wire::kDelete, "key", "", 2);
  auto f = send(e, t0);
  ASSERT_EQ(f.size(), 2u);
  const uint64_t h = key_hash(std::span(reinterpret_cast<const uint8_t*>("key"), 3));
  for (size_t i = 0; i < 2; ++i) {
    const wire::FrameView v = view(f[i]);
    EXPECT_EQ(v.eth_dst[0], i == 0 ? kPrefixGet : kPrefixOther);
    EXPECT_EQ(hash_from_mac(v.eth_dst), h);
    EXPECT_EQ(v.ip_dst, request_ip(h));
    EXPECT_EQ(v.ip_src, 0x0A000001u);
    EXPECT_EQ(v.udp_src, 40000);
    EXPECT_EQ(v.udp_dst, 7777);
    EXPECT_EQ(v.client_id, 7u);
  }
}

TEST(RequestEngine, AZeroTimeoutSendsOncePerCall) {
  EngineOptions o = opts(8, 3);
  o.timeout_s = 0;
  RequestEngine e(ep(), 7, o);
  e.submit(wire::kGet, "k", "", 1);
  EXPECT_EQ(send(e, t0).size(), 1u);
  std::vector<Completion> done;
  e.expire(t0 + 1ms, done);
  EXPECT_EQ(send(e, t0 + 1ms).size(), 1u) << "one resend, not one per call at the same time";
  EXPECT_EQ(e.stats().resent, 1u);
}

TEST(RequestEngine, AnUnsendableRequestCompletesAsBadRequest) {
  RequestEngine e(ep(), 7, opts(8));
  e.submit(wire::kGet, "", "", 1);
  e.submit(wire::kGet, std::string(251, 'k'), "", 2);
  EXPECT_EQ(e.next_deadline(), Time{});
  EXPECT_TRUE(send(e, t0).empty());
  std::vector<Completion> done;
  e.expire(t0, done);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].status, wire::kBadRequest);
  EXPECT_EQ(done[1].attempts, 0);
  EXPECT_TRUE(e.idle());
}

TEST(RequestEngine, SeqsStartAfterLastSeqAndWrap) {
  RequestEngine e(ep(), 7, opts(8), 0xFFFFFFFEu);
  for (int i = 0; i < 3; ++i) e.submit(wire::kGet, "k", "", i);
  auto f = send(e, t0);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(view(f[0]).seq, 0xFFFFFFFFu);
  EXPECT_EQ(view(f[1]).seq, 0u);
  EXPECT_EQ(view(f[2]).seq, 1u);
  EXPECT_EQ(e.last_seq(), 1u);
}

}  // namespace
}  // namespace exo::client
