// The classic text commands, one line each (protocol.txt "Commands" to "Other commands").
// Token counts are strict: a token memcached would silently ignore is an error here, so what
// the proxy forwards is never a guess.
#include <climits>
#include <string>

#include "line_parsers.h"

namespace exo::proxy::detail {
namespace {

LineOutcome ok() { return {}; }

bool is_noreply(const Tokens& tok, size_t i) { return tok.n == i + 1 && tok[i] == kNoreply; }

// <key> [<arg>] [noreply]: `fixed` tokens, then optionally noreply.
bool shape_ok(const Tokens& tok, size_t fixed) {
  return !tok.overflow && (tok.n == fixed || is_noreply(tok, fixed));
}

// set/add/replace/append/prepend <key> <flags> <exptime> <bytes> [noreply]
// cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]
LineOutcome parse_storage(const Tokens& tok, const Limits& limits, Request& req) {
  const size_t fixed = req.cmd == Cmd::kCas ? 6 : 5;
  if (tok.n < 5) return line_error(kBadFormat);
  // <bytes> first: once it is known, every later error swallows the block (memcached too).
  int32_t bytes = 0;
  if (!parse_number(tok[4], &bytes) || bytes < 0 || bytes > INT_MAX - 2) {
    return line_error(kBadFormat);
  }
  LineOutcome out{{}, true, static_cast<uint64_t>(bytes)};
  if (tok.n < fixed || !shape_ok(tok, fixed)) {
    out.error = kBadFormat;
    return out;
  }
  if (const KeyCheck k = check_key(tok[1], limits.max_key); k != KeyCheck::kOk) {
    out.error = key_error(k);
    return out;
  }
  if (!parse_number(tok[2], &req.flags) || !parse_number(tok[3], &req.exptime) ||
      (req.cmd == Cmd::kCas && !parse_number(tok[5], &req.cas))) {
    out.error = kBadFormat;
    return out;
  }
  req.keys.emplace_back(tok[1]);
  req.noreply = tok.n == fixed + 1;
  return out;
}

// delete <key> [0] [noreply]: the "0" is a relic of delete's old hold time; memcached still
// accepts exactly that value and answers anything else with its usage line.
LineOutcome parse_delete(const Tokens& tok, Request& req) {
  const bool hold_zero = tok.n >= 3 && tok[2] == "0";
  const size_t fixed = hold_zero ? 3 : 2;
  if (tok.n < 2 || !shape_ok(tok, fixed)) return line_error(kDeleteUsage);
  req.noreply = tok.n == fixed + 1;
  return ok();
}

// incr/decr <key> <value> [noreply], touch <key> <exptime> [noreply]
LineOutcome parse_key_number(const Tokens& tok, Request& req) {
  if (tok.n < 3 || !shape_ok(tok, 3)) return line_error(kBadFormat);
  if (req.cmd == Cmd::kTouch) {
    if (!parse_number(tok[2], &req.exptime)) return line_error(kBadExptime);
  } else if (!parse_number(tok[2], &req.delta)) {
    return line_error(kBadDelta);
  }
  req.noreply = tok.n == 4;
  return ok();
}

// flush_all [delay] [noreply]
LineOutcome parse_flush_all(const Tokens& tok, Request& req) {
  if (tok.overflow || tok.n > 3) return line_error(kBadFormat);
  size_t args = tok.n - 1;
  if (args > 0 && tok[tok.n - 1] == kNoreply) {
    req.noreply = true;
    --args;
  }
  if (args == 1) {
    // A delay in seconds; negative makes no sense for "invalidate after".
    if (!parse_number(tok[1], &req.exptime) || req.exptime < 0) return line_error(kBadFormat);
  } else if (args > 1) {
    return line_error(kBadFormat);
  }
  return ok();
}

}  // namespace

LineOutcome parse_retrieval(std::string_view line, const Limits& limits, Request& req) {
  Splitter split(line);
  std::string_view tok;
  split.next(&tok);  // the command
  if (req.cmd == Cmd::kGat || req.cmd == Cmd::kGats) {
    if (!split.next(&tok)) return line_error(kBadFormat);
    if (!parse_number(tok, &req.exptime)) return line_error(kBadExptime);
  }
  while (split.next(&tok)) {
    if (req.keys.size() == limits.max_keys_per_get) return line_error(kTooManyKeys);
    if (const KeyCheck k = check_key(tok, limits.max_key); k != KeyCheck::kOk) {
      return line_error(key_error(k));
    }
    req.keys.emplace_back(tok);
  }
  if (req.keys.empty()) return line_error(kBadFormat);
  return ok();
}

LineOutcome parse_classic(const Tokens& tok, const Limits& limits, Request& req) {
  // Commands on one key: check it before anything else, as memcached does.
  switch (req.cmd) {
    case Cmd::kDelete: case Cmd::kIncr: case Cmd::kDecr: case Cmd::kTouch:
      if (tok.n < 2) return line_error(req.cmd == Cmd::kDelete ? kDeleteUsage : kBadFormat);
      if (const KeyCheck k = check_key(tok[1], limits.max_key); k != KeyCheck::kOk) {
        return line_error(key_error(k));
      }
      break;
    default:
      break;
  }
  LineOutcome out;
  switch (req.cmd) {
    case Cmd::kSet: case Cmd::kAdd: case Cmd::kReplace: case Cmd::kAppend: case Cmd::kPrepend:
    case Cmd::kCas:
      return parse_storage(tok, limits, req);
    case Cmd::kDelete:
      out = parse_delete(tok, req);
      break;
    case Cmd::kIncr: case Cmd::kDecr: case Cmd::kTouch:
      out = parse_key_number(tok, req);
      break;
    case Cmd::kVersion: case Cmd::kQuit:
      // memcached ignores anything after these two (memccapable sends "version foo bar" and
      // expects a VERSION line), so the proxy does too.
      return ok();
    case Cmd::kStats:
      if (tok.overflow) return line_error(kBadFormat);
      for (size_t i = 1; i < tok.n; ++i) req.keys.emplace_back(tok[i]);
      return ok();
    case Cmd::kFlushAll:
      return parse_flush_all(tok, req);
    case Cmd::kVerbosity:
      if (tok.n < 2 || !shape_ok(tok, 2) || !parse_number(tok[1], &req.verbosity)) {
        return line_error(kBadFormat);
      }
      req.noreply = tok.n == 3;
      return ok();
    default:
      return line_error(kError);  // not a classic command: the caller never sends one here
  }
  if (out.error.empty()) req.keys.emplace_back(tok[1]);
  return out;
}

}  // namespace exo::proxy::detail
