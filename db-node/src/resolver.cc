#include "resolver.h"

#include <unordered_set>

#include "log.h"
#include "marks.h"

namespace exo::db {

Resolver::Resolver(KvStore& store, CachedKeys& cached, Propagator& propagator, Counters& counters)
    : store_(store), cached_(cached), propagator_(propagator), c_(counters) {}

void Resolver::add_locked(PendingDecision d) {
  std::vector<PendingDecision>& v = by_key_[d.key];
  for (const PendingDecision& e : v)
    if (e.txid == d.txid) return;
  v.push_back(std::move(d));
  ++count_;
  set_gauge(c_.resolver_pending, count_);
}

void Resolver::add(PendingDecision d) {
  std::lock_guard<std::mutex> lk(mu_);
  add_locked(std::move(d));
}

void Resolver::add_recovered(PendingDecision d) {
  add_shared(c_.txns_recovered);
  add(std::move(d));
}

bool Resolver::has_pending(std::string_view key) const {
  std::lock_guard<std::mutex> lk(mu_);
  return by_key_.count(std::string(key)) > 0;
}

bool Resolver::contains(const PendingDecision& d) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_key_.find(d.key);
  if (it == by_key_.end()) return false;
  for (const PendingDecision& e : it->second)
    if (e.txid == d.txid) return true;
  return false;
}

bool Resolver::remove(const PendingDecision& d) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_key_.find(d.key);
  if (it == by_key_.end()) return false;
  std::vector<PendingDecision>& v = it->second;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].txid != d.txid) continue;
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
    if (v.empty()) by_key_.erase(it);
    --count_;
    set_gauge(c_.resolver_pending, count_);
    return true;
  }
  return false;
}

std::vector<PendingDecision> Resolver::pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<PendingDecision> out;
  out.reserve(count_);
  for (const auto& [key, v] : by_key_) out.insert(out.end(), v.begin(), v.end());
  return out;
}

size_t Resolver::pending_count() const {
  std::lock_guard<std::mutex> lk(mu_);
  return count_;
}

bool Resolver::attempt(CachedKeys::Guard& guard, const PendingDecision& d, FinishOutcome* out) {
  const Bytes key = bytes_of(d.key);
  *out = d.decision == Decision::kCommit ? propagator_.commit(d.cache_node, key, d.txid)
                                         : propagator_.abort(d.cache_node, key, d.txid);
  if (!out->definitive()) return false;
  if (out->code == FinishOutcome::kRefused) {
    // Expected after the cache node restarted (it lost the prepared write) or when a Prepare
    // never arrived; nothing is left to resolve either way.
    LOG_INFO("%s of txid %llu: %s; nothing left to resolve", to_string(d.decision),
             static_cast<unsigned long long>(d.txid), out->error.c_str());
  } else if (out->code == FinishOutcome::kNotCached) {
    // The cache node holds neither the entry nor a Fetch of it (see request_handler's
    // Prepare cached=false): stop tracking the key so later writes need no Prepare.
    std::string err;
    unmark_held(store_, guard, d.key, d.cache_node, &err);
    if (!err.empty()) LOG_WARN("unmarking a key on disk failed: %s", err.c_str());
  }
  // The txlog record goes before the in-memory entry: if deleting it fails, the decision stays
  // pending and the next attempt (answered definitively again) retries the delete. Not synced:
  // a record that comes back after an OS crash is only delivered once more, harmlessly.
  const std::string tk = txlog_key(d.txid, d.decision);
  const StoreOp op = StoreOp::del(Cf::kTxlog, bytes_of(tk));
  const StoreResult r = store_.write(std::span<const StoreOp>(&op, 1), Durability::kRelaxed);
  if (!r.ok()) {
    LOG_WARN("deleting the txlog record of txid %llu failed: %s",
             static_cast<unsigned long long>(d.txid), r.error.c_str());
    return false;
  }
  if (remove(d)) add_shared(c_.resolver_resolved);
  return true;
}

bool Resolver::settle(CachedKeys::Guard& guard, std::string_view key) {
  std::vector<PendingDecision> mine;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = by_key_.find(std::string(key));
    if (it == by_key_.end()) return true;
    mine = it->second;
  }
  for (const PendingDecision& d : mine) {
    FinishOutcome o;
    if (!attempt(guard, d, &o) && !o.definitive())
      LOG_DEBUG("%s of txid %llu still undelivered: %s", to_string(d.decision),
                static_cast<unsigned long long>(d.txid), o.error.c_str());
  }
  return !has_pending(key);
}

size_t Resolver::run_once() {
  const std::vector<PendingDecision> all = pending();
  // A node that failed once this round is skipped for the rest of it: each failure may cost
  // a full RPC deadline, under a stripe lock.
  std::unordered_set<std::string> down;
  size_t resolved = 0;
  for (const PendingDecision& d : all) {
    if (down.count(d.cache_node)) continue;
    CachedKeys::Guard guard = cached_.lock_key(bytes_of(d.key));
    if (!contains(d)) continue;  // settled by a write, or forgotten, since the snapshot
    FinishOutcome o;
    if (attempt(guard, d, &o)) {
      ++resolved;
      LOG_DEBUG("%s of txid %llu delivered to %s", to_string(d.decision),
                static_cast<unsigned long long>(d.txid), d.cache_node.c_str());
    } else if (!o.definitive()) {
      down.insert(d.cache_node);
      LOG_DEBUG("%s of txid %llu still undelivered: %s", to_string(d.decision),
                static_cast<unsigned long long>(d.txid), o.error.c_str());
    }
  }
  return resolved;
}

size_t Resolver::forget(std::string_view cache_node) {
  std::vector<PendingDecision> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
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
    set_gauge(c_.resolver_pending, count_);
  }
  for (const PendingDecision& d : dropped) {
    // Best effort: a record that survives is loaded at the next start and delivered to a node
    // that has been Reset meanwhile, which answers it definitively.
    const std::string tk = txlog_key(d.txid, d.decision);
    const StoreOp op = StoreOp::del(Cf::kTxlog, bytes_of(tk));
    const StoreResult r = store_.write(std::span<const StoreOp>(&op, 1), Durability::kRelaxed);
    if (!r.ok())
      LOG_WARN("deleting the txlog record of forgotten txid %llu failed: %s",
               static_cast<unsigned long long>(d.txid), r.error.c_str());
  }
  return dropped.size();
}

}  // namespace exo::db
