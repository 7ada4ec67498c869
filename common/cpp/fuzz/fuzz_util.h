// Shared by the control-plane fuzz targets (cache-node/fuzz/control_fuzz.cc,
// db-node/fuzz/control_fuzz.cc): invariant checks that abort (so libFuzzer saves the input),
// quiet logging, and the record framing of their inputs:
//   a sequence of [op:1][len:2, big-endian][len bytes]; a short last record is cut to what is left.
#pragma once

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "log.h"

namespace exo::fuzz {

inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

// Our warnings (injected failures) and protobuf's (invalid UTF-8 in a string field) would
// drown libFuzzer's output. Once per process.
inline void quiet_logs() {
  static const bool once = [] {
    google::protobuf::SetLogHandler(nullptr);
    return exo::set_log_level("error");
  }();
  (void)once;
}

// Calls fn(op, bytes) for each record, op reduced modulo num_ops, at most max_records times.
template <typename Fn>
void for_each_record(const uint8_t* data, size_t size, uint8_t num_ops, int max_records, Fn&& fn) {
  for (int n = 0; size >= 3 && n < max_records; ++n) {
    const uint8_t op = data[0] % num_ops;
    const size_t len = std::min<size_t>(size - 3, size_t{data[1]} << 8 | data[2]);
    std::string bytes(reinterpret_cast<const char*>(data + 3), len);
    data += 3 + len;
    size -= 3 + len;
    fn(op, std::move(bytes));
  }
}

}  // namespace exo::fuzz
