// The text codec against memcached's protocol.txt: every command, pipelining split at every
// byte, the limits and what the stream looks like after each error, meta flags, the encoder.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base64.h"
#include "text_protocol.h"

namespace exo::proxy {
namespace {

using namespace std::string_literals;

// One parser verdict (kNeedMore is not one: it only asks for more input).
struct Event {
  ParseResult::Kind kind;
  Request request;
  ParseError error;
  bool operator==(const Event&) const = default;
};

// Feeds `chunks` in turn into one parser, draining after each as a connection would. Stops at
// an error that closes. Checks the parser's promises on every call: consumed within the
// input, progress on every verdict. `left` gets the bytes never consumed.
std::vector<Event> feed(const std::vector<std::string>& chunks, Limits limits = {},
                        std::string* left = nullptr) {
  Parser p(limits);
  std::string buf;
  std::vector<Event> events;
  for (const std::string& chunk : chunks) {
    buf += chunk;
    for (;;) {
      size_t used = 0;
      ParseResult r = p.next(buf, &used);
      EXPECT_LE(used, buf.size());
      buf.erase(0, used);
      if (r.kind == ParseResult::kNeedMore) break;
      EXPECT_GT(used, 0u);
      events.push_back({r.kind, std::move(r.request), r.error});
      if (r.kind == ParseResult::kError && r.error.close) {
        if (left) *left = buf;
        return events;
      }
    }
  }
  if (left) *left = buf;
  return events;
}

std::vector<Event> parse(const std::string& in, Limits limits = {}) { return feed({in}, limits); }

// The single request `in` holds.
Request req(const std::string& in, Limits limits = {}) {
  std::string left;
  auto ev = feed({in}, limits, &left);
  EXPECT_EQ(ev.size(), 1u) << in;
  EXPECT_EQ(left, "") << in;
  if (ev.size() != 1 || ev[0].kind != ParseResult::kRequest) {
    ADD_FAILURE() << "not a request: " << in
                  << (ev.empty() ? "" : std::string(" -> ") + std::string(ev[0].error.line));
    return {};
  }
  return ev[0].request;
}

// The single error `in` draws.
ParseError err(const std::string& in, Limits limits = {}) {
  auto ev = parse(in, limits);
  if (ev.size() != 1 || ev[0].kind != ParseResult::kError) {
    ADD_FAILURE() << "expected one error for: " << in;
    return {};
  }
  return ev[0].error;
}

std::vector<std::string> keys(std::initializer_list<const char*> k) { return {k.begin(), k.end()}; }

const std::string kBadFormat = "CLIENT_ERROR bad command line format\r\n";

// ---------------------------------------------------------------- classic commands

TEST(TextParse, RetrievalCommands) {
  Request r = req("get foo\r\n");
  EXPECT_EQ(r.cmd, Cmd::kGet);
  EXPECT_EQ(r.keys, keys({"foo"}));
  r = req("gets a b  c\r\n");  // runs of spaces collapse
  EXPECT_EQ(r.cmd, Cmd::kGets);
  EXPECT_EQ(r.keys, keys({"a", "b", "c"}));
  r = req("gat 100 a b\r\n");
  EXPECT_EQ(r.cmd, Cmd::kGat);
  EXPECT_EQ(r.exptime, 100);
  EXPECT_EQ(r.keys, keys({"a", "b"}));
  r = req("gats -1 a\r\n");  // a negative exptime is legal: expire now
  EXPECT_EQ(r.cmd, Cmd::kGats);
  EXPECT_EQ(r.exptime, -1);
  EXPECT_EQ(r.keys, keys({"a"}));
}

TEST(TextParse, StorageCommands) {
  const std::pair<const char*, Cmd> cases[] = {{"set", Cmd::kSet},         {"add", Cmd::kAdd},
                                               {"replace", Cmd::kReplace}, {"append", Cmd::kAppend},
                                               {"prepend", Cmd::kPrepend}};
  for (auto [name, cmd] : cases) {
    Request r = req(std::string(name) + " k 4294967295 -5 7\r\nab\r\ncd\xff\r\n");
    EXPECT_EQ(r.cmd, cmd) << name;
    EXPECT_EQ(r.keys, keys({"k"}));
    EXPECT_EQ(r.flags, 4294967295u);
    EXPECT_EQ(r.exptime, -5);
    EXPECT_EQ(r.value, "ab\r\ncd\xff");  // the block is binary-safe: \r\n inside is data
    EXPECT_FALSE(r.noreply);
  }
  Request r = req("cas k 1 2 3 18446744073709551615\r\nxyz\r\n");
  EXPECT_EQ(r.cmd, Cmd::kCas);
  EXPECT_EQ(r.cas, 18446744073709551615ull);
  EXPECT_EQ(r.value, "xyz");
  r = req("set empty 0 0 0\r\n\r\n");
  EXPECT_EQ(r.value, "");
}

TEST(TextParse, OtherCommands) {
  Request r = req("incr n 18446744073709551615\r\n");
  EXPECT_EQ(r.cmd, Cmd::kIncr);
  EXPECT_EQ(r.delta, 18446744073709551615ull);
  EXPECT_EQ(r.keys, keys({"n"}));
  r = req("decr n 3\r\n");
  EXPECT_EQ(r.cmd, Cmd::kDecr);
  EXPECT_EQ(r.delta, 3u);
  r = req("touch k 60\r\n");
  EXPECT_EQ(r.cmd, Cmd::kTouch);
  EXPECT_EQ(r.exptime, 60);
  r = req("delete k\r\n");
  EXPECT_EQ(r.cmd, Cmd::kDelete);
  EXPECT_EQ(r.keys, keys({"k"}));
  r = req("delete k 0\r\n");  // the old hold time, only ever 0
  EXPECT_EQ(r.keys, keys({"k"}));
  EXPECT_EQ(req("version\r\n").cmd, Cmd::kVersion);
  // As memcached: extra tokens after version and quit are ignored (memccapable relies on it).
  EXPECT_EQ(req("version foo bar\r\n").cmd, Cmd::kVersion);
  EXPECT_EQ(req("quit 1\r\n").cmd, Cmd::kQuit);
  EXPECT_EQ(req("quit\r\n").cmd, Cmd::kQuit);
  r = req("stats\r\n");
  EXPECT_EQ(r.cmd, Cmd::kStats);
  EXPECT_TRUE(r.keys.empty());
  r = req("stats detail dump\r\n");
  EXPECT_EQ(r.keys, keys({"detail", "dump"}));
  r = req("flush_all\r\n");
  EXPECT_EQ(r.cmd, Cmd::kFlushAll);
  EXPECT_EQ(r.exptime, 0);
  EXPECT_EQ(req("flush_all 30\r\n").exptime, 30);
  r = req("verbosity 2\r\n");
  EXPECT_EQ(r.cmd, Cmd::kVerbosity);
  EXPECT_EQ(r.verbosity, 2u);
}

TEST(TextParse, Noreply) {
  for (const char* line : {"set k 0 0 1 noreply\r\nx\r\n", "add k 0 0 1 noreply\r\nx\r\n",
                           "replace k 0 0 1 noreply\r\nx\r\n", "append k 0 0 1 noreply\r\nx\r\n",
                           "prepend k 0 0 1 noreply\r\nx\r\n", "cas k 0 0 1 9 noreply\r\nx\r\n",
                           "delete k noreply\r\n", "delete k 0 noreply\r\n", "incr k 1 noreply\r\n",
                           "decr k 1 noreply\r\n", "touch k 1 noreply\r\n", "flush_all noreply\r\n",
                           "flush_all 10 noreply\r\n", "verbosity 1 noreply\r\n"}) {
    EXPECT_TRUE(req(line).noreply) << line;
  }
  EXPECT_EQ(req("flush_all 10 noreply\r\n").exptime, 10);
  // Anything else in noreply's place is an error, not an ignored token.
  EXPECT_EQ(err("set k 0 0 1 norepl\r\nx\r\n").line, kBadFormat);
  EXPECT_EQ(err("incr k 1 please\r\n").line, kBadFormat);
  EXPECT_EQ(err("delete k 1\r\n").line,
            "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n");
  EXPECT_EQ(err("delete k noreply extra\r\n").line,
            "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n");
  // "noreply" is only a key where a key is expected.
  EXPECT_EQ(req("get noreply\r\n").keys, keys({"noreply"}));
  EXPECT_FALSE(req("get noreply\r\n").noreply);
}

TEST(TextParse, ErrorsUnderNoreplyAreMarked) {
  // memcached sends nothing for a failed noreply line; the proxy is told so.
  ParseError e = err("incr k x noreply\r\n");
  EXPECT_EQ(e.line, "CLIENT_ERROR invalid numeric delta argument\r\n");
  EXPECT_TRUE(e.noreply);
  e = err("bogus noreply\r\n");
  EXPECT_EQ(e.line, "ERROR\r\n");
  EXPECT_TRUE(e.noreply);
  EXPECT_FALSE(err("incr k x\r\n").noreply);
  EXPECT_FALSE(err("get\r\n").noreply);
}

TEST(TextParse, BareNewlineEndsALine) {
  Request r = req("get a b\n");
  EXPECT_EQ(r.keys, keys({"a", "b"}));
  r = req("set k 0 0 2\nhi\r\n");  // the data block itself must end in \r\n
  EXPECT_EQ(r.value, "hi");
  auto ev = parse("set k 0 0 2\nhi\nget a\n");  // "hi" + "\ng": then "et a" is a line
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].error.line, "CLIENT_ERROR bad data chunk\r\n");
  EXPECT_EQ(ev[1].error.line, "ERROR\r\n");
}

