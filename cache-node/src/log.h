// Minimal leveled logging to stderr (the node's own messages; DPDK logs through rte_log).
#pragma once

#include <cstdio>
#include <string>

namespace exo::cache {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

inline LogLevel& log_level() {
  static LogLevel level = LogLevel::kInfo;
  return level;
}

// Returns false for an unknown name.
inline bool set_log_level(const std::string& name) {
  if (name == "debug") log_level() = LogLevel::kDebug;
  else if (name == "info") log_level() = LogLevel::kInfo;
  else if (name == "warning" || name == "warn") log_level() = LogLevel::kWarning;
  else if (name == "error") log_level() = LogLevel::kError;
  else return false;
  return true;
}

#define EXO_LOG(lvl, tag, ...)                                       \
  do {                                                               \
    if (static_cast<int>(lvl) >= static_cast<int>(::exo::cache::log_level())) { \
      std::fprintf(stderr, "exo-cache-node: " tag ": " __VA_ARGS__); \
      std::fputc('\n', stderr);                                      \
    }                                                                \
  } while (0)
#define log_debug(...) EXO_LOG(::exo::cache::LogLevel::kDebug, "debug", __VA_ARGS__)
#define log_info(...) EXO_LOG(::exo::cache::LogLevel::kInfo, "info", __VA_ARGS__)
#define log_warn(...) EXO_LOG(::exo::cache::LogLevel::kWarning, "warning", __VA_ARGS__)
#define log_error(...) EXO_LOG(::exo::cache::LogLevel::kError, "error", __VA_ARGS__)

}  // namespace exo::cache
