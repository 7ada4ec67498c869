#include "mcload/reply_parser.h"

#include <algorithm>

namespace exo::mcload {
namespace {

constexpr std::string_view kValue = "VALUE ";
constexpr std::string_view kEnd = "END\r\n";
constexpr std::string_view kDataTail = "\r\nEND\r\n";  // after a VALUE's data block
constexpr std::string_view kErrorPrefixes[] = {"ERROR", "CLIENT_ERROR", "SERVER_ERROR"};
constexpr size_t kMaxKey = 250;  // memcached's KEY_MAX_LENGTH
constexpr unsigned kMaxU32Digits = 10;

Reply need_more() { return Reply{}; }

Reply malformed(std::string_view why) {
  Reply r;
  r.kind = ReplyKind::kMalformed;
  r.line = why;
  return r;
}

bool starts_with(std::string_view s, std::string_view lit) { return s.substr(0, lit.size()) == lit; }

// `s` is shorter than `lit` and could still become it.
bool proper_prefix_of(std::string_view s, std::string_view lit) {
  return s.size() < lit.size() && lit.substr(0, s.size()) == s;
}

enum class Line : uint8_t { kComplete, kIncomplete, kBad };

// The first line of `buf`: complete when "\r\n" ends it within kMaxReplyLine bytes (*end: the
// index of its '\r'); bad on a bare '\n', a '\r' not followed by '\n', or kMaxReplyLine bytes
// without a line end; else incomplete. A prefix of the buffer is never "more" than the buffer.
Line first_line(std::string_view buf, size_t* end) {
  const size_t limit = std::min(buf.size(), kMaxReplyLine);
  for (size_t i = 0; i < limit; ++i) {
    if (buf[i] == '\n') return Line::kBad;
    if (buf[i] != '\r') continue;
    if (i + 1 >= kMaxReplyLine) return Line::kBad;
    if (i + 1 >= buf.size()) return Line::kIncomplete;
    if (buf[i + 1] != '\n') return Line::kBad;
    *end = i;
    return Line::kComplete;
  }
  return buf.size() >= kMaxReplyLine ? Line::kBad : Line::kIncomplete;
}

// A decimal u32 at the front of *s (1..10 digits, no sign, no overflow); consumes it.
bool take_u32(std::string_view* s, uint64_t* out) {
  uint64_t v = 0;
  size_t d = 0;
  while (d < s->size() && (*s)[d] >= '0' && (*s)[d] <= '9' && d <= kMaxU32Digits) v = v * 10 + ((*s)[d++] - '0');
  if (d == 0 || d > kMaxU32Digits || v > UINT32_MAX) return false;
  s->remove_prefix(d);
  *out = v;
  return true;
}

bool take(std::string_view* s, char c) {
  if (s->empty() || s->front() != c) return false;
  s->remove_prefix(1);
  return true;
}

Reply parse_value(std::string_view buf, size_t max_value) {
  size_t end = 0;
  switch (first_line(buf, &end)) {
    case Line::kIncomplete: return need_more();
    case Line::kBad: return malformed("VALUE line without \\r\\n within 2048 bytes, or a stray CR/LF");
    case Line::kComplete: break;
  }
  std::string_view rest = buf.substr(kValue.size(), end - kValue.size());
  size_t k = 0;
  while (k < rest.size() && static_cast<unsigned char>(rest[k]) > 0x20 && rest[k] != 0x7f) ++k;
  if (k == 0 || k > kMaxKey) return malformed("VALUE line: bad key");
  Reply r;
  r.key = rest.substr(0, k);
  rest.remove_prefix(k);
  uint64_t flags = 0, len = 0;
  if (!take(&rest, ' ') || !take_u32(&rest, &flags) || !take(&rest, ' ') || !take_u32(&rest, &len) || !rest.empty())
    return malformed("VALUE line: want VALUE <key> <flags> <bytes>");
  if (len > max_value) return malformed("VALUE line: <bytes> over the value size limit");
  const size_t data = end + 2;
  if (buf.size() < data + len) return need_more();
  const std::string_view tail = buf.substr(data + len);
  if (tail.size() < kDataTail.size())
    return proper_prefix_of(tail, kDataTail) ? need_more() : malformed("data block not followed by \\r\\nEND\\r\\n");
  if (!starts_with(tail, kDataTail)) return malformed("data block not followed by \\r\\nEND\\r\\n");
  r.kind = ReplyKind::kHit;
  r.value_len = static_cast<size_t>(len);
  r.consumed = data + len + kDataTail.size();
  return r;
}

// `buf` starts with `prefix` (an error word): the word alone or followed by " <message>", then
// "\r\n". Sets *matched false if the word continues ("ERRORS"): then it is not this prefix.
Reply parse_error(std::string_view buf, std::string_view prefix, bool* matched) {
  *matched = true;
  if (buf.size() == prefix.size()) return need_more();
  const char next = buf[prefix.size()];
  if (next != ' ' && next != '\r') {
    *matched = false;
    return need_more();
  }
  size_t end = 0;
  switch (first_line(buf, &end)) {
    case Line::kIncomplete: return need_more();
    case Line::kBad: return malformed("error line without \\r\\n within 2048 bytes, or a stray CR/LF");
    case Line::kComplete: break;
  }
  Reply r;
  r.kind = ReplyKind::kError;
  r.line = buf.substr(0, end);
  r.consumed = end + 2;
  return r;
}

}  // namespace

Reply parse_reply(std::string_view buf, size_t max_value) {
  if (buf.empty()) return need_more();
  if (starts_with(buf, kValue)) return parse_value(buf, max_value);
  if (starts_with(buf, kEnd)) {
    Reply r;
    r.kind = ReplyKind::kMiss;
    r.consumed = kEnd.size();
    return r;
  }
  // Longest first: "CLIENT_ERROR" and "SERVER_ERROR" do not start with "ERROR", but keep the
  // order obviously safe anyway.
  for (auto it = std::rbegin(kErrorPrefixes); it != std::rend(kErrorPrefixes); ++it) {
    if (!starts_with(buf, *it)) continue;
    bool matched = false;
    Reply r = parse_error(buf, *it, &matched);
    if (matched) return r;
  }
  if (proper_prefix_of(buf, kValue) || proper_prefix_of(buf, kEnd)) return need_more();
  for (std::string_view p : kErrorPrefixes)
    if (proper_prefix_of(buf, p)) return need_more();
  return malformed("not a reply to get (want VALUE, END or an error line)");
}

const char* reply_kind_name(ReplyKind k) {
  switch (k) {
    case ReplyKind::kNeedMore: return "need_more";
    case ReplyKind::kHit: return "hit";
    case ReplyKind::kMiss: return "miss";
    case ReplyKind::kError: return "error";
    case ReplyKind::kMalformed: return "malformed";
  }
  return "?";
}

}  // namespace exo::mcload