TEST(TextParse, EmptyAndUnknownLines) {
  EXPECT_EQ(err("\r\n").line, "ERROR\r\n");
  EXPECT_EQ(err("\n").line, "ERROR\r\n");
  EXPECT_EQ(err("   \r\n").line, "ERROR\r\n");
  EXPECT_EQ(err(" get a\r\n").line, "ERROR\r\n");  // memcached: no leading whitespace
  EXPECT_EQ(err("bogus a b\r\n").line, "ERROR\r\n");
  // Commands are lower-case and case-sensitive.
  for (const char* line : {"GET a\r\n", "Get a\r\n", "SET k 0 0 1\r\n", "MG a v\r\n", "Mn\r\n",
                           "getx a\r\n", "g\r\n"}) {
    ParseError e = err(line);
    EXPECT_EQ(e.line, "ERROR\r\n") << line;
    EXPECT_FALSE(e.close);
  }
  // An unknown storage-like command is not known to carry a block: its "data" is a line.
  auto ev = parse("SET k 0 0 1\r\nx\r\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].error.line, "ERROR\r\n");
}

TEST(TextParse, BadNumbers) {
  const char* bad_format[] = {
      "set k abc 0 1\r\nx\r\n",  "set k -1 0 1\r\nx\r\n",      "set k 4294967296 0 1\r\nx\r\n",
      "set k 0 zz 1\r\nx\r\n",   "set k 0 2147483648 1\r\nx\r\n", "set k +1 0 1\r\nx\r\n",
      "cas k 0 0 1 -5\r\nx\r\n", "cas k 0 0 1 x\r\nx\r\n",     "cas k 0 0 1\r\nx\r\n",
      "verbosity x\r\n",         "verbosity -1\r\n",           "flush_all -1\r\n",
      "flush_all x\r\n",         "flush_all 1 2\r\n",          "set k 0 0\r\n",
      "get\r\n",
      "gat 10\r\n",              "gat\r\n",                    "incr k\r\n",
      "touch k\r\n"};
  for (const char* line : bad_format) {
    auto ev = parse(line);
    ASSERT_GE(ev.size(), 1u) << line;
    EXPECT_EQ(ev[0].kind, ParseResult::kError) << line;
    EXPECT_EQ(ev[0].error.line, kBadFormat) << line;
    EXPECT_FALSE(ev[0].error.close);
  }
  for (const char* line : {"incr k abc\r\n", "incr k -1\r\n", "decr k 1.5\r\n",
                           "incr k 18446744073709551616\r\n", "decr k 0x10\r\n"}) {
    EXPECT_EQ(err(line).line, "CLIENT_ERROR invalid numeric delta argument\r\n") << line;
  }
  for (const char* line : {"touch k soon\r\n", "gat x a\r\n", "gats 9999999999 a\r\n"}) {
    EXPECT_EQ(err(line).line, "CLIENT_ERROR invalid exptime argument\r\n") << line;
  }
}

TEST(TextParse, NegativeOrUnreadableBytesSwallowsNothing) {
  // No length to trust: the next line is parsed as a command (memcached does the same).
  auto ev = parse("set k 0 0 -1\r\nget a\r\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].error.line, kBadFormat);
  EXPECT_EQ(ev[0].error.swallowed, 0u);
  EXPECT_EQ(ev[1].request.keys, keys({"a"}));
  ev = parse("set k 0 0 two\r\nget a\r\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].request.cmd, Cmd::kGet);
}

TEST(TextParse, KnownBytesAreSwallowedAfterABadLine) {
  // <bytes> was read, so the block goes even though the line is bad (memcached's conn_swallow).
  auto ev = parse("set k x 0 3\r\nabc\r\nget a\r\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].error.line, kBadFormat);
  EXPECT_EQ(ev[0].error.swallowed, 5u);
  EXPECT_EQ(ev[1].request.keys, keys({"a"}));
}

// ---------------------------------------------------------------- keys and limits

TEST(TextLimits, KeyLength) {
  const std::string k250(250, 'k'), k251(251, 'k');
  EXPECT_EQ(req("get " + k250 + "\r\n").keys[0], k250);
  EXPECT_EQ(err("get a " + k251 + "\r\n").line, "CLIENT_ERROR key too long\r\n");
  EXPECT_EQ(err("delete " + k251 + "\r\n").line, "CLIENT_ERROR key too long\r\n");
  EXPECT_EQ(err("incr " + k251 + " 1\r\n").line, "CLIENT_ERROR key too long\r\n");
  EXPECT_EQ(err("mg " + k251 + " v\r\n").line, "CLIENT_ERROR key too long\r\n");
  // A storage command's block is swallowed: the pipeline goes on.
  auto ev = parse("set " + k251 + " 0 0 2\r\nhi\r\nget a\r\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].error.line, "CLIENT_ERROR key too long\r\n");
  EXPECT_EQ(ev[1].request.keys, keys({"a"}));
  Limits small;
  small.max_key = 3;
  EXPECT_EQ(req("get abc\r\n", small).keys, keys({"abc"}));
  EXPECT_EQ(err("get abcd\r\n", small).line, "CLIENT_ERROR key too long\r\n");
}

TEST(TextLimits, ControlCharactersInKeys) {
  for (std::string key : {"a\x01"s, "a\tb"s, "a\x7f"s, "\x1b[0m"s, "a\rb"s, "a\0b"s}) {
    EXPECT_EQ(err("get " + key + "\r\n").line, kBadFormat) << key;
    EXPECT_EQ(err("delete " + key + "\r\n").line, kBadFormat) << key;
    EXPECT_EQ(err("mg " + key + " v\r\n").line, kBadFormat) << key;
  }
  EXPECT_EQ(req("get caf\xc3\xa9\r\n").keys[0], "caf\xc3\xa9");  // UTF-8 is fine
}

TEST(TextLimits, KeysPerGet) {
  std::string line = "get";
  for (int i = 0; i < 64; ++i) line += " k" + std::to_string(i);
  EXPECT_EQ(req(line + "\r\n").keys.size(), 64u);
  EXPECT_EQ(err(line + " k64\r\n").line, "CLIENT_ERROR too many keys\r\n");
  EXPECT_FALSE(err(line + " k64\r\n").close);
}

TEST(TextLimits, LineTooLongWithoutNewlineCloses) {
  std::string left;
  auto ev = feed({std::string(2049, 'x')}, {}, &left);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].error.line, "CLIENT_ERROR line too long\r\n");
  EXPECT_TRUE(ev[0].error.close);
  // 2048 bytes may still become a line.
  EXPECT_TRUE(feed({std::string(2048, 'x')}, {}, &left).empty());
  EXPECT_EQ(left.size(), 2048u);
  // Trickled in, the verdict is the same.
  std::vector<std::string> bytes(2100, "x");
  ev = feed(bytes);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(ev[0].error.close);
  // A long line closes even when its newline is in sight (whatever the split, one verdict).
  ev = parse("set " + std::string(3000, 'k') + " 0 0 1\r\nx\r\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(ev[0].error.close);
}

TEST(TextLimits, MultigetLinesMayBeLonger) {
  // 64 keys of 250 bytes: far past max_line, within retrieval_line_limit.
  std::string line = "gets";
  for (int i = 0; i < 64; ++i) line += " " + std::string(250, char('a' + i % 26));
  ASSERT_GT(line.size(), 2048u);
  ASSERT_LE(line.size(), retrieval_line_limit(Limits{}));
  EXPECT_EQ(req(line + "\r\n").keys.size(), 64u);
  std::vector<std::string> chunks;
  for (size_t i = 0; i < line.size(); i += 1000) chunks.push_back(line.substr(i, 1000));
  chunks.push_back("\r\n");
  auto ev = feed(chunks);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].request.keys.size(), 64u);
  // Past that limit even a get goes.
  ev = parse("get " + std::string(retrieval_line_limit(Limits{}), 'a'));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(ev[0].error.close);
}

TEST(TextLimits, ValueTooLargeIsAnsweredAndSwallowed) {
  const std::string big(1401, 'v');
  auto ev = parse("set k 0 0 1401\r\n" + big + "\r\nget k\r\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].error.line, "SERVER_ERROR object too large for cache\r\n");
  EXPECT_FALSE(ev[0].error.close);
  EXPECT_EQ(ev[0].error.swallowed, 1403u);
  EXPECT_EQ(ev[1].request.cmd, Cmd::kGet);
  EXPECT_EQ(req("set k 0 0 1400\r\n" + std::string(1400, 'v') + "\r\n").value.size(), 1400u);
  // Answered at once, the block swallowed as it trickles in.
  Parser p(Limits{});
  size_t used = 0;
  std::string line = "ms k 100000 T5\r\n";
  ParseResult r = p.next(line, &used);
  EXPECT_EQ(r.kind, ParseResult::kError);
  EXPECT_EQ(r.error.line, "SERVER_ERROR object too large for cache\r\n");
  EXPECT_EQ(used, line.size());
  EXPECT_EQ(p.swallowing(), 100002u);
  const std::string chunk(40000, 'z');
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(p.next(chunk, &used).kind, ParseResult::kNeedMore);
    EXPECT_EQ(used, chunk.size());
  }
  const std::string tail = std::string(20000, 'z') + "\r\nmn\r\n";
  r = p.next(tail, &used);
  ASSERT_EQ(r.kind, ParseResult::kRequest);
  EXPECT_EQ(r.request.cmd, Cmd::kMetaNoop);
  EXPECT_EQ(used, tail.size());
  EXPECT_EQ(p.swallowing(), 0u);
  // With noreply memcached answers nothing, but the block still goes.
  ev = parse("set k 0 0 1401 noreply\r\n" + big + "\r\nget k\r\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_TRUE(ev[0].error.noreply);
  EXPECT_EQ(ev[1].request.cmd, Cmd::kGet);
}

TEST(TextLimits, WrongDataLengthIsABadDataChunk) {
  // One byte too many: <bytes> + 2 are taken as the block (as memcached), the rest is a line.
  auto ev = parse("set k 0 0 3\r\nabcd\r\nget a\r\n");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].error.line, "CLIENT_ERROR bad data chunk\r\n");
  EXPECT_EQ(ev[0].error.swallowed, 5u);
  EXPECT_EQ(ev[1].error.line, "ERROR\r\n");  // the lone "\n" left of "abcd\r\n"
  EXPECT_EQ(ev[2].request.keys, keys({"a"}));
  // One byte short: the block runs into the next command, which is lost.
  ev = parse("set k 0 0 5\r\nabc\r\nget a\r\nget b\r\n");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].error.line, "CLIENT_ERROR bad data chunk\r\n");
  EXPECT_EQ(ev[1].error.line, "ERROR\r\n");  // "t a"
  EXPECT_EQ(ev[2].request.keys, keys({"b"}));
  // Incomplete: wait, do not guess.
  EXPECT_TRUE(parse("set k 0 0 5\r\nabc\r\n").empty());
  EXPECT_TRUE(err("set k 0 0 1 noreply\r\nxyz").noreply);
}

