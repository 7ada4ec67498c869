// The db node's hot-key detector (docs/cache-fill.md, 1; thesis 3.5.1): one Space-Saving
// summary per time segment of hot_keys.segment_ms, the last hot_keys.segments of them kept in a
// ring (the current one included), and per-key rates as the weighted average
//
//   rate(key) = Σ_i w_i · count_i(key) / (sample_rate · len_i)  /  Σ_i w_i
//
// over the segments, most recent first, where the current segment's len is the time elapsed in
// it and its weight is scaled by elapsed / segment_ms. Segments from before the detector was
// created are left out of both sums, so a node that just started is not diluted by segments it
// never had.
//
// Time is passed in (ms on a steady clock), so tests drive it with a fake clock. Thread-safe:
// one mutex, taken only by sampled GETs and by report building.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cluster.h"
#include "key_rate.h"
#include "ms_clock.h"
#include "hot_keys/space_saving.h"

namespace exo::db {



class HotKeyDetector {
 public:
  // `now_ms` starts the first segment. Uses top_k, sample_rate, segment_ms, segments and
  // weights (a missing weight counts as 0; segments and segment_ms are at least 1).
  HotKeyDetector(const HotKeysConfig& cfg, uint64_t now_ms);

  // One sampled GET of `key`.
  void observe(std::string_view key, uint64_t now_ms);

  // The n keys with the highest rate, highest first (ties by key). Keys whose rate is 0 (seen
  // only in segments that carry no weight yet) are left out.
  std::vector<KeyRate> hottest(size_t n, uint64_t now_ms);

  // Sampled requests held in the live segments, i.e. behind the rates hottest() returns.
  uint64_t sampled(uint64_t now_ms);

  double sample_rate() const { return sample_rate_; }

 private:
  // Advances the ring to the segment containing now_ms, clearing the segments it enters.
  void rotate(uint64_t now_ms);

  const double sample_rate_;
  const double confidence_z_;  // hot_keys.confidence_z: see hottest()
  const uint64_t segment_ms_;
  std::vector<double> weights_;  // most recent first, one per segment

  std::mutex mu_;
  std::vector<SpaceSaving> segments_;  // ring
  size_t current_ = 0;                 // index of the segment being filled
  uint64_t current_start_ms_;
  size_t live_ = 1;                    // segments that have existed, the current one included
  // Reused by hottest() so report building does not rebuild the table each time.
  struct Acc {
    double weighted = 0;   // Σ_i w_i · count_i / (p · len_i)
    uint64_t samples = 0;  // Σ_i count_i: the evidence behind it
  };
  std::unordered_map<std::string_view, Acc> scratch_;
};

}  // namespace exo::db
