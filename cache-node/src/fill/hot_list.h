// The hot list (docs/cache-fill.md 2): for each db node, the keys of its latest REPORT with their
// rates and when the REPORT arrived. gRPC threads write it (Report RPC), the filler reads it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "key_rate.h"

namespace exo::cache {

class HotList {
 public:
  explicit HotList(uint64_t ttl_ms) : ttl_ms_(ttl_ms) {}

  // Replaces db_node's list: a REPORT carries its node's whole current top keys.
  void report(const std::string& db_node, std::vector<KeyRate> keys, uint64_t now_ms);

  // Every key of the lists not older than the TTL (older lists are dropped here), hottest first;
  // a key reported by several db nodes appears once, with its highest rate.
  std::vector<KeyRate> snapshot(uint64_t now_ms);

  // Keys in the lists held now, TTL not applied (the hot_list_keys gauge).
  size_t key_count() const;

 private:
  struct List {
    std::vector<KeyRate> keys;
    uint64_t received_ms = 0;
  };
  const uint64_t ttl_ms_;
  mutable std::mutex mu_;  // guards lists_
  std::map<std::string, List> lists_;  // by db node name
};

}  // namespace exo::cache