TEST(TextLimits, BinaryMagicCloses) {
  std::string left;
  auto ev = feed({"\x80\x00\x00\x05\x00\x00\x00\x00"s}, {}, &left);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].error.line, "CLIENT_ERROR binary protocol not supported\r\n");
  EXPECT_TRUE(ev[0].error.close);
  // Also after text commands, at the start of a command.
  ev = parse("get a\r\n\x80\x01\r\n"s);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].request.cmd, Cmd::kGet);
  EXPECT_TRUE(ev[1].error.close);
  // Inside a data block it is data.
  EXPECT_EQ(req("set k 0 0 1\r\n\x80\r\n").value, "\x80");
}

// ---------------------------------------------------------------- pipelining

// Every kind of verdict but a close, pipelined.
std::string pipeline() {
  return "get a b c\r\n"
         "set k 5 100 5\r\nhe\r\nl\r\n"
         "gets k\n"
         "cas k 0 0 1 77 noreply\r\nx\r\n"
         "incr n 5\r\n"
         "bogus\r\n"
         "set k 0 0 1401\r\n" + std::string(1401, 'b') + "\r\n"
         "set k 0 0 2\r\nabc\r\n"
         "delete k noreply\r\n"
         "touch k 10\r\n"
         "gat 5 a b\r\n"
         "mg " + std::string(251, 'x') + " v\r\n"
         "mg Zm9v b v k Oop t c f s q\r\n"
         "ms foo 3 T60 F9 MA I c\r\nbar\r\n"
         "ms foo 2 MX\r\nhi\r\n"
         "md foo q C12\r\n"
         "ma foo D7 MD N30 J1 v\r\n"
         "me foo\r\n"
         "mn\r\n"
         "\r\n"
         "flush_all 0\r\n"
         "verbosity 1\r\n"
         "version\r\n"
         "stats items\r\n";
}

