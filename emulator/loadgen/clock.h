// The load generator's one time base: CLOCK_MONOTONIC in nanoseconds (what steady_clock reads
// on Linux), and an absolute sleep on the same clock, so the TX loop sleeps until the token
// bucket's next_ready_ns instead of spinning a core.
#pragma once

#include <time.h>

#include <cerrno>
#include <cstdint>

namespace exo::loadgen {

inline constexpr uint64_t kNsPerSec = 1'000'000'000ULL;

inline uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // cannot fail for CLOCK_MONOTONIC with a valid pointer
  return static_cast<uint64_t>(ts.tv_sec) * kNsPerSec + static_cast<uint64_t>(ts.tv_nsec);
}

// Sleeps until mono_ns() >= deadline_ns. Returns 0, or EINTR when a signal handler ran (the
// caller re-checks its stop flag), or another errno value.
inline int sleep_until_ns(uint64_t deadline_ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(deadline_ns / kNsPerSec);
  ts.tv_nsec = static_cast<long>(deadline_ns % kNsPerSec);
  return clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);  // returns the errno
}

}  // namespace exo::loadgen
