// Minimal leveled logging to stderr, shared by every C++ program. One fprintf per line, so
// lines from different threads do not interleave. Level and program name are set once at
// start-up (--log-level); the level is atomic so any thread may read it.
//
// Every line: UTC time (ISO 8601, milliseconds), program, kernel thread id, level, message:
//   2026-11-25T06:21:49.123Z exo-cache-node tid=4711 info: gRPC on unix:/tmp/exo/cache0.sock
// The thread id is the one `ps -L`, `top -H` and /proc/<pid>/task show, so a line can be tied to
// an lcore, a packet thread or a gRPC thread.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <string>

namespace exo {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

inline std::atomic<LogLevel>& log_level() {
  static std::atomic<LogLevel> level{LogLevel::kInfo};
  return level;
}

inline const char*& log_program() {
  static const char* name = "exo";
  return name;
}

inline bool log_enabled(LogLevel l) { return l >= log_level().load(std::memory_order_relaxed); }

// Returns false for an unknown name.
inline bool set_log_level(const std::string& name) {
  if (name == "debug") log_level() = LogLevel::kDebug;
  else if (name == "info") log_level() = LogLevel::kInfo;
  else if (name == "warn" || name == "warning") log_level() = LogLevel::kWarn;
  else if (name == "error") log_level() = LogLevel::kError;
  else return false;
  return true;
}

// The start of a line: the time now and the calling thread's id.
struct LogStamp {
  char time[64];
  long tid;
  LogStamp() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    tm t{};
    gmtime_r(&ts.tv_sec, &t);
    std::snprintf(time, sizeof time, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", t.tm_year + 1900,
                  t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ts.tv_nsec / 1000000);
    static thread_local const long id = syscall(SYS_gettid);
    tid = id;
  }
};

}  // namespace exo

#define EXO_LOG(level, tag, fmt, ...)                                                             \
  do {                                                                                            \
    if (::exo::log_enabled(level)) {                                                              \
      const ::exo::LogStamp exo_log_stamp_;                                                       \
      std::fprintf(stderr, "%s %s tid=%ld " tag ": " fmt "\n", exo_log_stamp_.time,              \
                   ::exo::log_program(), exo_log_stamp_.tid, ##__VA_ARGS__);                      \
    }                                                                                             \
  } while (0)
#define LOG_DEBUG(fmt, ...) EXO_LOG(::exo::LogLevel::kDebug, "debug", fmt, ##__VA_ARGS__)
#define LOG_INFO(fmt, ...) EXO_LOG(::exo::LogLevel::kInfo, "info", fmt, ##__VA_ARGS__)
#define LOG_WARN(fmt, ...) EXO_LOG(::exo::LogLevel::kWarn, "warn", fmt, ##__VA_ARGS__)
#define LOG_ERROR(fmt, ...) EXO_LOG(::exo::LogLevel::kError, "error", fmt, ##__VA_ARGS__)
