// Parser::next: framing of the text protocol. Finds the command line (bounded by the line
// limits), hands it to the command parsers (classic_commands.cc, meta_commands.cc), then reads
// or swallows the data block a storage command announces.
#include <algorithm>
#include <cstring>
#include <utility>

#include "line_parsers.h"
#include "parse_util.h"
#include "text_protocol.h"

namespace exo::proxy {

size_t retrieval_line_limit(const Limits& limits) {
  return limits.max_line + limits.max_keys_per_get * (limits.max_key + 1);
}

bool is_meta(Cmd cmd) { return cmd >= Cmd::kMetaGet; }

namespace {

constexpr unsigned char kBinaryMagic = 0x80;  // first byte of every binary-protocol request

struct Name {
  std::string_view name;
  Cmd cmd;
};
// Exact, case-sensitive names (protocol.txt: command names are lower-case).
constexpr Name kCommands[] = {
    {"get", Cmd::kGet},         {"gets", Cmd::kGets},         {"set", Cmd::kSet},
    {"add", Cmd::kAdd},         {"replace", Cmd::kReplace},   {"append", Cmd::kAppend},
    {"prepend", Cmd::kPrepend}, {"cas", Cmd::kCas},           {"incr", Cmd::kIncr},
    {"decr", Cmd::kDecr},       {"touch", Cmd::kTouch},       {"gat", Cmd::kGat},
    {"gats", Cmd::kGats},       {"delete", Cmd::kDelete},     {"version", Cmd::kVersion},
    {"stats", Cmd::kStats},     {"quit", Cmd::kQuit},         {"flush_all", Cmd::kFlushAll},
    {"verbosity", Cmd::kVerbosity}, {"mg", Cmd::kMetaGet},    {"ms", Cmd::kMetaSet},
    {"md", Cmd::kMetaDelete},   {"mn", Cmd::kMetaNoop},       {"ma", Cmd::kMetaArithmetic},
    {"me", Cmd::kMetaDebug},
};

const Cmd* lookup(std::string_view name) {
  for (const Name& n : kCommands) {
    if (n.name == name) return &n.cmd;
  }
  return nullptr;
}

bool is_retrieval(Cmd c) {
  return c == Cmd::kGet || c == Cmd::kGets || c == Cmd::kGat || c == Cmd::kGats;
}

// Classic commands whose last token may be "noreply".
bool takes_noreply(Cmd c) {
  switch (c) {
    case Cmd::kSet: case Cmd::kAdd: case Cmd::kReplace: case Cmd::kAppend: case Cmd::kPrepend:
    case Cmd::kCas: case Cmd::kIncr: case Cmd::kDecr: case Cmd::kTouch: case Cmd::kDelete:
    case Cmd::kFlushAll: case Cmd::kVerbosity:
      return true;
    default:
      return false;
  }
}

// Whether a line beginning with `head` (its first bytes, at most 5) may be a get/gets/gat/gats,
// whose lines get retrieval_line_limit(). While fewer than 5 bytes are in, "may" keeps the
// larger limit, so the verdict never depends on how the input was split.
bool maybe_retrieval(std::string_view head) {
  for (std::string_view p : {"get ", "gets ", "gat ", "gats "}) {
    const size_t n = std::min(head.size(), p.size());
    if (head.substr(0, n) == p.substr(0, n)) return true;
  }
  return false;
}

ParseResult need_more() { return {}; }

ParseResult fail(std::string_view line, bool close, bool noreply = false, uint64_t swallowed = 0) {
  ParseResult r;
  r.kind = ParseResult::kError;
  r.error = {line, close, noreply, swallowed};
  return r;
}

}  // namespace

ParseResult Parser::next(std::string_view in, size_t* consumed) {
  *consumed = 0;
  if (swallow_ > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(swallow_, in.size()));
    swallow_ -= n;
    *consumed = n;
    in.remove_prefix(n);
    if (swallow_ > 0 || in.empty()) return need_more();
  }
  size_t used = 0;
  ParseResult r = parse_line(in, &used);
  *consumed += used;
  return r;
}

