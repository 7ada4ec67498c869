#include "loadgen/log_histogram.h"

#include <bit>
#include <cmath>

namespace exo::loadgen {

size_t LogHistogram::index_of(uint64_t v) {
  if (v > kMaxValue) v = kMaxValue;
  if (v < kSub) return static_cast<size_t>(v);
  const int e = 63 - std::countl_zero(v);  // kSubBits .. kMaxBits - 1
  const int shift = e - kSubBits;
  return static_cast<size_t>(kSub + static_cast<uint64_t>(shift) * kSub + ((v >> shift) - kSub));
}

uint64_t LogHistogram::bucket_low(size_t i) {
  if (i < kSub) return i;
  const uint64_t shift = (i - kSub) / kSub;
  return (kSub + (i - kSub) % kSub) << shift;
}

uint64_t LogHistogram::bucket_width(size_t i) {
  if (i < kSub) return 1;
  return uint64_t{1} << ((i - kSub) / kSub);
}

void LogHistogram::record(uint64_t value_ns) {
  ++counts_[index_of(value_ns)];
  ++count_;
  if (value_ns > max_) max_ = value_ns;
}

void LogHistogram::merge(const LogHistogram& other) {
  for (size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  if (other.max_ > max_) max_ = other.max_;
}

double LogHistogram::percentile(double q) const {
  if (count_ == 0) return 0.0;
  if (!(q > 0.0)) q = 0.0;
  if (q > 1.0) q = 1.0;
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank)
      return static_cast<double>(bucket_low(i)) + static_cast<double>(bucket_width(i) - 1) / 2.0;
  }
  return static_cast<double>(kMaxValue);  // unreachable: the counts sum to count_
}

}  // namespace exo::loadgen
