// Delivery of 2PC decisions (Commit or Abort of a txid) that a cache node has not acknowledged:
// the Commit RPC after a durable write failed, the Abort after a failed Prepare or a failed
// local commit, and whatever start-up recovery found (docs/two-phase-commit.md). This is the
// shell of the coordinator's pure parts: the DecisionBook holds the decisions, a Delivery
// decides each attempt and a Round each retry round (src/coordinator/); the resolver adds the
// lock, the stripe locks, the RPCs, the store writes and the counters.
//
// Until its decision arrives the cache node keeps the key pending and forwards every GET for it
// to this node, so reads are correct meanwhile; the resolver only has to get the decision there
// eventually, and before the next write of the key (whose Prepare the cache node would refuse
// while another txid is pending; the handler calls settle() first).
//
// Each decision is delivered under its key's stripe lock, so it is ordered with the writes of
// the key and with Fetch. It is retried until the cache node gives a definitive answer
// (FinishOutcome::definitive(): ok, cached=false, or a refusal, which means nothing of that txid
// is pending there), then its txlog record is deleted. A decision is durable in Cf::kTxlog
// before it is handed over, so a restart loses none, except when that write itself failed: then
// it is only here (docs/two-phase-commit.md, "Limits").
//
// Thread safety: any thread. Lock order: a stripe lock, then the resolver's own lock (never
// the other way round).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cached_keys.h"
#include "coordinator/decision_book.h"
#include "coordinator/pending_decision.h"
#include "counters.h"
#include "propagator.h"
#include "records.h"
#include "store.h"

namespace exo::db {

class Resolver {
 public:
  // How often undelivered decisions are retried: short, because writes of their keys answer
  // BUSY until they are delivered, and a restarted cache node is reachable again within about
  // a second (GrpcPropagator's reconnect backoff).
  static constexpr std::chrono::milliseconds kRetryInterval{100};

  // `counters` is the resolver's own block (resolver_pending, resolver_resolved,
  // txns_recovered), written by every thread that calls in, hence with add_shared/set_gauge.
  Resolver(KvStore& store, CachedKeys& cached, Propagator& propagator, Counters& counters);

  // Hands over an undelivered decision. A txid already pending is not added twice.
  void add(PendingDecision d);
  // The same for a decision found at start-up; also counted in txns_recovered.
  void add_recovered(PendingDecision d);

  bool has_pending(std::string_view key) const;
  // The caller holds `key`'s stripe lock (`guard`). Makes one delivery attempt for each
  // decision pending for `key`; returns true when none is left.
  bool settle(CachedKeys::Guard& guard, std::string_view key);
  // One attempt for every pending decision, each under its key's stripe lock; a cache node
  // that failed one attempt is not tried again this round. Returns how many were delivered.
  size_t run_once();
  // Drops every decision pending for `cache_node` and deletes their txlog records (the
  // controller has withdrawn the node: ForgetCacheNode). Returns how many.
  size_t forget(std::string_view cache_node);

  std::vector<PendingDecision> pending() const;
  size_t pending_count() const;

 private:
  // One delivery attempt (a Delivery carried out); true when the decision is delivered and
  // forgotten. *unreachable: the cache node could not be reached.
  bool attempt(CachedKeys::Guard& guard, const PendingDecision& d, bool* unreachable);
  bool contains(const PendingDecision& d) const;

  KvStore& store_;
  CachedKeys& cached_;
  Propagator& propagator_;
  Counters& c_;

  mutable std::mutex mu_;
  DecisionBook book_;  // guarded by mu_
};

}  // namespace exo::db
