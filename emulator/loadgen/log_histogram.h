// Fixed-bucket log-linear histogram of nanosecond latencies (the HdrHistogram layout with
// 7 sub-bucket bits): values below 128 ns get a bucket each; above, every power of two is cut
// into 128 equal buckets, so a bucket is at most 1/128 of its lower bound wide and a
// percentile reported at the bucket's midpoint is within 0.4% of the exact sample. Values at or
// above 2^36 ns (68.7 s, far beyond any reply the generator waits for) land in the top bucket.
// 3,840 buckets of 4 bytes: one per second of a run costs 15 KB, and no sample is kept.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace exo::loadgen {

class LogHistogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr int kMaxBits = 36;
  static constexpr uint64_t kSub = uint64_t{1} << kSubBits;  // 128
  static constexpr uint64_t kMaxValue = (uint64_t{1} << kMaxBits) - 1;
  static constexpr size_t kBuckets = kSub + (kMaxBits - kSubBits) * kSub;  // 3840

  void record(uint64_t value_ns);
  void merge(const LogHistogram& other);

  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }  // exact (before clamping); 0 when empty

  // Nearest-rank percentile, q in [0, 1]: the midpoint of the bucket holding the
  // ceil(q * count)-th smallest sample (the smallest for q = 0). 0 when empty.
  double percentile(double q) const;

  // Bucket arithmetic, public for the tests.
  static size_t index_of(uint64_t value);
  static uint64_t bucket_low(size_t index);
  static uint64_t bucket_width(size_t index);

 private:
  std::array<uint32_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t max_ = 0;
};

}  // namespace exo::loadgen
