// Internal to the text codec: the error lines, the tokenizer, strict number and key checks.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace exo::proxy::detail {

// The error lines the parser answers with; the wording is memcached's where it has one.
inline constexpr std::string_view kError = "ERROR\r\n";
inline constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format\r\n";
inline constexpr std::string_view kBadDataChunk = "CLIENT_ERROR bad data chunk\r\n";
inline constexpr std::string_view kKeyTooLong = "CLIENT_ERROR key too long\r\n";
inline constexpr std::string_view kLineTooLong = "CLIENT_ERROR line too long\r\n";
inline constexpr std::string_view kTooManyKeys = "CLIENT_ERROR too many keys\r\n";
inline constexpr std::string_view kBinary = "CLIENT_ERROR binary protocol not supported\r\n";
inline constexpr std::string_view kTooLarge = "SERVER_ERROR object too large for cache\r\n";
inline constexpr std::string_view kBadExptime = "CLIENT_ERROR invalid exptime argument\r\n";
inline constexpr std::string_view kBadDelta = "CLIENT_ERROR invalid numeric delta argument\r\n";
inline constexpr std::string_view kDeleteUsage =
    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
// meta
inline constexpr std::string_view kFlagsTooLong = "CLIENT_ERROR options flags are too long\r\n";
inline constexpr std::string_view kDuplicateFlag = "CLIENT_ERROR duplicate flag\r\n";
inline constexpr std::string_view kInvalidFlag = "CLIENT_ERROR invalid flag\r\n";
inline constexpr std::string_view kBadToken = "CLIENT_ERROR bad token in command line format\r\n";
inline constexpr std::string_view kBadKeyEncoding = "CLIENT_ERROR error decoding key\r\n";
inline constexpr std::string_view kOpaqueTooLong = "CLIENT_ERROR opaque token too long\r\n";
inline constexpr std::string_view kBadInitial = "CLIENT_ERROR invalid numeric initial value\r\n";
inline constexpr std::string_view kBadMetaDelta = "CLIENT_ERROR invalid numeric delta value\r\n";
inline constexpr std::string_view kBadMsMode = "CLIENT_ERROR invalid mode for ms M token\r\n";
inline constexpr std::string_view kBadMaMode = "CLIENT_ERROR invalid mode for ma M token\r\n";

inline constexpr std::string_view kNoreply = "noreply";
// memcached caps a meta command at 20 tokens (command and key included) and an opaque at 32.
inline constexpr size_t kMaxMetaTokens = 20;
inline constexpr size_t kMaxOpaque = 32;

// Splits a command line on spaces (memcached's only separator; runs of spaces collapse).
class Splitter {
 public:
  explicit Splitter(std::string_view line) : rest_(line) {}
  bool next(std::string_view* tok) {
    const size_t i = rest_.find_first_not_of(' ');
    if (i == std::string_view::npos) return false;
    rest_.remove_prefix(i);
    const size_t j = std::min(rest_.find(' '), rest_.size());
    *tok = rest_.substr(0, j);
    rest_.remove_prefix(j);
    return true;
  }

 private:
  std::string_view rest_;
};

// The first tokens of a line. More than kMax sets `overflow`: no command may have that many
// but get/gets/gat/gats, which walk the line with a Splitter instead.
struct Tokens {
  static constexpr size_t kMax = 24;
  std::array<std::string_view, kMax> t{};
  size_t n = 0;
  bool overflow = false;
  std::string_view operator[](size_t i) const { return t[i]; }
};

inline Tokens tokenize(std::string_view line) {
  Tokens out;
  Splitter split(line);
  std::string_view tok;
  while (split.next(&tok)) {
    if (out.n == Tokens::kMax) {
      out.overflow = true;
      break;
    }
    out.t[out.n++] = tok;
  }
  return out;
}

// The last token of a line ("" if none): memcached takes "noreply" from there.
inline std::string_view last_token(std::string_view line) {
  const size_t end = line.find_last_not_of(' ');
  if (end == std::string_view::npos) return {};
  line = line.substr(0, end + 1);
  const size_t space = line.rfind(' ');
  return space == std::string_view::npos ? line : line.substr(space + 1);
}

// Whole-token decimal numbers: no sign (a '-' only where T is signed), no spaces, no overflow.
template <typename T>
bool parse_number(std::string_view s, T* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

enum class KeyCheck : uint8_t { kOk, kTooLong, kBad };

// Keys are at most max_key bytes with no control characters (0x00-0x1f, 0x7f); spaces cannot
// occur after tokenizing. Bytes >= 0x80 are allowed, as in memcached.
inline KeyCheck check_key(std::string_view key, size_t max_key) {
  if (key.size() > max_key) return KeyCheck::kTooLong;
  for (unsigned char c : key) {
    if (c < 0x20 || c == 0x7f) return KeyCheck::kBad;
  }
  return KeyCheck::kOk;
}

inline std::string_view key_error(KeyCheck k) {
  return k == KeyCheck::kTooLong ? kKeyTooLong : kBadFormat;
}

}  // namespace exo::proxy::detail
