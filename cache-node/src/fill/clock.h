// Milliseconds on a monotonic clock, injectable so tests can drive time by hand.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace exo::cache {

using Clock = std::function<uint64_t()>;

inline uint64_t steady_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace exo::cache
