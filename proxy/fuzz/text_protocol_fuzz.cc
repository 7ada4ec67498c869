// libFuzzer target: the memcached text/meta parser (proxy/src/text_protocol.h) on arbitrary
// bytes, as a connection would feed it. Input: [limits:4][split seed:1][stream...]. The stream
// is parsed twice, whole and cut into small random chunks; both must give the same verdicts
// (the parser's promise that splitting never matters). Invariants: consumed stays within the
// input, every verdict consumes something (so a connection loop always progresses), requests
// respect the limits, error lines are complete lines, and the encoder takes every request.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "text_protocol.h"

using namespace exo::proxy;

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

struct Event {
  ParseResult::Kind kind;
  Request request;
  ParseError error;
  bool operator==(const Event&) const = default;
};

void check_request(const Request& r, const Limits& l) {
  const bool retrieval =
      r.cmd == Cmd::kGet || r.cmd == Cmd::kGets || r.cmd == Cmd::kGat || r.cmd == Cmd::kGats;
  if (retrieval) check(!r.keys.empty() && r.keys.size() <= l.max_keys_per_get, "get key count");
  if (r.cmd != Cmd::kStats) {
    for (const std::string& k : r.keys) check(!k.empty() && k.size() <= l.max_key, "key length");
  }
  check(r.value.size() <= l.max_value, "value within max_value");
  check(r.meta.list.size() <= 18, "at most 18 meta flags");
  if (!is_meta(r.cmd)) check(r.meta.list.empty(), "meta flags on a classic command");

  // Every request can be answered.
  std::string out;
  if (is_meta(r.cmd)) {
    reply::MetaItem item{1, 2, -1, r.value.size(), true, 3};
    reply::meta_value(out, r, item, r.value);
    reply::meta_hit_no_value(out, r, item);
    reply::meta_miss(out, r);
    reply::meta_exists(out, r);
    if (r.cmd == Cmd::kMetaDebug) reply::meta_debug(out, r, "exp=-1");
  } else {
    for (const std::string& k : r.keys) reply::value(out, k, r.flags, r.value, r.cas);
    reply::end(out);
  }
  check(out.size() >= 2 && out.compare(out.size() - 2, 2, "\r\n") == 0, "reply ends in \\r\\n");
}

// Feeds `in` in chunks of the sizes `next_chunk` returns (0: all at once).
template <typename NextChunk>
std::vector<Event> run(std::string_view in, const Limits& limits, NextChunk next_chunk,
                       uint64_t* swallowing) {
  Parser p(limits);
  std::string buf;
  std::vector<Event> events;
  size_t pos = 0;
  while (pos < in.size()) {
    const size_t n = std::min(in.size() - pos, next_chunk());
    buf.append(in.substr(pos, n));
    pos += n;
    // Each verdict consumes at least one byte, so this loop ends within buf.size() + 1 turns.
    const size_t budget = buf.size() + 1;
    for (size_t turns = 0;; ++turns) {
      check(turns <= budget, "parser loops without progress");
      size_t used = 0;
      ParseResult r = p.next(buf, &used);
      check(used <= buf.size(), "consumed beyond the input");
      buf.erase(0, used);
      if (r.kind == ParseResult::kNeedMore) break;
      check(used > 0, "a verdict that consumed nothing");
      if (r.kind == ParseResult::kRequest) {
        check_request(r.request, limits);
      } else {
        const std::string_view line = r.error.line;
        check(line.size() > 2 && line.substr(line.size() - 2) == "\r\n", "error line");
      }
      events.push_back({r.kind, std::move(r.request), r.error});
      if (r.kind == ParseResult::kError && r.error.close) {
        *swallowing = 0;
        return events;
      }
    }
  }
  *swallowing = p.swallowing();
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  Limits limits;
  if ((data[0] & 1) == 0) {  // small limits, so that every limit is within reach
    limits.max_line = 4 + data[1] % 64;
    limits.max_key = 1 + data[2] % 40;
    limits.max_value = (data[3] % 64) * 4;
    limits.max_keys_per_get = 1 + (data[0] >> 1) % 8;
  }
  uint32_t seed = data[4] | 1u;
  const std::string_view in(reinterpret_cast<const char*>(data) + 5, size - 5);

  uint64_t swallow_whole = 0, swallow_split = 0;
  const auto whole = run(in, limits, [&] { return in.size(); }, &swallow_whole);
  const auto split = run(in, limits, [&] {
    seed = seed * 1103515245u + 12345u;  // small chunks, often a single byte
    return size_t(1 + (seed >> 16) % 17);
  }, &swallow_split);
  check(whole == split, "verdicts depend on how the input was split");
  check(swallow_whole == swallow_split, "swallow state depends on the split");
  return 0;
}