TEST(TextPipeline, SplitAtEveryByteGivesTheSameVerdicts) {
  const std::string in = pipeline() + "quit\r\n";
  const auto whole = parse(in);
  ASSERT_EQ(whole.size(), 26u);
  EXPECT_EQ(whole.back().request.cmd, Cmd::kQuit);
  for (size_t cut = 0; cut <= in.size(); ++cut) {
    ASSERT_EQ(feed({in.substr(0, cut), in.substr(cut)}), whole) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (char c : in) bytes.emplace_back(1, c);
  EXPECT_EQ(feed(bytes), whole);
}

TEST(TextPipeline, SplitBeforeAClose) {
  const std::string in = pipeline() + std::string(3000, 'y');
  const auto whole = parse(in);
  ASSERT_TRUE(whole.back().error.close);
  for (size_t cut = 0; cut <= in.size(); cut += 7) {
    ASSERT_EQ(feed({in.substr(0, cut), in.substr(cut)}), whole) << "cut at " << cut;
  }
}

// ---------------------------------------------------------------- meta commands

TEST(MetaParse, GetWithFlags) {
  Request r = req("mg foo v k O123 q T30 t c f s h l N5 R10 E99 u\r\n");
  EXPECT_EQ(r.cmd, Cmd::kMetaGet);
  EXPECT_TRUE(is_meta(r.cmd));
  EXPECT_EQ(r.keys, keys({"foo"}));
  ASSERT_EQ(r.meta.list.size(), 15u);
  EXPECT_EQ(r.meta.list[0], (MetaFlag{'v', ""}));
  EXPECT_EQ(r.meta.list[2], (MetaFlag{'O', "123"}));
  EXPECT_TRUE(r.meta.value());
  EXPECT_TRUE(r.meta.return_key());
  EXPECT_TRUE(r.meta.quiet());
  EXPECT_FALSE(r.meta.base64_key());
  EXPECT_EQ(r.meta.opaque(), "123");
  EXPECT_EQ(r.meta.ttl(), 30);
  EXPECT_EQ(r.meta.token('N'), "5");
  EXPECT_TRUE(r.noreply);
  EXPECT_EQ(r.exptime, 30);
  r = req("mg foo\r\n");  // no flags: HD on a hit, EN on a miss
  EXPECT_TRUE(r.meta.list.empty());
  EXPECT_FALSE(r.meta.opaque().has_value());
  EXPECT_FALSE(r.meta.ttl().has_value());
  EXPECT_EQ(r.meta.mode(), '\0');
}

TEST(MetaParse, Set) {
  Request r = req("ms foo 5 T10 F3 MA I C42 q\r\nhello\r\n");
  EXPECT_EQ(r.cmd, Cmd::kMetaSet);
  EXPECT_EQ(r.keys, keys({"foo"}));
  EXPECT_EQ(r.value, "hello");
  EXPECT_EQ(r.exptime, 10);
  EXPECT_EQ(r.flags, 3u);
  EXPECT_EQ(r.meta.client_flags(), 3u);
  EXPECT_EQ(r.meta.mode(), 'A');
  EXPECT_EQ(r.cas, 42u);
  EXPECT_TRUE(r.noreply);
  for (char m : std::string("EAPRS")) {
    EXPECT_EQ(req("ms k 1 M" + std::string(1, m) + "\r\nx\r\n").meta.mode(), m);
  }
  EXPECT_EQ(req("ms k 0\r\n\r\n").value, "");
}

TEST(MetaParse, DeleteArithmeticNoopDebug) {
  Request r = req("md foo q C12 I T30 x\r\n");
  EXPECT_EQ(r.cmd, Cmd::kMetaDelete);
  EXPECT_EQ(r.cas, 12u);
  EXPECT_TRUE(r.noreply);
  r = req("ma foo\r\n");
  EXPECT_EQ(r.cmd, Cmd::kMetaArithmetic);
  EXPECT_EQ(r.delta, 1u);  // protocol.txt: D defaults to 1
  r = req("ma foo D18446744073709551615 MD N0 J10 v t c k\r\n");
  EXPECT_EQ(r.delta, 18446744073709551615ull);
  EXPECT_EQ(r.meta.mode(), 'D');
  EXPECT_EQ(r.meta.token('J'), "10");
  for (const char* m : {"I", "D", "+", "-"}) EXPECT_EQ(req("ma k M" + std::string(m) + "\r\n").meta.mode(), m[0]);
  r = req("mn\r\n");
  EXPECT_EQ(r.cmd, Cmd::kMetaNoop);
  EXPECT_TRUE(r.keys.empty());
  r = req("me foo\r\n");
  EXPECT_EQ(r.cmd, Cmd::kMetaDebug);
  EXPECT_EQ(r.keys, keys({"foo"}));
  EXPECT_EQ(req("me Zm9v b\r\n").keys, keys({"foo"}));
  EXPECT_EQ(req("mg foo Pproxy/path Lroute v\r\n").meta.list.size(), 3u);  // P, L: hints, kept
}

TEST(MetaParse, Base64Keys) {
  Request r = req("mg AAEC/w== b v\r\n");
  ASSERT_EQ(r.keys.size(), 1u);
  EXPECT_EQ(r.keys[0], "\x00\x01\x02\xff"s);
  EXPECT_TRUE(r.meta.base64_key());
  EXPECT_EQ(req("ms Zm9vYg== 1 b\r\nx\r\n").keys, keys({"foob"}));
  for (const char* bad : {"mg Zm9 b\r\n", "mg Zm9v! b\r\n", "mg Z=9v b\r\n", "mg ==== b\r\n"}) {
    EXPECT_EQ(err(bad).line, "CLIENT_ERROR error decoding key\r\n") << bad;
  }
  // Without b the same token is a plain key.
  EXPECT_EQ(req("mg Zm9v v\r\n").keys, keys({"Zm9v"}));
}

TEST(MetaParse, FlagErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"mg foo v v\r\n", "CLIENT_ERROR duplicate flag\r\n"},
      {"mg foo Z\r\n", "CLIENT_ERROR invalid flag\r\n"},
      {"mg foo \x01\r\n", "CLIENT_ERROR invalid flag\r\n"},
      {"mg foo \xc3\xa9\r\n", "CLIENT_ERROR invalid flag\r\n"},
      {"mg foo Tsoon\r\n", "CLIENT_ERROR bad token in command line format\r\n"},
      {"mg foo T\r\n", "CLIENT_ERROR bad token in command line format\r\n"},
      {"mg foo N-\r\n", "CLIENT_ERROR bad token in command line format\r\n"},
      {"md foo C-1\r\n", "CLIENT_ERROR bad token in command line format\r\n"},
      {"ma foo E1x\r\n", "CLIENT_ERROR bad token in command line format\r\n"},
      {"ma foo Dx\r\n", "CLIENT_ERROR invalid numeric delta value\r\n"},
      {"ma foo J-1\r\n", "CLIENT_ERROR invalid numeric initial value\r\n"},
      {"ma foo MX\r\n", "CLIENT_ERROR invalid mode for ma M token\r\n"},
      {"mg foo O123456789012345678901234567890123\r\n", "CLIENT_ERROR opaque token too long\r\n"},
      {"mg foo v k c f s t h l u q O1 T1 N1 R1 E1 P L x J1\r\n",
       "CLIENT_ERROR options flags are too long\r\n"},
      {"mg\r\n", "CLIENT_ERROR bad command line format\r\n"},
      {"ms foo\r\n", "CLIENT_ERROR bad command line format\r\n"},
      {"ms foo -1\r\n", "CLIENT_ERROR bad command line format\r\n"},
      {"ms foo T5\r\n", "CLIENT_ERROR bad command line format\r\n"},
      {"mn q\r\n", "CLIENT_ERROR bad command line format\r\n"},
  };
  for (auto [line, want] : cases) {
    ParseError e = err(line);
    EXPECT_EQ(e.line, want) << line;
    EXPECT_FALSE(e.close) << line;
    EXPECT_FALSE(e.noreply) << line;  // meta errors are always returned, q or not
  }
  EXPECT_EQ(req("mg foo O12345678901234567890123456789012\r\n").meta.opaque()->size(), 32u);
  // 20 tokens is the most memcached takes.
  EXPECT_EQ(req("mg foo v k c f s t h l u q O1 T1 N1 R1 E1 P L x\r\n").meta.list.size(), 18u);
  EXPECT_FALSE(err("mg foo q Z\r\n").noreply);
}