ParseResult Parser::parse_line(std::string_view in, size_t* consumed) {
  if (in.empty()) return need_more();
  // A binary-protocol client: nothing it sends can be framed as text lines and it cannot read
  // text replies, so there is no resynchronising. Say why once, then close.
  if (static_cast<unsigned char>(in[0]) == kBinaryMagic) {
    *consumed = in.size();
    return fail(detail::kBinary, true);
  }
  const size_t limit =
      maybe_retrieval(in.substr(0, 5)) ? retrieval_line_limit(limits_) : limits_.max_line;
  const size_t scan = std::min(in.size(), limit + 1);
  const char* nl = static_cast<const char*>(std::memchr(in.data(), '\n', scan));
  if (nl == nullptr) {
    // No newline within the limit: there is no telling where the next command starts, so
    // the connection goes (memcached closes silently past 2048 bytes).
    if (in.size() > limit) {
      *consumed = in.size();
      return fail(detail::kLineTooLong, true);
    }
    return need_more();
  }
  const size_t line_len = static_cast<size_t>(nl - in.data()) + 1;
  std::string_view line = in.substr(0, line_len - 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // a bare \n is accepted too

  // An empty line, or one starting with a space, names no command (memcached: ERROR).
  if (line.empty() || line[0] == ' ') {
    *consumed = line_len;
    return fail(detail::kError, false);
  }
  const Cmd* cmd = lookup(line.substr(0, line.find(' ')));
  // memcached honours a trailing noreply even on an unknown command.
  const bool trailing_noreply = detail::last_token(line) == detail::kNoreply;
  if (cmd == nullptr) {
    *consumed = line_len;
    return fail(detail::kError, false, trailing_noreply);
  }

  ParseResult r;
  r.kind = ParseResult::kRequest;
  Request& req = r.request;
  req.cmd = *cmd;
  detail::LineOutcome out;
  if (is_retrieval(*cmd)) {
    out = detail::parse_retrieval(line, limits_, req);
  } else {
    const detail::Tokens tok = detail::tokenize(line);
    out = is_meta(*cmd) ? detail::parse_meta(tok, limits_, req)
                        : detail::parse_classic(tok, limits_, req);
  }
  const bool noreply = takes_noreply(*cmd) && trailing_noreply;
  if (!out.error.empty()) {
    if (out.has_data) return fail_with_data(in, line_len, out.data_len, out.error, noreply, consumed);
    *consumed = line_len;
    return fail(out.error, false, noreply);
  }
  if (!out.has_data) {
    *consumed = line_len;
    return r;
  }
  // memcached refuses an item it cannot hold only once the line is otherwise valid, and
  // swallows the block so the pipeline behind it still parses.
  if (out.data_len > limits_.max_value) {
    return fail_with_data(in, line_len, out.data_len, detail::kTooLarge, noreply, consumed);
  }
  const size_t data_len = static_cast<size_t>(out.data_len);
  const size_t total = line_len + data_len + 2;
  if (in.size() < total) return need_more();
  // The block is exactly <bytes> long and ends in \r\n; otherwise memcached still takes
  // <bytes> + 2 bytes as the block and answers bad data chunk.
  if (in.substr(line_len + data_len, 2) != "\r\n") {
    *consumed = total;
    return fail(detail::kBadDataChunk, false, noreply, data_len + 2);
  }
  req.value.assign(in.substr(line_len, data_len));
  *consumed = total;
  return r;
}

ParseResult Parser::fail_with_data(std::string_view in, size_t line_len, uint64_t data_len,
                                   std::string_view line, bool noreply, size_t* consumed) {
  const uint64_t block = data_len + 2;
  const size_t take = static_cast<size_t>(std::min<uint64_t>(block, in.size() - line_len));
  swallow_ = block - take;
  *consumed = line_len + take;
  return fail(line, false, noreply, block);
}

}  // namespace exo::proxy
