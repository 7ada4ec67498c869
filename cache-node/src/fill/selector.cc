// The pseudo-code of docs/cache-fill.md section 2, with the victim taken from a min-heap of the
// held keys' rates (admitted keys join the heap, so capacity is never exceeded).
#include "selector.h"

#include <queue>
#include <unordered_set>

namespace exo::cache {
namespace {

struct Colder {  // the heap's top is the coldest key; among equals the smallest key
  bool operator()(const KeyRate& a, const KeyRate& b) const {
    return a.rate != b.rate ? a.rate > b.rate : a.key > b.key;
  }
};

}  // namespace

Selection select_keys(const SelectInput& in) {
  Selection out;
  out.threshold = in.min_rate;
  // Held keys nobody reads any more give their slot and their switch rule back at once, instead
  // of waiting to be displaced (after a hot-set change the old keys would otherwise linger while
  // the cache has room). The hysteresis keeps a key hovering around min_rate from flapping.
  const double floor_rate = in.min_rate / (1 + in.hysteresis);
  std::unordered_set<std::string> held_keys;
  std::vector<KeyRate> kept;
  kept.reserve(in.held.size());
  for (const auto& h : in.held) {
    held_keys.insert(h.key);
    if (h.rate < floor_rate) out.evict.push_back(h);
    else kept.push_back(h);
  }
  std::priority_queue<KeyRate, std::vector<KeyRate>, Colder> heap(Colder{}, std::move(kept));

  for (const auto& c : in.candidates) {
    if (held_keys.count(c.key) || in.skip.count(c.key)) continue;  // not a candidate
    // Sorted hottest first: no later key can pass. Also stops below min_rate.
    if (c.rate <= out.threshold) break;
    const bool room = heap.size() < in.capacity;
    if (out.rule_changes + (room ? 1 : 2) > in.rule_budget) break;  // the rule budget is spent
    if (room) {
      out.admit.push_back(c);
      out.rule_changes += 1;
    } else {
      if (heap.empty()) break;  // capacity 0
      const KeyRate victim = heap.top();
      if (c.rate <= victim.rate * (1 + in.hysteresis)) break;
      heap.pop();
      out.evict.push_back(victim);
      out.admit.push_back(c);
      out.rule_changes += 2;
      out.threshold = victim.rate;  // "the load of the most recently evicted key"
    }
    heap.push(c);
    held_keys.insert(c.key);  // a key listed twice is admitted once
  }
  return out;
}

}  // namespace exo::cache
