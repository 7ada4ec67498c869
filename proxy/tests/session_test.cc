// Session (session.h) and the outcome mapping (outcomes.h) with a fake cluster: the test
// completes each submitted op by hand, in any order, and reads the reply bytes. Pins request
// order, the write-outcome rule (no reply is never STORED), the named refusals, noreply/q, and
// the per-connection bounds.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "session.h"
#include "wire.h"

namespace exo::proxy {
namespace {

struct Op {
  uint8_t op;
  std::string key, value;
  uint64_t tag;
};

class FakeHost : public SessionHost {
 public:
  void submit(uint8_t op, std::string_view key, std::string_view value, uint64_t tag) override {
    ops.push_back({op, std::string(key), std::string(value), tag});
  }
  void append_stats(std::string& out) override { reply::stat(out, "fake", "1"); }
  std::vector<Op> ops;
};

struct Rig {
  explicit Rig(SessionConfig cfg = {}) : s(7, cfg, host, counters) {}
  // Completes op i (in submit order) with a cluster outcome.
  void answer(size_t i, int status, std::string value = "", uint8_t flags = 0) {
    ASSERT_LT(i, host.ops.size());
    s.complete(client::Completion{host.ops[i].tag, status, std::move(value), flags, 0.001, 1});
  }
  // Everything written so far, and consumed.
  std::string take() {
    std::string out(s.output());
    s.consume_output(out.size());
    return out;
  }
  std::string send(const std::string& in) {
    s.on_input(in);
    return take();
  }
  FakeHost host;
  Counters counters;
  Session s;
};

TEST(ProxySession, PipelinedRepliesKeepRequestOrderWhateverTheCompletionOrder) {
  Rig r;
  EXPECT_EQ(r.send("get a b c\r\nset k 0 0 2\r\nhi\r\ndelete d\r\nversion\r\n"), "");
  ASSERT_EQ(r.host.ops.size(), 5u);
  EXPECT_EQ(r.host.ops[0].op, wire::kGet);
  EXPECT_EQ(r.host.ops[2].key, "c");
  EXPECT_EQ(r.host.ops[3].op, wire::kPut);
  EXPECT_EQ(r.host.ops[3].value, "hi");
  EXPECT_EQ(r.host.ops[4].op, wire::kDelete);
  r.answer(4, wire::kOk);  // delete first
  r.answer(3, wire::kOk);  // then the set
  EXPECT_EQ(r.take(), "") << "the get is still waiting";
  r.answer(2, wire::kOk, "C");
  r.answer(0, wire::kOk, "A", wire::kFromCache);
  EXPECT_EQ(r.take(), "");
  r.answer(1, wire::kNotFound);
  EXPECT_EQ(r.take(), "VALUE a 0 1\r\nA\r\nVALUE c 0 1\r\nC\r\nEND\r\nSTORED\r\nDELETED\r\nVERSION exo-proxy " +
                          std::string(kProxyVersion) + "\r\n");
  EXPECT_EQ(r.counters.cmd_get, 3u);
  EXPECT_EQ(r.counters.get_hits, 2u);
  EXPECT_EQ(r.counters.get_misses, 1u);
  EXPECT_EQ(r.counters.get_hits_from_cache, 1u);
  EXPECT_EQ(r.s.pending(), 0u);
}

TEST(ProxySession, AnImmediateReplyWithNothingPendingGoesOutAtOnce) {
  Rig r;
  EXPECT_EQ(r.send("version\r\nmn\r\nverbosity 1\r\n"), "VERSION exo-proxy " + std::string(kProxyVersion) + "\r\nMN\r\nOK\r\n");
}

TEST(ProxySession, AnUnansweredSetIsOutcomeUnknownNeverStored) {
  Rig r;
  r.send("set k 0 0 1\r\nx\r\nms k 1\r\ny\r\ndelete k\r\n");
  r.answer(0, -1);
  r.answer(1, -1);
  r.answer(2, -1);
  const std::string out = r.take();
  EXPECT_EQ(out, "SERVER_ERROR outcome unknown\r\nSERVER_ERROR outcome unknown\r\nSERVER_ERROR outcome unknown\r\n");
  EXPECT_EQ(out.find("STORED"), std::string::npos);
  EXPECT_EQ(r.counters.outcome_unknown, 3u);
  EXPECT_EQ(r.counters.cluster_timeouts, 3u);
}

TEST(ProxySession, ARefusedWriteSaysNotStoredWithTheReason) {
  Rig r;
  r.send("set a 0 0 1\r\nx\r\nset b 0 0 1\r\nx\r\nset c 0 0 1\r\nx\r\ndelete d\r\nset e 0 0 1\r\nx\r\n");
  r.answer(0, wire::kBusy);
  r.answer(1, wire::kError);
  r.answer(2, wire::kBadRequest);
  r.answer(3, wire::kBusy);
  r.answer(4, 9);  // a status this proxy does not know: maybe applied
  EXPECT_EQ(r.take(),
            "SERVER_ERROR not stored: cluster busy\r\nSERVER_ERROR not stored: cluster error\r\n"
            "SERVER_ERROR not stored: cluster rejected the request\r\nSERVER_ERROR not deleted: cluster busy\r\n"
            "SERVER_ERROR outcome unknown\r\n");
}

TEST(ProxySession, GetOutcomes) {
  Rig r;
  r.send("gets a\r\nget b\r\nget c d\r\n");
  r.answer(0, wire::kOk, "v");
  r.answer(1, -1);
  r.answer(2, wire::kOk, "x");
  r.answer(3, wire::kError);
  EXPECT_EQ(r.take(), "VALUE a 0 1 0\r\nv\r\nEND\r\nSERVER_ERROR cluster did not answer\r\n"
                      "SERVER_ERROR cluster error\r\n")
      << "gets: cas unique 0; one failed key fails the whole get";
}

TEST(ProxySession, DeleteOfAMissingKeyIsNotFoundOnceTheNodeSaysSo) {
  Rig r;
  r.send("delete a\r\nmd b\r\n");
  r.answer(0, wire::kNotFound);
  r.answer(1, wire::kNotFound);
  EXPECT_EQ(r.take(), "NOT_FOUND\r\nNF\r\n");
}

TEST(ProxySession, UnsupportedCommandsAnswerANamedClientError) {
  Rig r;
  const std::string out = r.send(
      "cas k 0 0 1 5\r\nx\r\nadd k 0 0 1\r\nx\r\nreplace k 0 0 1\r\nx\r\nappend k 0 0 1\r\nx\r\n"
      "prepend k 0 0 1\r\nx\r\nincr k 1\r\ndecr k 1\r\ntouch k 10\r\ngat 10 k\r\ngats 10 k\r\n"
      "flush_all\r\nset k 5 0 1\r\nx\r\nset k 0 60 1\r\nx\r\nma k\r\nme k\r\nstats slabs\r\n");
  EXPECT_EQ(out,
            "CLIENT_ERROR cas not supported\r\n"
            "CLIENT_ERROR add/replace not supported (no atomic check-and-set in the cluster)\r\n"
            "CLIENT_ERROR add/replace not supported (no atomic check-and-set in the cluster)\r\n"
            "CLIENT_ERROR append not supported\r\nCLIENT_ERROR prepend not supported\r\n"
            "CLIENT_ERROR incr not supported\r\nCLIENT_ERROR decr not supported\r\n"
            "CLIENT_ERROR touch not supported\r\nCLIENT_ERROR gat not supported\r\n"
            "CLIENT_ERROR gats not supported\r\nCLIENT_ERROR flush_all not supported\r\n"
            "CLIENT_ERROR client flags not supported (flags must be 0)\r\n"
            "CLIENT_ERROR expiry not supported (exptime must be 0)\r\n"
            "CLIENT_ERROR ma not supported\r\nCLIENT_ERROR me not supported\r\n"
            "CLIENT_ERROR stats slabs not supported\r\n");
  EXPECT_TRUE(r.host.ops.empty()) << "none of them reaches the cluster";
}

TEST(ProxySession, MetaFlagsTheClusterCannotServeAreRefused) {
  Rig r;
  EXPECT_EQ(r.send("mg k T30\r\nms k 1 C5\r\nx\r\nms k 1 MA\r\nx\r\nms k 1 F3\r\nx\r\nmd k I\r\nms k 1 T9\r\nx\r\n"),
            "CLIENT_ERROR mg flag T not supported\r\nCLIENT_ERROR ms flag C not supported\r\n"
            "CLIENT_ERROR ms mode A not supported (only S, set)\r\n"
            "CLIENT_ERROR client flags not supported (F must be 0)\r\nCLIENT_ERROR md flag I not supported\r\n"
            "CLIENT_ERROR expiry not supported (T must be 0)\r\n");
  EXPECT_TRUE(r.host.ops.empty());
}

TEST(ProxySession, ValuesLargerThanOneFrameAreTooLarge) {
  SessionConfig cfg;
  cfg.max_kv = 10;
  cfg.limits.max_value = 9;
  Rig r(cfg);
  EXPECT_EQ(r.send("set abcd 0 0 7\r\n1234567\r\nset abcd 0 0 6\r\n123456\r\nset k 0 0 10\r\n0123456789\r\n"),
            "SERVER_ERROR object too large for cache\r\n")
      << "key + value over one frame: refused at once (the third set's block is over the parser's "
         "max_value: it answers the same, in order)";
  EXPECT_EQ(r.host.ops.size(), 1u);
  r.answer(0, wire::kOk);
  EXPECT_EQ(r.take(), "STORED\r\nSERVER_ERROR object too large for cache\r\n");
}

TEST(ProxySession, MetaCommandsAndQuietMode) {
  Rig r;
  r.send("mg a v k f c t s O1\r\nmg b q\r\nmg c\r\nms d 2 q\r\nhi\r\nmd e q\r\nmn\r\n");
  ASSERT_EQ(r.host.ops.size(), 5u);
  EXPECT_EQ(r.host.ops[3].op, wire::kPut);
  EXPECT_EQ(r.host.ops[3].value, "hi");
  r.answer(0, wire::kOk, "val");
  r.answer(1, wire::kNotFound);  // q: EN dropped
  r.answer(2, wire::kOk, "zz");
  r.answer(3, wire::kOk);  // q: HD dropped
  r.answer(4, -1);         // q never drops an error
  EXPECT_EQ(r.take(), "VA 3 ka f0 c0 t-1 s3 O1\r\nval\r\nHD\r\nSERVER_ERROR outcome unknown\r\nMN\r\n");
}

TEST(ProxySession, NoreplySuppressesEveryReplyOfThatCommand) {
  Rig r;
  r.send("set a 0 0 1 noreply\r\nx\r\nset b 0 0 1 noreply\r\nx\r\ndelete c noreply\r\nadd d 0 0 1 noreply\r\nx\r\n"
         "incr e 1 noreply\r\nget f\r\n");
  ASSERT_EQ(r.host.ops.size(), 4u);
  r.answer(0, wire::kOk);
  r.answer(1, -1);
  r.answer(2, wire::kOk);
  r.answer(3, wire::kNotFound);
  EXPECT_EQ(r.take(), "END\r\n");
  EXPECT_EQ(r.counters.outcome_unknown, 1u) << "still counted";
}

TEST(ProxySession, StatsListsTheHostsLinesThenEndWhenItsTurnComes) {
  Rig r;
  EXPECT_EQ(r.send("stats\r\n"), "STAT fake 1\r\nEND\r\n");
  EXPECT_EQ(r.send("get a\r\nstats\r\n"), "");
  r.answer(0, wire::kNotFound);
  EXPECT_EQ(r.take(), "END\r\nSTAT fake 1\r\nEND\r\n");
}

TEST(ProxySession, QuitFinishesAfterTheEarlierReplies) {
  Rig r;
  r.send("get a\r\nquit\r\nget never\r\n");
  EXPECT_EQ(r.host.ops.size(), 1u);
  EXPECT_FALSE(r.s.wants_input());
  EXPECT_FALSE(r.s.finished()) << "the get is still waiting";
  r.answer(0, wire::kNotFound);
  EXPECT_FALSE(r.s.finished()) << "its reply is not written yet";
  EXPECT_EQ(r.take(), "END\r\n");
  EXPECT_TRUE(r.s.finished());
}

TEST(ProxySession, EofAnswersWhatWasSentThenFinishes) {
  Rig r;
  r.s.on_input("get a\r\nget b\r\nget partial");
  r.s.on_eof();
  EXPECT_FALSE(r.s.wants_input());
  r.answer(0, wire::kNotFound);
  r.answer(1, wire::kNotFound);
  EXPECT_EQ(r.take(), "END\r\nEND\r\n");
  EXPECT_TRUE(r.s.finished());
}

TEST(ProxySession, ABinaryClientIsToldAndClosed) {
  Rig r;
  EXPECT_EQ(r.send(std::string("\x80\x00\x00\x05", 4)), "CLIENT_ERROR binary protocol not supported\r\n");
  EXPECT_TRUE(r.s.finished());
}

TEST(ProxySession, ParsingPausesAtMaxPendingAndResumesAsRepliesComplete) {
  SessionConfig cfg;
  cfg.max_pending = 2;
  Rig r(cfg);
  r.send("get a\r\nget b\r\nget c\r\nget d\r\n");
  EXPECT_EQ(r.host.ops.size(), 2u);
  EXPECT_FALSE(r.s.wants_input());
  r.answer(1, wire::kNotFound);
  EXPECT_EQ(r.host.ops.size(), 2u) << "b's slot waits behind a's";
  r.answer(0, wire::kNotFound);
  EXPECT_EQ(r.host.ops.size(), 4u) << "both slots freed: c and d parsed";
  r.answer(2, wire::kNotFound);
  r.answer(3, wire::kNotFound);
  EXPECT_EQ(r.take(), "END\r\nEND\r\nEND\r\nEND\r\n");
  EXPECT_TRUE(r.s.wants_input());
}

TEST(ProxySession, ASlowReaderOverTheOutputCapIsClosed) {
  SessionConfig cfg;
  cfg.max_output = 100;
  Rig r(cfg);
  r.s.on_input("get k\r\n");
  r.answer(0, wire::kOk, std::string(60, 'v'));
  EXPECT_FALSE(r.s.overflowed());
  r.s.on_input("get k\r\n");
  r.answer(1, wire::kOk, std::string(60, 'v'));
  EXPECT_TRUE(r.s.overflowed()) << "nothing consumed: " << r.s.output().size() << " bytes";
  EXPECT_TRUE(r.s.finished());
}

TEST(ProxySession, CompletionsThatAreNotOursAreIgnored) {
  Rig r;
  r.send("get a\r\n");
  r.s.complete(client::Completion{uint64_t{8} << 32, wire::kOk, "x", 0, 0, 1});  // another session's
  r.s.complete(client::Completion{r.host.ops[0].tag + 5, wire::kOk, "x", 0, 0, 1});  // no such key
  r.s.complete(client::Completion{r.host.ops[0].tag + (9 << 8), wire::kOk, "x", 0, 0, 1});  // no such slot
  EXPECT_EQ(r.take(), "");
  r.answer(0, wire::kNotFound);
  r.answer(0, wire::kOk, "dup");  // twice: ignored
  EXPECT_EQ(r.take(), "END\r\n");
}

// Pieces of valid and broken input, split anywhere, with the cluster answering in any order and
// any outcome: the session never loses a slot, and finishes once all is answered after EOF.
TEST(ProxySession, RandomInputSplitsAndCompletionOrdersNeverBreakIt) {
  const std::vector<std::string> pieces = {
      "get a b c\r\n", "gets x\r\n", "set k 0 0 3\r\nabc\r\n", "set k 0 0 3 noreply\r\nabc\r\n",
      "delete k\r\n", "mg k v q k\r\n", "ms k 2 q\r\nhi\r\n", "md k q\r\n", "mn\r\n", "version\r\n",
      "stats\r\n", "incr k 1\r\n", "set k 0 0 5\r\nab\r\n", "get " + std::string(300, 'k') + "\r\n",
      "\r\n", "bogus\r\n", "quit\r\n", std::string("\x80", 1), "set k 0 0 4000\r\n", "mg a2V5 b v\r\n",
      "get a", "\n", std::string(1, '\0')};
  const int statuses[] = {-1, wire::kOk, wire::kNotFound, wire::kError, wire::kBusy, wire::kBadRequest, 7};
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    SessionConfig cfg;
    cfg.max_pending = 1 + rng() % 8;
    Rig r(cfg);
    std::string input;
    for (int i = 0; i < 40; ++i) input += pieces[rng() % pieces.size()];
    size_t pos = 0;
    std::vector<size_t> open;  // submitted, not yet completed
    size_t seen = 0;
    while (true) {
      for (; seen < r.host.ops.size(); ++seen) open.push_back(seen);
      const bool can_feed = pos < input.size();
      if (!can_feed && open.empty()) break;
      if (can_feed && (open.empty() || rng() % 2)) {
        const size_t n = 1 + rng() % 24;
        r.s.on_input(std::string_view(input).substr(pos, n));
        pos += n;
      } else {
        const size_t pick = rng() % open.size();
        const int st = statuses[rng() % std::size(statuses)];
        r.answer(open[pick], st, std::string(rng() % 5, 'v'), static_cast<uint8_t>(rng() % 2));
        open.erase(open.begin() + static_cast<long>(pick));
      }
      if (rng() % 3 == 0) r.take();
    }
    r.s.on_eof();
    for (; seen < r.host.ops.size(); ++seen) r.answer(seen, wire::kOk);  // parsed at EOF
    EXPECT_EQ(r.s.pending(), 0u) << "seed " << seed;
    r.take();
    EXPECT_TRUE(r.s.finished()) << "seed " << seed;
  }
}

}  // namespace
}  // namespace exo::proxy
