// A key with its estimated request rate: what a db node's detector ranks, what a REPORT
// carries, what a cache node's selection ranks by, and the load sent with AddCacheRules.
#pragma once

#include <ostream>
#include <string>

namespace exo {

struct KeyRate {
  std::string key;
  double rate = 0;  // requests/s
  bool operator==(const KeyRate&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const KeyRate& k) {  // readable test failures
  return os << k.key << ":" << k.rate;
}

}  // namespace exo
