// The undelivered 2PC decisions of a db node, by key: what the resolver still has to get to a
// cache node (delivery.h), and what a write of the key must settle first (cached_write.h).
// Pure data; not thread-safe (the resolver guards it with its own lock).
//
// A txid is in the book at most once. Each decision is durable in the txlog (Cf::kTxlog) before
// it is added, except when that write itself failed: then it is only here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "coordinator/pending_decision.h"

namespace exo::db {

class DecisionBook {
 public:
  // False (and nothing added) when the txid is pending for the key already.
  bool add(PendingDecision d);
  bool has(std::string_view key) const;
  bool contains(std::string_view key, uint64_t txid) const;
  std::vector<PendingDecision> for_key(std::string_view key) const;
  std::vector<PendingDecision> all() const;
  // False when it was not (or no longer) in the book.
  bool remove(std::string_view key, uint64_t txid);
  // Takes out every decision for `cache_node` (ForgetCacheNode) and returns them.
  std::vector<PendingDecision> forget(std::string_view cache_node);
  size_t size() const { return count_; }

 private:
  std::unordered_map<std::string, std::vector<PendingDecision>> by_key_;  // rarely > 1 per key
  size_t count_ = 0;
};

// One resolver round over a snapshot of the book: every decision once, in snapshot order, except
// that a cache node found unreachable is not tried again this round (each failure may cost a
// full RPC deadline under a stripe lock).
class Round {
 public:
  explicit Round(std::vector<PendingDecision> snapshot) : todo_(std::move(snapshot)) {}
  // The next decision to attempt, or nullptr when the round is over. Valid until the next call.
  const PendingDecision* next();
  void unreachable(std::string_view cache_node) { down_.emplace(cache_node); }

 private:
  std::vector<PendingDecision> todo_;
  size_t at_ = 0;
  std::unordered_set<std::string> down_;
};

}  // namespace exo::db
