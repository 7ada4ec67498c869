// The reply parser's stream invariants (mcload/reply_parser.h), shared by its tests and its
// fuzzer: consumed stays inside the buffer; a complete reply parses the same with anything
// after it; every shorter prefix of a complete reply needs more; a prefix of a malformed
// buffer is never a complete reply; a hit's key and value lie inside the reply.
#pragma once

#include <string>
#include <string_view>

#include "mcload/reply_parser.h"

namespace exo::mcload::testing {

using ParseFn = Reply (*)(std::string_view, size_t);

// "" or the first invariant `buf` violates under `parse` (the real parser unless a test shows
// that the checker catches a broken one). `cut`: one prefix length to check (all when npos).
inline std::string check_reply_invariants(std::string_view buf, size_t cut = std::string_view::npos,
                                          size_t max_value = kDefaultMaxValue, ParseFn parse = parse_reply) {
  const Reply r = parse(buf, max_value);
  const bool complete = r.kind == ReplyKind::kHit || r.kind == ReplyKind::kMiss || r.kind == ReplyKind::kError;
  if (complete && (r.consumed == 0 || r.consumed > buf.size())) return "consumed outside the buffer";
  if (!complete && r.consumed != 0) return "consumed set on an incomplete or malformed reply";
  if (r.kind == ReplyKind::kHit) {
    if (r.key.empty() || r.key.data() < buf.data() || r.key.data() + r.key.size() > buf.data() + r.consumed)
      return "hit key outside the reply";
    if (r.value_len > max_value || r.value_len > r.consumed) return "hit value longer than the reply";
  }
  if (r.kind == ReplyKind::kError && (r.line.data() < buf.data() || r.line.size() + 2 != r.consumed))
    return "error line is not the reply minus \\r\\n";
  if (complete) {  // the same with anything after it
    const std::string more = std::string(buf.substr(0, r.consumed)) + "VALUE x";
    const Reply again = parse(more, max_value);
    if (again.kind != r.kind || again.consumed != r.consumed) return "a complete reply changed with bytes after it";
  }
  const auto check_prefix = [&](size_t k) -> std::string {
    const Reply p = parse(buf.substr(0, k), max_value);
    if (complete && k < r.consumed && p.kind != ReplyKind::kNeedMore)
      return "prefix of " + std::to_string(k) + " bytes of a complete reply is " + reply_kind_name(p.kind);
    if (complete && k >= r.consumed && (p.kind != r.kind || p.consumed != r.consumed))
      return "prefix of " + std::to_string(k) + " bytes holding the whole reply parses differently";
    if (!complete && p.kind != ReplyKind::kNeedMore && p.kind != r.kind)
      return "prefix of " + std::to_string(k) + " bytes of an incomplete/malformed buffer is " + reply_kind_name(p.kind);
    return "";
  };
  if (cut != std::string_view::npos) return check_prefix(cut > buf.size() ? buf.size() : cut);
  for (size_t k = 0; k < buf.size(); ++k)
    if (std::string e = check_prefix(k); !e.empty()) return e;
  return "";
}

}  // namespace exo::mcload::testing
