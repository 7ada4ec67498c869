#include "hot_keys/hot_key_detector.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace exo::db {

HotKeyDetector::HotKeyDetector(const HotKeysConfig& cfg, uint64_t now_ms)
    : sample_rate_(cfg.sample_rate),
      confidence_z_(cfg.confidence_z),
      segment_ms_(std::max<uint64_t>(cfg.segment_ms, 1)),
      weights_(cfg.weights),
      current_start_ms_(now_ms) {
  const size_t n = std::max<size_t>(cfg.segments, 1);
  weights_.resize(n, 0.0);
  segments_.reserve(n);
  for (size_t i = 0; i < n; ++i) segments_.emplace_back(std::max<size_t>(cfg.top_k, 1));
}

void HotKeyDetector::rotate(uint64_t now_ms) {
  if (now_ms < current_start_ms_ + segment_ms_) return;
  const uint64_t steps = (now_ms - current_start_ms_) / segment_ms_;
  // A jump of more than the whole ring (an idle node) empties every segment; the segments it
  // skipped did exist, with no samples, so they count as live.
  const size_t n = segments_.size();
  const size_t enter = static_cast<size_t>(std::min<uint64_t>(steps, n));
  for (size_t i = 0; i < enter; ++i) {
    current_ = (current_ + 1) % n;
    segments_[current_].clear();
  }
  current_start_ms_ += steps * segment_ms_;
  live_ = std::min(live_ + enter, n);
}

void HotKeyDetector::observe(std::string_view key, uint64_t now_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  rotate(now_ms);
  segments_[current_].offer(key);
}

uint64_t HotKeyDetector::sampled(uint64_t now_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  rotate(now_ms);
  uint64_t total = 0;
  for (size_t age = 0; age < live_; ++age)
    total += segments_[(current_ + segments_.size() - age) % segments_.size()].total();
  return total;
}

std::vector<KeyRate> HotKeyDetector::hottest(size_t n, uint64_t now_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  rotate(now_ms);
  const uint64_t elapsed = now_ms > current_start_ms_ ? now_ms - current_start_ms_ : 0;

  // Σ_i w_i·count_i/(p·len_i) per key, accumulated segment by segment; a key absent from a
  // segment simply gets nothing from it.
  scratch_.clear();
  scratch_.reserve(live_ * segments_[0].capacity());
  double weight_sum = 0;
  for (size_t age = 0; age < live_; ++age) {
    double w = weights_[age];
    double len_s = static_cast<double>(segment_ms_) / 1000.0;
    if (age == 0) {
      // A segment that has barely begun holds few samples; scaling its weight by how full it
      // is stops it from swinging the estimate.
      w *= static_cast<double>(elapsed) / static_cast<double>(segment_ms_);
      len_s = static_cast<double>(elapsed) / 1000.0;
    }
    if (w <= 0 || len_s <= 0) continue;
    weight_sum += w;
    const double per_sample = w / (sample_rate_ * len_s);
    segments_[(current_ + segments_.size() - age) % segments_.size()].for_each(
        // The guaranteed count (count - error), not the estimate: a key that has just taken
        // over an evicted key's counter inherits that count as its error, and reporting it
        // would let every newcomer look as hot as the coldest tracked key. With a skewed
        // stream the hot keys' errors are small, so they lose little; the tail stops churning
        // the cache (and the switch's 50 rule updates/s) on sampling noise.
        [&](std::string_view key, uint64_t count, uint64_t error) {
          if (count <= error) return;
          Acc& acc = scratch_[key];
          acc.weighted += per_sample * static_cast<double>(count - error);
          acc.samples += count - error;
        });
  }
  if (weight_sum <= 0 || n == 0) return {};

  // Report a lower confidence bound, rate · (1 - z/√samples): a key seen once in the sample
  // (an estimate of ~1/p requests/s from a single draw) is noise, and reporting it would make
  // the cache admit and evict it again (each costing a switch rule update). Keys with plenty of
  // samples lose little: 100 samples cost 10% at z = 1.
  std::vector<std::pair<std::string_view, double>> all;
  all.reserve(scratch_.size());
  for (const auto& [key, acc] : scratch_) {
    const double n = static_cast<double>(acc.samples);
    const double keep = confidence_z_ > 0 ? 1 - confidence_z_ / std::sqrt(n) : 1;
    if (keep > 0) all.emplace_back(key, acc.weighted * keep);
  }
  const auto hotter = [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  const size_t m = std::min(n, all.size());
  // Select, then sort only the winners: O(N + m log m), where partial_sort's heap costs
  // O(N log m) and loses when m is a sizeable share of N (report_keys vs the segments' union).
  const auto mid = all.begin() + static_cast<std::ptrdiff_t>(m);
  if (mid != all.end()) std::nth_element(all.begin(), mid, all.end(), hotter);
  std::sort(all.begin(), mid, hotter);
  std::vector<KeyRate> out;
  out.reserve(m);
  for (size_t i = 0; i < m && all[i].second > 0; ++i)
    out.push_back(KeyRate{std::string(all[i].first), all[i].second / weight_sum});
  return out;
}

}  // namespace exo::db