TEST(MetaParse, SetErrorsSwallowTheBlock) {
  for (const char* line : {"ms foo 2 MX\r\nhi\r\n", "ms foo 2 v v\r\nhi\r\n", "ms foo 2 Fx\r\nhi\r\n",
                           "ms Zm9 2 b\r\nhi\r\n"}) {
    auto ev = parse(std::string(line) + "mn\r\n");
    ASSERT_EQ(ev.size(), 2u) << line;
    EXPECT_EQ(ev[0].kind, ParseResult::kError) << line;
    EXPECT_EQ(ev[0].error.swallowed, 4u) << line;
    EXPECT_EQ(ev[1].request.cmd, Cmd::kMetaNoop) << line;
  }
  EXPECT_EQ(err("ms foo 2 MX\r\nhi\r\n").line, "CLIENT_ERROR invalid mode for ms M token\r\n");
  auto ev = parse("ms foo 1401 q\r\n" + std::string(1401, 'x') + "\r\nmn\r\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].error.line, "SERVER_ERROR object too large for cache\r\n");
  EXPECT_FALSE(ev[0].error.noreply);
  EXPECT_EQ(ev[1].request.cmd, Cmd::kMetaNoop);
  ev = parse("ms foo 2 q\r\nhiX\r\nmn\r\n");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].error.line, "CLIENT_ERROR bad data chunk\r\n");
  EXPECT_FALSE(ev[0].error.noreply);
}

