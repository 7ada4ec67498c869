// Option checks that exo-loadgen and exo-mcload share, so both refuse the same input with the
// same words (each tool's plan_run / check_options calls them).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

namespace exo::loadgen {

inline constexpr double kMaxDuration = 7 * 86400.0;  // --duration: a week at most

// A double as the user typed it ("0.5", "1e+08"), for error messages.
inline std::string fmt(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Decimal digits of n (1 for 0).
inline unsigned digits(uint64_t n) {
  unsigned d = 1;
  for (; n >= 10; n /= 10) ++d;
  return d;
}

// "" or why key ids 0..keys-1 do not fit key_name's format ("key:" + zero-padded id,
// hot_set_swap.h) in key_size bytes.
inline std::string check_key_space(uint64_t keys, uint64_t key_size) {
  if (keys < 1) return "--keys: must be >= 1";
  if (digits(keys - 1) > key_size - 4)
    return "--keys: key ids up to " + std::to_string(keys - 1) + " need " + std::to_string(digits(keys - 1)) +
           " digits; --key-size " + std::to_string(key_size) + " leaves " + std::to_string(key_size - 4);
  return "";
}

}  // namespace exo::loadgen
