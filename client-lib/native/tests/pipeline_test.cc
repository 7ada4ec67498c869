// The native pipeline (pipeline.cc) against a fake network: the same rules the Python client's
// tests pin for Client.stream (tests/unit/test_client.py): replies matched by (client_id, seq,
// key), resends keep the seq, BUSY retries under a new seq, no reply after `retries` resends is
// status -1, strays are counted and dropped, the window is never exceeded.
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "pipeline.h"
#include "tests/reply_builder.h"
#include "wire.h"

namespace exo::client {
namespace {

using Reply = std::vector<uint8_t>;

// What the fake node does with one request frame: nothing (lost), or replies to queue.
using Node = std::function<std::vector<Reply>(const wire::FrameView& req, int nth_copy_of_seq)>;

Reply reply_to(const wire::FrameView& req, uint8_t status, std::string value = "", uint32_t client_id = 0,
               uint8_t flags = 0) {
  return testing::reply_payload(req, status, value, flags, client_id);
}

class FakeNet : public FrameIO {
 public:
  explicit FakeNet(Node node) : node_(std::move(node)) {}
  void send(std::span<const std::span<const uint8_t>> frames) override {
    ++send_calls;
    for (auto f : frames) {
      wire::FrameView v;
      ASSERT_EQ(wire::parse(f, v), wire::ParseError::kNone);
      ++copies[v.seq];
      ++sent;
      for (auto& r : node_(v, copies[v.seq])) queue.push_back(std::move(r));
      seen.push_back(v.seq);
    }
  }
  void recv(std::vector<std::span<const uint8_t>>& out, double) override {
    out.clear();
    held.assign(queue.begin(), queue.end());
    queue.clear();
    for (auto& r : held) out.emplace_back(r);
  }
  std::map<uint32_t, int> copies;
  std::vector<uint32_t> seen;
  std::deque<Reply> queue;
  std::vector<Reply> held;
  size_t sent = 0, send_calls = 0;