// ---------------------------------------------------------------- encoder

TEST(TextReply, ClassicResponses) {
  std::string out;
  reply::value(out, "k", 5, "he\r\nl");
  reply::value(out, "k2", 4294967295u, "", 18446744073709551615ull);
  reply::end(out);
  EXPECT_EQ(out, "VALUE k 5 5\r\nhe\r\nl\r\nVALUE k2 4294967295 0 18446744073709551615\r\n\r\nEND\r\n");
  out.clear();
  reply::stored(out);
  reply::not_stored(out);
  reply::exists(out);
  reply::not_found(out);
  reply::deleted(out);
  reply::touched(out);
  reply::ok(out);
  reply::number(out, 42);
  reply::version(out, "1.6.0-exo");
  reply::stat(out, "curr_connections", "3");
  reply::error(out);
  reply::client_error(out, "bad data chunk");
  reply::server_error(out, "out of memory");
  EXPECT_EQ(out,
            "STORED\r\nNOT_STORED\r\nEXISTS\r\nNOT_FOUND\r\nDELETED\r\nTOUCHED\r\nOK\r\n42\r\n"
            "VERSION 1.6.0-exo\r\nSTAT curr_connections 3\r\nERROR\r\n"
            "CLIENT_ERROR bad data chunk\r\nSERVER_ERROR out of memory\r\n");
}

