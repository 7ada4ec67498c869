// The RequestHandler test fixture shared by request_handler_test.cc (frames, GET/PUT/DELETE),
// two_phase_test.cc (writes to cached keys) and dedup_test.cc (resent requests): a handler over
// the fakes of test_util.h, with one EventLog for store and propagator, and a settable wall
// clock for dedup expiry.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "request_handler.h"
#include "test_util.h"

namespace exo::db::testing {

inline uint64_t counter(const Counters& c, const std::string& name) {
  const CounterValues v = c.snapshot();
  for (size_t i = 0; i < kNumCounters; ++i)
    if (name == kCounterDescs[i].name) return v[i];
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

class HandlerTest : public ::testing::Test {
 protected:
  EventLog log;
  FakeNode node{&log};
  Cluster& cluster = node.cluster;
  FakeStore& store = node.store;
  CachedKeys& cached = node.cached;
  FakePropagator& prop = node.prop;
  Resolver& resolver = node.resolver;
  uint64_t now_ms = 1'700'000'000'000;  // the wall clock the handler sees
  NodeContext ctx{cluster, 0, store, cached, prop, node.txids, node.dedup, resolver, nullptr,
                  [this] { return now_ms; }};
  Counters c;
  RequestHandler h{ctx, c};
  std::vector<uint8_t> out = std::vector<uint8_t>(16384);
  const std::string key = key_owned_by(cluster, 0);

  // Sends a frame through the handler; returns the parsed reply (fails the test if none).
  wire::FrameView send(const std::vector<uint8_t>& frame) {
    wire::FrameView r{};
    const size_t n = h.handle(frame, out);
    EXPECT_GT(n, 0u) << "expected a reply";
    if (n == 0) return r;
    EXPECT_EQ(wire::parse(std::span<const uint8_t>(out.data(), n), r), wire::ParseError::kNone);
    return r;
  }
  bool no_reply(const std::vector<uint8_t>& frame) { return h.handle(frame, out) == 0; }
  static std::string str(std::span<const uint8_t> b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  // Marks `key` as held by cache0, in memory and on disk, as a Fetch would.
  void mark(const std::string& k) {
    cached.lock_key(B(k)).mark(k, "cache0");
    store.marks[k] = "cache0";
  }
};

}  // namespace exo::db::testing
