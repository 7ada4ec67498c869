// libFuzzer target: exo-mcload's reply parser (mcload/reply_parser.h) on arbitrary bytes, as the
// driver feeds it: replies one after another from the front of a stream. Input: [cut:1][bytes].
// Invariants (tests/mcload_parser_check.h): consumed inside the buffer; a complete reply parses
// the same with more bytes after it; a shorter prefix of a complete reply needs more; a prefix of
// a malformed buffer is never a complete reply; a hit's key and value lie inside the reply. The
// parse also runs with a small value limit, so the limit's path is reached.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "../tests/mcload_parser_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t cut_seed = data[0];
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  for (size_t limit : {exo::mcload::kDefaultMaxValue, size_t{16}}) {
    std::string_view rest = stream;
    for (int i = 0; i < 64 && !rest.empty(); ++i) {
      const size_t cut = rest.empty() ? 0 : cut_seed * 7919 % (rest.size() + 1);
      const std::string e = exo::mcload::testing::check_reply_invariants(rest, cut, limit);
      if (!e.empty()) {
        std::fprintf(stderr, "mcload_reply_fuzz: %s\n", e.c_str());
        std::abort();
      }
      const exo::mcload::Reply r = exo::mcload::parse_reply(rest, limit);
      if (r.consumed == 0) break;  // need more or malformed: the driver stops here too
      rest.remove_prefix(r.consumed);
    }
  }
  return 0;
}