TEST(MetaReply, ReturnFlagsInRequestOrder) {
  const Request r = req("mg foo s v t Oabc f c k h l q\r\n");
  reply::MetaItem item;
  item.client_flags = 7;
  item.cas = 99;
  item.ttl = -1;
  item.size = 5;
  item.hit_before = true;
  item.last_access = 12;
  std::string out;
  reply::meta_value(out, r, item, "hello");
  EXPECT_EQ(out, "VA 5 s5 t-1 Oabc f7 c99 kfoo h1 l12\r\nhello\r\n");
  out.clear();
  reply::meta_hit_no_value(out, r, reply::MetaItem{});  // fields not filled in are left out
  EXPECT_EQ(out, "HD Oabc kfoo\r\n");
  out.clear();
  reply::meta_hit_no_value(out, req("ms foo 1\r\nx\r\n"), item);
  EXPECT_EQ(out, "HD\r\n");
}

TEST(MetaReply, OpaqueAndKeyOnEveryCode) {
  const Request r = req("md foo Oxyz k c q\r\n");
  std::string out;
  reply::meta_miss(out, r);
  reply::meta_not_found(out, r);
  reply::meta_not_stored(out, r);
  reply::meta_exists(out, r);
  reply::meta_noop(out);
  EXPECT_EQ(out, "EN Oxyz kfoo\r\nNF Oxyz kfoo\r\nNS Oxyz kfoo\r\nEX Oxyz kfoo\r\nMN\r\n");
}

