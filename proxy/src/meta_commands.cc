// Meta commands (protocol.txt "Meta Commands" to "Meta No-Op"): "<cm> <key> [<datalen>]
// <flag><token> ...". Flags are kept generically as (letter, token) pairs in request order,
// after the checks memcached makes before touching its cache, with the same error lines.
#include <array>
#include <climits>
#include <string>

#include "base64.h"
#include "line_parsers.h"

namespace exo::proxy {

bool MetaFlags::has(char letter) const {
  for (const MetaFlag& f : list) {
    if (f.letter == letter) return true;
  }
  return false;
}

std::string_view MetaFlags::token(char letter) const {
  for (const MetaFlag& f : list) {
    if (f.letter == letter) return f.token;
  }
  return {};
}

std::optional<std::string_view> MetaFlags::opaque() const {
  if (!has('O')) return std::nullopt;
  return token('O');
}

std::optional<int32_t> MetaFlags::ttl() const {
  int32_t v = 0;
  if (!has('T') || !detail::parse_number(token('T'), &v)) return std::nullopt;
  return v;
}

std::optional<uint32_t> MetaFlags::client_flags() const {
  uint32_t v = 0;
  if (!has('F') || !detail::parse_number(token('F'), &v)) return std::nullopt;
  return v;
}

char MetaFlags::mode() const {
  const std::string_view m = token('M');
  return m.empty() ? '\0' : m[0];
}

namespace detail {
namespace {

// Every request flag protocol.txt defines for mg/ms/md/ma/me, plus P and L (proxy hints,
// ignored). memcached accepts any of them on any meta command and ignores the ones that do
// not apply; so do we.
constexpr std::string_view kKnownFlags = "bcCDEfFhIJklLMNOPqRstTuvx";

template <typename T>
bool numeric(std::string_view token) {
  T v{};
  return parse_number(token, &v);
}

// The error line for a flag's bad token, or "" when it is fine.
std::string_view check_token(Cmd cmd, char letter, std::string_view token) {
  switch (letter) {
    case 'N': case 'T': case 'R':  // TTLs: signed 32-bit, as exptime
      return numeric<int32_t>(token) ? "" : kBadToken;
    case 'F':
      return numeric<uint32_t>(token) ? "" : kBadToken;
    case 'C': case 'E':
      return numeric<uint64_t>(token) ? "" : kBadToken;
    case 'J':
      return numeric<uint64_t>(token) ? "" : kBadInitial;
    case 'D':
      return numeric<uint64_t>(token) ? "" : kBadMetaDelta;
    case 'O':
      return token.size() <= kMaxOpaque ? "" : kOpaqueTooLong;
    case 'M':  // one mode character; only ms and ma have modes
      if (cmd == Cmd::kMetaSet) {
        return token.size() == 1 && std::string_view("EAPRS").find(token[0]) != std::string_view::npos
                   ? ""
                   : kBadMsMode;
      }
      if (cmd == Cmd::kMetaArithmetic) {
        return token.size() == 1 && std::string_view("ID+-").find(token[0]) != std::string_view::npos
                   ? ""
                   : kBadMaMode;
      }
      return "";
    default:
      return "";
  }
}

}  // namespace

LineOutcome parse_meta(const Tokens& tok, const Limits& limits, Request& req) {
  if (req.cmd == Cmd::kMetaNoop) return tok.n == 1 ? LineOutcome{} : line_error(kBadFormat);
  if (tok.n < 2) return line_error(kBadFormat);
  LineOutcome out;
  size_t first_flag = 2;
  if (req.cmd == Cmd::kMetaSet) {  // ms <key> <datalen> <flags>*
    int32_t len = 0;
    if (tok.n < 3 || !parse_number(tok[2], &len) || len < 0 || len > INT_MAX - 2) {
      return line_error(kBadFormat);
    }
    out.has_data = true;
    out.data_len = static_cast<uint64_t>(len);
    first_flag = 3;
  }
  auto fail = [&out](std::string_view e) {
    out.error = e;
    return out;
  };
  if (const KeyCheck k = check_key(tok[1], limits.max_key); k != KeyCheck::kOk) {
    return fail(key_error(k));
  }
  if (tok.overflow || tok.n > kMaxMetaTokens) return fail(kFlagsTooLong);

  std::array<bool, 128> seen{};
  for (size_t i = first_flag; i < tok.n; ++i) {
    const char letter = tok[i][0];
    if (kKnownFlags.find(letter) == std::string_view::npos) return fail(kInvalidFlag);
    if (seen[static_cast<unsigned char>(letter)]) return fail(kDuplicateFlag);
    seen[static_cast<unsigned char>(letter)] = true;
    const std::string_view token = tok[i].substr(1);
    if (const std::string_view e = check_token(req.cmd, letter, token); !e.empty()) return fail(e);
    req.meta.list.push_back({letter, std::string(token)});
  }

  // The key the cluster sees is the decoded one; replies re-encode it (reply::meta_*).
  std::string key;
  if (seen['b']) {
    if (!base64::decode(tok[1], key)) return fail(kBadKeyEncoding);
  } else {
    key.assign(tok[1]);
  }
  req.keys.push_back(std::move(key));

  // The fields a proxy acts on, lifted into the Request (tokens were checked above).
  const MetaFlags& m = req.meta;
  req.noreply = m.quiet();
  if (seen['T']) parse_number(m.token('T'), &req.exptime);
  if (seen['F']) parse_number(m.token('F'), &req.flags);
  if (seen['C']) parse_number(m.token('C'), &req.cas);
  req.delta = req.cmd == Cmd::kMetaArithmetic ? 1 : 0;
  if (seen['D']) parse_number(m.token('D'), &req.delta);
  return out;
}

}  // namespace detail
}  // namespace exo::proxy
