// The benchmark data set of exo-db-load and exo-rocksdb-bench: key id -> key and value bytes.
//
// Keys are exactly the load generator's (exo-loadgen sends key_name(id, key_size) from
// emulator/loadgen/hot_set_swap.h; that header-only function is the one key format of the C++
// side and is used here as is): "key:" + the id in zero-padded decimal, key_size bytes.
// Values are derived from the id alone, so a reader can check every byte it gets back: the
// bytes of the splitmix64 sequence seeded with id ^ kValueSeed, 8 at a time (host order,
// little-endian on x86), cut at value_size. They are incompressible on purpose: the SST files
// hold the full 1e6 x 512 B instead of a few MB of a repeated filler.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "loadgen/hot_set_swap.h"

namespace exo::db::tools {

inline constexpr uint64_t kValueSeed = 0x6578'6f2d'6462'2d76ull;  // "exo-db-v"

inline uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The key of id (throws like key_name if it does not fit key_size; options are checked first).
inline std::string dataset_key(uint64_t id, size_t key_size) {
  return exo::loadgen::key_name(id, key_size);
}

// The value of id, value_size bytes, into *out (its buffer is reused).
inline void dataset_value(uint64_t id, size_t value_size, std::string* out) {
  out->resize(value_size);
  uint64_t state = id ^ kValueSeed;
  for (size_t i = 0; i < value_size; i += 8) {
    const uint64_t r = splitmix64(&state);
    std::memcpy(out->data() + i, &r, std::min<size_t>(8, value_size - i));
  }
}

// Decimal digits of v (1 for 0).
inline size_t decimal_digits(uint64_t v) {
  size_t d = 1;
  while (v >= 10) v /= 10, ++d;
  return d;
}

}  // namespace exo::db::tools
