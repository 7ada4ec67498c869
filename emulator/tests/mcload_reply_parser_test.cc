// exo-mcload's reply parser: hits, misses and error lines; replies split anywhere; and bad or
// partial replies (wrong framing, a cas the generator never asked for, lengths that lie,
// oversized lines and values) are malformed or need more, never misread. Every case also goes
// through the stream invariants of mcload_parser_check.h (the fuzzer's too).
#include "mcload/reply_parser.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mcload_parser_check.h"

namespace exo::mcload {
namespace {

using testing::check_reply_invariants;

Reply parse(const std::string& s) { return parse_reply(s); }

const std::string kHit = "VALUE key:000000000042 0 5\r\nhello\r\nEND\r\n";

TEST(McReplyParser, Hit) {
  const Reply r = parse(kHit);
  EXPECT_EQ(r.kind, ReplyKind::kHit);
  EXPECT_EQ(r.key, "key:000000000042");
  EXPECT_EQ(r.value_len, 5u);
  EXPECT_EQ(r.consumed, kHit.size());
  EXPECT_EQ(check_reply_invariants(kHit), "");
}

TEST(McReplyParser, ValueBytesAreTakenByLengthNotBySearching) {
  // The data itself holds "\r\nEND\r\n": only <bytes> says where it ends.
  const std::string v = "a\r\nEND\r\nb";
  const std::string s = "VALUE k 7 " + std::to_string(v.size()) + "\r\n" + v + "\r\nEND\r\n";
  const Reply r = parse(s);
  ASSERT_EQ(r.kind, ReplyKind::kHit);
  EXPECT_EQ(r.value_len, v.size());
  EXPECT_EQ(r.consumed, s.size());
  EXPECT_EQ(check_reply_invariants(s), "");
  const std::string empty = "VALUE k 0 0\r\n\r\nEND\r\n";
  EXPECT_EQ(parse(empty).kind, ReplyKind::kHit);
  EXPECT_EQ(parse(empty).value_len, 0u);
}

TEST(McReplyParser, MissAndErrorLines) {
  EXPECT_EQ(parse("END\r\n").kind, ReplyKind::kMiss);
  EXPECT_EQ(parse("END\r\n").consumed, 5u);
  for (const std::string s : {"ERROR\r\n", "ERROR unknown command\r\n", "CLIENT_ERROR bad command line format\r\n",
                              "SERVER_ERROR cluster did not answer\r\n", "SERVER_ERROR\r\n"}) {
    const Reply r = parse(s);
    EXPECT_EQ(r.kind, ReplyKind::kError) << s;
    EXPECT_EQ(r.consumed, s.size()) << s;
    EXPECT_EQ(r.line, s.substr(0, s.size() - 2)) << s;
    EXPECT_EQ(check_reply_invariants(s), "") << s;
  }
}

TEST(McReplyParser, PipelinedRepliesParseOneAtATime) {
  const std::string s = kHit + "END\r\n" + "SERVER_ERROR x\r\n" + kHit;
  size_t off = 0;
  std::vector<ReplyKind> kinds;
  for (Reply r; (r = parse_reply(std::string_view(s).substr(off))).kind != ReplyKind::kNeedMore; off += r.consumed) {
    ASSERT_NE(r.kind, ReplyKind::kMalformed);
    kinds.push_back(r.kind);
  }
  EXPECT_EQ(off, s.size());
  EXPECT_EQ(kinds, (std::vector<ReplyKind>{ReplyKind::kHit, ReplyKind::kMiss, ReplyKind::kError, ReplyKind::kHit}));
}

TEST(McReplyParser, EveryPrefixOfAReplyNeedsMore) {
  for (const std::string& s : {kHit, std::string("END\r\n"), std::string("SERVER_ERROR cluster did not answer\r\n"),
                              std::string("ERROR\r\n")}) {
    for (size_t k = 0; k < s.size(); ++k)
      EXPECT_EQ(parse(s.substr(0, k)).kind, ReplyKind::kNeedMore) << "prefix " << k << " of " << s;
  }
}

TEST(McReplyParser, BadRepliesAreMalformed) {
  const char* bad[] = {
      "STORED\r\n",                                   // not a reply to get
      "ERRORS\r\n",                                   // an error word that goes on
      "END\n",                                        // bare LF
      "END\r\r\n",                                    // stray CR
      "VALUE k 0 5\nhello\r\nEND\r\n",                // bare LF after the header
      "VALUE k 0 5 77\r\nhello\r\nEND\r\n",           // a cas: `gets`, which we never send
      "VALUE  k 0 5\r\nhello\r\nEND\r\n",             // two spaces: empty key
      "VALUE k 0\r\nhello\r\nEND\r\n",                // no <bytes>
      "VALUE k -1 5\r\nhello\r\nEND\r\n",             // signed flags
      "VALUE k 0 +5\r\nhello\r\nEND\r\n",             // sign on <bytes>
      "VALUE k 0 99999999999\r\n",                    // <bytes> over 32 bits
      "VALUE k 0 4294967296\r\n",                     // 2^32
      "VALUE k 0 3\r\nhello\r\nEND\r\n",              // <bytes> shorter than the data
      "VALUE k 0 5\r\nhelloEND\r\n",                  // no \r\n after the data
      "VALUE k 0 5\r\nhello\r\nVALUE j 0 1\r\nx\r\nEND\r\n",  // a second value: not a one-key get
      "VALUE k 0 5\r\nhello\r\nEMD\r\n",
      "\r\n",
      " END\r\n",
      "\x80\x01\x00\x00",                             // binary protocol
  };
  for (const char* s : bad) {
    EXPECT_EQ(parse(s).kind, ReplyKind::kMalformed) << s;
    EXPECT_FALSE(parse(s).line.empty()) << "a malformed reply says why: " << s;
    EXPECT_EQ(check_reply_invariants(s), "") << s;
  }
}

TEST(McReplyParser, PartialButPlausibleNeedsMore) {
  for (const char* s : {"", "V", "VALU", "VALUE ", "VALUE k 0 5", "VALUE k 0 5\r", "VALUE k 0 5\r\nhel",
                        "VALUE k 0 5\r\nhello\r", "VALUE k 0 5\r\nhello\r\nEN", "E", "EN", "END\r", "ERR", "ERROR",
                        "CLIENT_", "SERVER_ERROR out of mem"})
    EXPECT_EQ(parse(s).kind, ReplyKind::kNeedMore) << s;
}

TEST(McReplyParser, KeyAndLineLimits) {
  const std::string key250(250, 'k'), key251(251, 'k');
  EXPECT_EQ(parse("VALUE " + key250 + " 0 1\r\nx\r\nEND\r\n").kind, ReplyKind::kHit);
  EXPECT_EQ(parse("VALUE " + key251 + " 0 1\r\nx\r\nEND\r\n").kind, ReplyKind::kMalformed);
  // A line with no end: needs more until kMaxReplyLine bytes, then malformed (and so for errors).
  EXPECT_EQ(parse(std::string("SERVER_ERROR ") + std::string(kMaxReplyLine - 14, 'x')).kind, ReplyKind::kNeedMore);
  EXPECT_EQ(parse(std::string("SERVER_ERROR ") + std::string(kMaxReplyLine, 'x')).kind, ReplyKind::kMalformed);
  const std::string longest = "SERVER_ERROR " + std::string(kMaxReplyLine - 15, 'x') + "\r\n";
  ASSERT_EQ(longest.size(), kMaxReplyLine);
  EXPECT_EQ(parse(longest).kind, ReplyKind::kError);
  EXPECT_EQ(parse("SERVER_ERROR " + std::string(kMaxReplyLine - 14, 'x') + "\r\n").kind, ReplyKind::kMalformed);
}

TEST(McReplyParser, ValueSizeLimit) {
  EXPECT_EQ(parse_reply("VALUE k 0 1048577\r\n").kind, ReplyKind::kMalformed);  // over 1 MiB: never buffered
  EXPECT_EQ(parse_reply("VALUE k 0 1048576\r\n").kind, ReplyKind::kNeedMore);
  EXPECT_EQ(parse_reply("VALUE k 0 11\r\n", 10).kind, ReplyKind::kMalformed);
}

TEST(McReplyParser, EverySingleByteCorruptionKeepsTheInvariants) {
  // In buffers of exactly their size (ASan in `make sanitize` catches a read past the end).
  for (const std::string& base : {kHit, std::string("END\r\n"), std::string("SERVER_ERROR x y\r\n")}) {
    for (size_t i = 0; i < base.size(); ++i) {
      for (int v : {0, 13, 10, 32, 48, 57, 69, 0xff}) {
        std::string s = base;
        s[i] = static_cast<char>(v);
        const auto owned = std::make_unique<char[]>(s.size());
        std::memcpy(owned.get(), s.data(), s.size());
        EXPECT_EQ(check_reply_invariants(std::string_view(owned.get(), s.size())), "") << "byte " << i << " = " << v;
      }
    }
  }
}

// Parsers with the bugs the invariants exist for, to show the checker catches them.
Reply eager_miss(std::string_view b, size_t max) {  // takes "EN" for a whole miss
  if (b == "EN") return Reply{ReplyKind::kMiss, 2, {}, 0, {}};
  return parse_reply(b, max);
}
Reply greedy_consume(std::string_view b, size_t max) {  // swallows whatever follows a reply
  Reply r = parse_reply(b, max);
  if (r.kind == ReplyKind::kMiss) r.consumed = b.size();
  return r;
}
Reply early_malformed(std::string_view b, size_t max) {  // gives up on a partial VALUE line
  if (b.size() > 6 && b.size() < 12 && b.substr(0, 6) == "VALUE ") return Reply{ReplyKind::kMalformed, 0, {}, 0, "x"};
  return parse_reply(b, max);
}

TEST(McReplyParser, TheInvariantCheckerRejectsBrokenParsers) {
  using testing::ParseFn;
  const size_t all = std::string_view::npos;
  EXPECT_NE(check_reply_invariants("END\r\n", all, kDefaultMaxValue, eager_miss), "");
  EXPECT_NE(check_reply_invariants("END\r\n", all, kDefaultMaxValue, greedy_consume), "");
  EXPECT_NE(check_reply_invariants(kHit, all, kDefaultMaxValue, early_malformed), "");
  EXPECT_EQ(check_reply_invariants(kHit, all, kDefaultMaxValue, parse_reply), "");
}

}  // namespace
}  // namespace exo::mcload