 private:
  Node node_;
};

Endpoint ep() {
  Endpoint e;
  e.mac = {2, 0, 0, 0, 0, 1};
  e.ip = 0x0A000001;
  e.port = 40000;
  e.service_ip = 0x0A0000FE;  // accepted, not used by requests
  return e;
}

std::vector<Op> gets(int n) {
  std::vector<Op> ops;
  for (int i = 0; i < n; ++i) ops.push_back(Op{wire::kGet, "key-" + std::to_string(i), ""});
  return ops;
}

TEST(NativePipeline, AnswersComeBackInRequestOrderInBatches) {
  FakeNet net([](const wire::FrameView& r, int) {
    return std::vector<Reply>{reply_to(r, wire::kOk, "v:" + std::string(r.key.begin(), r.key.end()),
                                       0, wire::kFromCache)};
  });
  Pipeline p(net, ep(), 77);
  auto out = p.execute(gets(100), Options{32, 0.2, 2});
  ASSERT_EQ(out.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(out[i].status, wire::kOk);
    EXPECT_EQ(out[i].value, "v:key-" + std::to_string(i));
    EXPECT_EQ(out[i].flags, wire::kFromCache);
    EXPECT_EQ(out[i].attempts, 1);
  }
  EXPECT_EQ(p.stats.sent, 100u);
  EXPECT_EQ(p.stats.replies, 100u);
  EXPECT_LE(p.stats.send_calls, 100u / 32 + 2) << "frames go out in batches of the window";
  EXPECT_EQ(p.seq, 100u);
}

TEST(NativePipeline, FramesCarryTheKeyHashPrefixAndTheClientsAddress) {
  std::vector<std::pair<uint8_t, uint64_t>> macs;  // (prefix, hash in the MAC) per frame
  std::vector<uint32_t> src_ips, dst_ips;
  FakeNet net([&](const wire::FrameView& r, int) {  // FakeNet has checked wire::parse
    macs.emplace_back(r.eth_dst[0], hash_from_mac(r.eth_dst));
    src_ips.push_back(r.ip_src);
    dst_ips.push_back(r.ip_dst);
    EXPECT_EQ(r.udp_src, 40000);
    return std::vector<Reply>{reply_to(r, wire::kOk)};
  });
  Pipeline p(net, ep(), 5);
  std::vector<Op> ops{{wire::kPut, "k", "value"}, {wire::kGet, "k", ""}};
  p.execute(ops, Options{});
  const uint64_t h = key_hash(std::span(reinterpret_cast<const uint8_t*>("k"), 1));
  ASSERT_EQ(macs.size(), 2u);
  EXPECT_EQ(macs[0], std::make_pair(kPrefixOther, h));  // PUT under 0xBA
  EXPECT_EQ(macs[1], std::make_pair(kPrefixGet, h));    // GET under 0xAA
  EXPECT_EQ(src_ips[0], 0x0A000001u);
  // The IPv4 dst is the key hash's top 32 bits (not the endpoint's service_ip), in both ops.
  EXPECT_EQ(dst_ips, (std::vector<uint32_t>{request_ip(h), request_ip(h)}));
}

TEST(NativePipeline, EachRequestsIpDstIsItsKeysRequestIp) {
  std::vector<std::pair<std::string, uint32_t>> seen;  // (key, IPv4 dst) per frame
  FakeNet net([&](const wire::FrameView& r, int) {  // FakeNet has checked wire::parse (checksum)
    seen.emplace_back(std::string(r.key.begin(), r.key.end()), r.ip_dst);
    return std::vector<Reply>{reply_to(r, wire::kOk)};
  });
  Pipeline p(net, ep(), 9);
  p.execute(gets(50), Options{});
  ASSERT_EQ(seen.size(), 50u);
  std::set<uint32_t> distinct;
  for (const auto& [key, ip] : seen) {
    EXPECT_EQ(ip, request_ip(key_hash(std::span(reinterpret_cast<const uint8_t*>(key.data()), key.size()))))
        << key;
    distinct.insert(ip);
  }
  EXPECT_GT(distinct.size(), 45u) << "keys spread over IPv4 destinations";
}

TEST(NativePipeline, ALostRequestIsResentUnderTheSameSeq) {
  FakeNet net([](const wire::FrameView& r, int nth) {
    if (nth < 3) return std::vector<Reply>{};  // the first two copies are lost
    return std::vector<Reply>{reply_to(r, wire::kOk, "x")};
  });
  Pipeline p(net, ep(), 9);
  auto out = p.execute(gets(1), Options{32, 0.005, 4});
  EXPECT_EQ(out[0].status, wire::kOk);
  EXPECT_EQ(out[0].attempts, 3);
  EXPECT_EQ(net.copies.size(), 1u) << "every copy has the one seq";
  EXPECT_EQ(p.stats.resent, 2u);
}

TEST(NativePipeline, NoReplyAfterEveryResendIsStatusMinusOne) {
  FakeNet net([](const wire::FrameView&, int) { return std::vector<Reply>{}; });
  Pipeline p(net, ep(), 9);
  auto out = p.execute(gets(2), Options{32, 0.002, 2});
  for (auto& o : out) {
    EXPECT_EQ(o.status, -1);
    EXPECT_EQ(o.attempts, 3);
  }
  EXPECT_EQ(p.stats.timeouts, 2u);
}

TEST(NativePipeline, BusyIsRetriedUnderANewSeq) {
  FakeNet net([](const wire::FrameView& r, int) {
    static int busy_left = 2;
    if (busy_left-- > 0) return std::vector<Reply>{reply_to(r, wire::kBusy)};
    return std::vector<Reply>{reply_to(r, wire::kOk)};
  });
  Pipeline p(net, ep(), 9);
  std::vector<Op> ops{{wire::kPut, "k", "v"}};
  auto out = p.execute(ops, Options{32, 0.05, 4});
  EXPECT_EQ(out[0].status, wire::kOk);
  EXPECT_EQ(out[0].attempts, 3);
  EXPECT_EQ(net.copies.size(), 3u) << "three ids: the first and one per BUSY";
  EXPECT_EQ(p.stats.busy_retries, 2u);
}

TEST(NativePipeline, StraysAreCountedAndDropped) {
  FakeNet net([](const wire::FrameView& r, int) {
    Reply other_client = reply_to(r, wire::kOk, "no", 12345);
    Reply garbage(7, 0xFF);
    Reply not_a_reply = reply_to(r, wire::kOk, "no");
    reinterpret_cast<wire::ExoHeader*>(not_a_reply.data())->opcode = r.opcode;
    return std::vector<Reply>{other_client, garbage, not_a_reply, reply_to(r, wire::kOk, "yes"),
                              reply_to(r, wire::kOk, "dup")};
  });
  Pipeline p(net, ep(), 9);
  auto out = p.execute(gets(1), Options{});
  EXPECT_EQ(out[0].value, "yes");
  EXPECT_EQ(p.stats.stray_replies, 4u);
}

TEST(NativePipeline, AReplyForTheSameSeqButAnotherKeyIsAStray) {
  FakeNet net([](const wire::FrameView& r, int nth) {
    if (nth > 1) return std::vector<Reply>{reply_to(r, wire::kOk, "right")};
    Reply wrong = reply_to(r, wire::kOk, "wrong");
    wrong[wire::kHdrLen] ^= 1;  // first key byte
    return std::vector<Reply>{wrong};
  });
  Pipeline p(net, ep(), 9);
  auto out = p.execute(gets(1), Options{32, 0.005, 3});
  EXPECT_EQ(out[0].value, "right");
  EXPECT_EQ(p.stats.stray_replies, 1u);
}

TEST(NativePipeline, TheWindowBoundsRequestsInFlight) {
  size_t in_flight = 0, max_seen = 0;
  // replies only come back on the next recv, so everything sent before it is in flight
  FakeNet net([&](const wire::FrameView& r, int) {
    max_seen = std::max(max_seen, ++in_flight);
    return std::vector<Reply>{reply_to(r, wire::kOk)};
  });
  struct Counting : FrameIO {
    FakeNet& n;
    size_t& in_flight;
    Counting(FakeNet& n, size_t& f) : n(n), in_flight(f) {}
    void send(std::span<const std::span<const uint8_t>> f) override { n.send(f); }
    void recv(std::vector<std::span<const uint8_t>>& out, double t) override {
      n.recv(out, t);
      in_flight -= out.size();
    }
  } io(net, in_flight);
  Pipeline p(io, ep(), 9);
  p.execute(gets(50), Options{8, 0.2, 2});
  EXPECT_LE(max_seen, 8u);
  EXPECT_EQ(p.stats.replies, 50u);
}

}  // namespace
}  // namespace exo::client
