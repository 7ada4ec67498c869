// Milliseconds on a monotonic clock: the time base of the db nodes' hot-key detector and
// reporter and of the cache nodes' filler. Components take a Clock so tests can drive time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace exo {

using Clock = std::function<uint64_t()>;

inline uint64_t steady_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace exo
