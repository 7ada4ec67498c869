#include "hit_rates.h"

#include <cmath>
#include <unordered_set>

namespace exo::cache {

void HitRates::admitted(const std::string& key, double rate, uint64_t now_ms) {
  keys_[key] = State{0, now_ms, rate};
}

void HitRates::sample(const std::vector<std::pair<std::string, uint64_t>>& hits, uint64_t now_ms) {
  std::unordered_set<std::string_view> present;
  for (const auto& [key, count] : hits) {
    present.insert(key);
    auto [it, fresh] = keys_.try_emplace(key, State{count, now_ms, initial_});
    if (fresh) continue;  // a baseline; the first rate comes with the next sample
    State& s = it->second;
    if (now_ms <= s.ms) continue;  // no time has passed: nothing to measure yet
    // A counter that went down means the entry was erased and inserted again: count from 0.
    const uint64_t delta = count >= s.hits ? count - s.hits : count;
    const double inst = static_cast<double>(delta) * 1000.0 / static_cast<double>(now_ms - s.ms);
    // alpha_ is the weight of a one-second sample; a round of dt seconds gets the weight that
    // keeps the time constant independent of the round length (interval_ms).
    const double dt_s = static_cast<double>(now_ms - s.ms) / 1000.0;
    const double a = 1 - std::pow(1 - alpha_, dt_s);
    s.rate = a * inst + (1 - a) * s.rate;
    s.hits = count;
    s.ms = now_ms;
  }
  std::erase_if(keys_, [&](const auto& kv) { return !present.count(kv.first); });
}

double HitRates::rate(const std::string& key) const {
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : it->second.rate;
}

}  // namespace exo::cache
