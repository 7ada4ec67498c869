// Internal to the text codec: one command line (its \r\n already cut) into a Request. The
// framing around them (line limits, data blocks, swallowing) is Parser::next's.
#pragma once

#include <cstdint>
#include <string_view>

#include "parse_util.h"
#include "text_protocol.h"

namespace exo::proxy::detail {

struct LineOutcome {
  std::string_view error;  // empty: the line parsed into the Request
  // A data block of data_len bytes (+ \r\n) follows the line. Set as soon as <bytes> was read,
  // even when the line then fails, so that the block is swallowed.
  bool has_data = false;
  uint64_t data_len = 0;
};

inline LineOutcome line_error(std::string_view e) { return {e, false, 0}; }

// get/gets/gat/gats (the whole line: keys may be more than Tokens holds).
LineOutcome parse_retrieval(std::string_view line, const Limits& limits, Request& req);
// Every other classic command.
LineOutcome parse_classic(const Tokens& tok, const Limits& limits, Request& req);
// mg/ms/md/ma/me/mn.
LineOutcome parse_meta(const Tokens& tok, const Limits& limits, Request& req);

}  // namespace exo::proxy::detail
