#include "resolver.h"

#include "coordinator/delivery.h"
#include "coordinator_shell.h"
#include "log.h"

namespace exo::db {

Resolver::Resolver(KvStore& store, CachedKeys& cached, Propagator& propagator, Counters& counters)
    : store_(store), cached_(cached), propagator_(propagator), c_(counters) {}

void Resolver::add(PendingDecision d) {
  std::lock_guard<std::mutex> lk(mu_);
  if (book_.add(std::move(d))) set_gauge(c_.resolver_pending, book_.size());
}

void Resolver::add_recovered(PendingDecision d) {
  add_shared(c_.txns_recovered);
  add(std::move(d));
}

bool Resolver::has_pending(std::string_view key) const {
  std::lock_guard<std::mutex> lk(mu_);
  return book_.has(key);
}

bool Resolver::contains(const PendingDecision& d) const {
  std::lock_guard<std::mutex> lk(mu_);
  return book_.contains(d.key, d.txid);
}

std::vector<PendingDecision> Resolver::pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  return book_.all();
}

size_t Resolver::pending_count() const {
  std::lock_guard<std::mutex> lk(mu_);
  return book_.size();
}

bool Resolver::attempt(CachedKeys::Guard& guard, const PendingDecision& d, bool* unreachable) {
  Delivery delivery(d);
  drive(delivery, Event::attempt(), [&](const Action& a) -> std::optional<Event> {
    switch (a.kind) {
      case Act::kSendCommit:
      case Act::kSendAbort: {
        const FinishOutcome o = carry_out_finish(propagator_, a);
        const auto tx = static_cast<unsigned long long>(d.txid);
        if (o.code == FinishOutcome::kRefused) {
          // Expected after the cache node restarted (it lost the prepared write) or when a
          // Prepare never arrived; nothing is left to resolve either way.
          LOG_INFO("%s of txid %llu: %s; nothing left to resolve", to_string(d.decision), tx,
                   o.error.c_str());
        } else if (o.code == FinishOutcome::kUnreachable) {
          LOG_DEBUG("%s of txid %llu still undelivered: %s", to_string(d.decision), tx,
                    o.error.c_str());
        }
        return Event::finish_replied(o.code);
      }
      case Act::kUnmark:
        carry_out_unmark(store_, guard, a);
        return std::nullopt;
      case Act::kStoreWrite:
        return Event::txlog_deleted(carry_out_store_write(store_, a).ok());
      case Act::kResolved: {
        bool removed = false;
        {
          std::lock_guard<std::mutex> lk(mu_);
          removed = book_.remove(d.key, d.txid);
          set_gauge(c_.resolver_pending, book_.size());
        }
        if (removed) add_shared(c_.resolver_resolved);  // not if ForgetCacheNode dropped it meanwhile
        return std::nullopt;
      }
      default:
        return std::nullopt;  // a Delivery asks for nothing else
    }
  });
  *unreachable = delivery.unreachable();
  return delivery.state() == Delivery::State::kDelivered;
}

bool Resolver::settle(CachedKeys::Guard& guard, std::string_view key) {
  std::vector<PendingDecision> mine;
  {
    std::lock_guard<std::mutex> lk(mu_);
    mine = book_.for_key(key);
  }
  for (const PendingDecision& d : mine) {
    bool unreachable = false;
    attempt(guard, d, &unreachable);
  }
  return !has_pending(key);
}

size_t Resolver::run_once() {
  Round round(pending());
  size_t resolved = 0;
  while (const PendingDecision* d = round.next()) {
    CachedKeys::Guard guard = cached_.lock_key(bytes_of(d->key));
    if (!contains(*d)) continue;  // settled by a write, or forgotten, since the snapshot
    bool unreachable = false;
    if (attempt(guard, *d, &unreachable)) {
      ++resolved;
      LOG_DEBUG("%s of txid %llu delivered to %s", to_string(d->decision),
                static_cast<unsigned long long>(d->txid), d->cache_node.c_str());
    } else if (unreachable) {
      round.unreachable(d->cache_node);
    }
  }
  return resolved;
}

size_t Resolver::forget(std::string_view cache_node) {
  std::vector<PendingDecision> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    dropped = book_.forget(cache_node);
    set_gauge(c_.resolver_pending, book_.size());
  }
  for (const PendingDecision& d : dropped) {
    Delivery delivery(d);
    drive(delivery, Event::forget(), [&](const Action& a) -> std::optional<Event> {
      if (a.kind == Act::kStoreWrite) carry_out_store_write(store_, a);
      return std::nullopt;
    });
  }
  return dropped.size();
}

}  // namespace exo::db
