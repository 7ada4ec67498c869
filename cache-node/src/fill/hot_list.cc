#include "hot_list.h"

#include <algorithm>
#include <unordered_map>

namespace exo::cache {

void HotList::report(const std::string& db_node, std::vector<KeyRate> keys, uint64_t now_ms) {
  std::lock_guard lock(mu_);
  List& l = lists_[db_node];
  l.keys = std::move(keys);
  l.received_ms = now_ms;
}

std::vector<KeyRate> HotList::snapshot(uint64_t now_ms) {
  std::unordered_map<std::string, double> best;
  {
    std::lock_guard lock(mu_);
    std::erase_if(lists_, [&](const auto& kv) {
      // Received "in the future" (clock races between threads): fresh, not expired.
      return now_ms > kv.second.received_ms && now_ms - kv.second.received_ms > ttl_ms_;
    });
    for (const auto& [name, l] : lists_)
      for (const auto& kr : l.keys) {
        auto [it, fresh] = best.emplace(kr.key, kr.rate);
        if (!fresh) it->second = std::max(it->second, kr.rate);
      }
  }
  std::vector<KeyRate> out;
  out.reserve(best.size());
  for (auto& [k, r] : best) out.push_back({k, r});
  // Ties by key so a round's outcome does not depend on hash-table order.
  std::sort(out.begin(), out.end(), [](const KeyRate& a, const KeyRate& b) {
    return a.rate != b.rate ? a.rate > b.rate : a.key < b.key;
  });
  return out;
}

size_t HotList::key_count() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [name, l] : lists_) n += l.keys.size();
  return n;
}

}  // namespace exo::cache
