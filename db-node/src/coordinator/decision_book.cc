#include "coordinator/decision_book.h"

namespace exo::db {

bool DecisionBook::add(PendingDecision d) {
  std::vector<PendingDecision>& v = by_key_[d.key];
  for (const PendingDecision& e : v)
    if (e.txid == d.txid) return false;
  v.push_back(std::move(d));
  ++count_;
  return true;
}

bool DecisionBook::has(std::string_view key) const { return by_key_.count(std::string(key)) > 0; }

bool DecisionBook::contains(std::string_view key, uint64_t txid) const {
  auto it = by_key_.find(std::string(key));
  if (it == by_key_.end()) return false;
  for (const PendingDecision& e : it->second)
    if (e.txid == txid) return true;
  return false;
}

std::vector<PendingDecision> DecisionBook::for_key(std::string_view key) const {
  auto it = by_key_.find(std::string(key));
  return it == by_key_.end() ? std::vector<PendingDecision>{} : it->second;
}

std::vector<PendingDecision> DecisionBook::all() const {
  std::vector<PendingDecision> out;
  out.reserve(count_);
  for (const auto& [key, v] : by_key_) out.insert(out.end(), v.begin(), v.end());
  return out;
}

bool DecisionBook::remove(std::string_view key, uint64_t txid) {
  auto it = by_key_.find(std::string(key));
  if (it == by_key_.end()) return false;
  std::vector<PendingDecision>& v = it->second;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].txid != txid) continue;
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
    if (v.empty()) by_key_.erase(it);
    --count_;
    return true;
  }
  return false;
}

std::vector<PendingDecision> DecisionBook::forget(std::string_view cache_node) {
  std::vector<PendingDecision> dropped;
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    std::vector<PendingDecision>& v = it->second;
    for (size_t i = 0; i < v.size();) {
      if (v[i].cache_node == cache_node) {
        dropped.push_back(std::move(v[i]));
        v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    it = v.empty() ? by_key_.erase(it) : std::next(it);
  }
  count_ -= dropped.size();
  return dropped;
}

const PendingDecision* Round::next() {
  while (at_ < todo_.size()) {
    const PendingDecision& d = todo_[at_++];
    if (!down_.count(d.cache_node)) return &d;
  }
  return nullptr;
}

}  // namespace exo::db
