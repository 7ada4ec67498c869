#include "replication/uncommitted.h"

namespace exo::db {

bool UncommittedWrites::has(std::string_view key) const {
  std::lock_guard<std::mutex> lk(mu_);
  return by_key_.count(std::string(key)) > 0;
}

void UncommittedWrites::put(UncommittedWrite w) {
  std::string key = w.req.key();
  std::lock_guard<std::mutex> lk(mu_);
  by_key_.insert_or_assign(std::move(key), std::move(w));
}

std::optional<UncommittedWrite> UncommittedWrites::take(std::string_view key) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_key_.find(std::string(key));
  if (it == by_key_.end()) return std::nullopt;
  UncommittedWrite w = std::move(it->second);
  by_key_.erase(it);
  return w;
}

std::optional<UncommittedWrite> UncommittedWrites::take(std::string_view key, const RequestId& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_key_.find(std::string(key));
  if (it == by_key_.end() || !(it->second.id == id)) return std::nullopt;
  UncommittedWrite w = std::move(it->second);
  by_key_.erase(it);
  return w;
}

void UncommittedWrites::unbatch(std::string_view key, const RequestId& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_key_.find(std::string(key));
  if (it != by_key_.end() && it->second.id == id) it->second.in_batch = false;
}

std::vector<std::pair<std::string, uint64_t>> UncommittedWrites::keys(bool with_batched) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(by_key_.size());
  for (const auto& [k, w] : by_key_)
    if (with_batched || !w.in_batch) out.emplace_back(k, w.hash);
  return out;
}

size_t UncommittedWrites::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return by_key_.size();
}

}  // namespace exo::db