TEST(MetaReply, Base64KeyIsEchoedEncoded) {
  const Request r = req("mg AAEC/w== b k v O1\r\n");
  std::string out;
  reply::meta_value(out, r, {}, "x");
  EXPECT_EQ(out, "VA 1 kAAEC/w== b O1\r\nx\r\n");
  out.clear();
  reply::meta_debug(out, r, "exp=-1 la=3 cas=7 fetch=no cls=1 size=64");
  EXPECT_EQ(out, "ME AAEC/w== exp=-1 la=3 cas=7 fetch=no cls=1 size=64\r\n");
  out.clear();
  reply::meta_debug(out, req("me foo\r\n"), "exp=-1");
  EXPECT_EQ(out, "ME foo exp=-1\r\n");
}

TEST(MetaReply, QuietSuppression) {
  using reply::MetaOutcome;
  using reply::quiet_suppresses;
  EXPECT_TRUE(quiet_suppresses(Cmd::kMetaGet, MetaOutcome::kMiss));
  EXPECT_FALSE(quiet_suppresses(Cmd::kMetaGet, MetaOutcome::kHit));
  EXPECT_FALSE(quiet_suppresses(Cmd::kMetaGet, MetaOutcome::kValue));
  EXPECT_TRUE(quiet_suppresses(Cmd::kMetaSet, MetaOutcome::kHit));
  for (auto o : {MetaOutcome::kNotStored, MetaOutcome::kExists, MetaOutcome::kNotFound}) {
    EXPECT_FALSE(quiet_suppresses(Cmd::kMetaSet, o));
    EXPECT_FALSE(quiet_suppresses(Cmd::kMetaDelete, o));
    EXPECT_FALSE(quiet_suppresses(Cmd::kMetaArithmetic, o));
  }
  EXPECT_TRUE(quiet_suppresses(Cmd::kMetaDelete, MetaOutcome::kHit));
  EXPECT_TRUE(quiet_suppresses(Cmd::kMetaArithmetic, MetaOutcome::kHit));
  EXPECT_TRUE(quiet_suppresses(Cmd::kMetaArithmetic, MetaOutcome::kValue));
  EXPECT_FALSE(quiet_suppresses(Cmd::kMetaNoop, MetaOutcome::kHit));
  EXPECT_FALSE(quiet_suppresses(Cmd::kMetaDebug, MetaOutcome::kMiss));
  EXPECT_FALSE(quiet_suppresses(Cmd::kGet, MetaOutcome::kMiss));
}

TEST(Base64, RoundTrip) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += char(i);
  for (size_t n = 0; n <= all.size(); n += 1) {
    std::string enc, dec;
    base64::encode(all.substr(0, n), enc);
    EXPECT_EQ(enc.size() % 4, 0u);
    if (n == 0) {
      EXPECT_FALSE(base64::decode(enc, dec));  // an empty key is no key
      continue;
    }
    ASSERT_TRUE(base64::decode(enc, dec)) << enc;
    EXPECT_EQ(dec, all.substr(0, n));
  }
  std::string out;
  base64::encode("foo", out);
  EXPECT_EQ(out, "Zm9v");
  EXPECT_FALSE(base64::decode("Zm9v=", out));
  EXPECT_FALSE(base64::decode("Zg=v", out));
}

}  // namespace
}  // namespace exo::proxy
