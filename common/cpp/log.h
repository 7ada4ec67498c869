// Minimal leveled logging to stderr, shared by every C++ program. One fprintf per line, so
// lines from different threads do not interleave. Level and program name are set once at
// start-up (--log-level); the level is atomic so any thread may read it.
#pragma once

#include <atomic>
#include <cstdio>
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

}  // namespace exo

#define EXO_LOG(level, tag, fmt, ...)                                                       \
  do {                                                                                      \
    if (::exo::log_enabled(level))                                                          \
      std::fprintf(stderr, "%s " tag ": " fmt "\n", ::exo::log_program(), ##__VA_ARGS__);   \
  } while (0)
#define LOG_DEBUG(fmt, ...) EXO_LOG(::exo::LogLevel::kDebug, "debug", fmt, ##__VA_ARGS__)
#define LOG_INFO(fmt, ...) EXO_LOG(::exo::LogLevel::kInfo, "info", fmt, ##__VA_ARGS__)
#define LOG_WARN(fmt, ...) EXO_LOG(::exo::LogLevel::kWarn, "warn", fmt, ##__VA_ARGS__)
#define LOG_ERROR(fmt, ...) EXO_LOG(::exo::LogLevel::kError, "error", fmt, ##__VA_ARGS__)
