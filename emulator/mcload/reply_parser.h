// exo-mcload's reply parser: one reply to a single-key `get <key>\r\n` at the front of a TCP
// byte stream (memcached's doc/protocol.txt, "Retrieval command"). Pure and I/O-free, so the
// tests and the fuzzer drive it with any bytes.
//
//   VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n   a hit (one key: at most one VALUE)
//   END\r\n                                          a miss
//   ERROR\r\n | CLIENT_ERROR <msg>\r\n | SERVER_ERROR <msg>\r\n   an error reply
//
// Anything else is malformed: the stream has lost its framing and the connection must be
// dropped (the requests still in flight on it are lost). "VALUE k f n <cas>" is malformed too:
// the generator asks with `get`, never `gets`.
//
// Prefix property (the tests and the fuzzer check it): for a buffer whose complete reply takes c
// bytes, every shorter prefix parses as kNeedMore; a prefix of a malformed buffer is kNeedMore or
// kMalformed; a buffer with a complete reply parses the same whatever follows it. So a reply
// split over any number of reads is never mistaken for another one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace exo::mcload {

// A reply line (VALUE's header or an error line) with no "\r\n" within this many bytes is
// malformed: memcached's own lines are under 300 bytes (250-byte key + numbers).
inline constexpr size_t kMaxReplyLine = 2048;
// memcached's default item size limit (-I 1m): a larger <bytes> is malformed, so a hostile
// length cannot make the generator buffer gigabytes.
inline constexpr size_t kDefaultMaxValue = size_t{1} << 20;

enum class ReplyKind : uint8_t {
  kNeedMore,   // no complete reply yet (and nothing wrong so far): read more
  kHit,        // VALUE ... END
  kMiss,       // END
  kError,      // ERROR / CLIENT_ERROR / SERVER_ERROR line
  kMalformed,  // not a reply to `get`: drop the connection
};

struct Reply {
  ReplyKind kind = ReplyKind::kNeedMore;
  size_t consumed = 0;      // bytes of the complete reply (0 for kNeedMore and kMalformed)
  std::string_view key;     // kHit: the key echoed (points into the parsed buffer)
  size_t value_len = 0;     // kHit: <bytes>
  std::string_view line;    // kError: the error line without "\r\n"; kMalformed: why
};

// Parses the reply at the front of `buf`. Reads only inside `buf`.
Reply parse_reply(std::string_view buf, size_t max_value = kDefaultMaxValue);

const char* reply_kind_name(ReplyKind k);

}  // namespace exo::mcload
