// The cache node's own request rate per held key (docs/cache-fill.md 2): once a key is cached its
// db node stops seeing GETs for it, so its rate must come from the map's hit counter. An EWMA of
// hits/s, sampled once per selection round, with `alpha` the weight of one second's worth of
// samples (so a 100 ms round weighs 1-(1-alpha)^0.1): low-rate keys see only a few hits per
// round, and a per-round EWMA of them would swing below min_rate and evict them on noise.
// Used by the filler thread only: not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace exo::cache {

class HitRates {
 public:
  // `initial`: the rate of a key first seen without admitted() (one cached by hand through the
  // Cache RPC), until its own hits have been measured for a while.
  explicit HitRates(double alpha, double initial = 0) : alpha_(alpha), initial_(initial) {}

  // A key the filler just inserted (hit counter 0 at now_ms) starts at its reported rate, so it
  // is not evicted before its rule has had a chance to bring it traffic.
  void admitted(const std::string& key, double rate, uint64_t now_ms);

  // One sample per round: (key, LruMap::Entry::hits) of every entry in the map. Keys not in
  // `hits` are forgotten. A key seen for the first time without admitted() starts at `initial`.
  void sample(const std::vector<std::pair<std::string, uint64_t>>& hits, uint64_t now_ms);

  double rate(const std::string& key) const;  // 0 for unknown keys
  void clear() { keys_.clear(); }            // forget every key (the node was reset)
  size_t size() const { return keys_.size(); }

 private:
  struct State {
    uint64_t hits = 0;  // counter at the last sample
    uint64_t ms = 0;    // time of the last sample
    double rate = 0;
  };
  const double alpha_;
  const double initial_;
  std::unordered_map<std::string, State> keys_;
};

}  // namespace exo::cache
