// Minimal leveled logging to stderr. One fprintf per line, so lines from different threads
// do not interleave. The level is set once at start-up (--log-level).
#pragma once

#include <atomic>
#include <cstdio>
#include <string>

namespace exo::db {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

inline std::atomic<LogLevel>& log_level() {
  static std::atomic<LogLevel> level{LogLevel::kInfo};
  return level;
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

}  // namespace exo::db

#define EXO_LOG(level, tag, fmt, ...)                                                  \
  do {                                                                                 \
    if (::exo::db::log_enabled(level)) std::fprintf(stderr, "exo-db-node " tag ": " fmt "\n", ##__VA_ARGS__); \
  } while (0)
#define LOG_DEBUG(fmt, ...) EXO_LOG(::exo::db::LogLevel::kDebug, "debug", fmt, ##__VA_ARGS__)
#define LOG_INFO(fmt, ...) EXO_LOG(::exo::db::LogLevel::kInfo, "info", fmt, ##__VA_ARGS__)
#define LOG_WARN(fmt, ...) EXO_LOG(::exo::db::LogLevel::kWarn, "warn", fmt, ##__VA_ARGS__)
#define LOG_ERROR(fmt, ...) EXO_LOG(::exo::db::LogLevel::kError, "error", fmt, ##__VA_ARGS__)
