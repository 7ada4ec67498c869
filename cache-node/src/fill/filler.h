// The filler (docs/cache-fill.md 2): keeps the cache node hot without anyone telling it what to
// hold. Two threads:
//   fill thread   - every interval_ms: snapshot the hot list, sample own hit rates, run the
//                   selector, mark victims retiring, FETCH + insert the admitted keys, then ask
//                   the controller for their rules (no_wait, with their rates).
//   retire thread - takes the retiring keys, removes their rules and waits for the switch, then
//                   erases the entries and sends EVICT to their db nodes.
// Both only touch CacheState under its mutex and never hold it across an RPC. run_round() and
// retire_once() are the threads' bodies, public so tests can drive them step by step.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "cache_state.h"
#include "cluster.h"
#include "counters.h"
#include "ms_clock.h"
#include "fill/hit_rates.h"
#include "fill/hot_list.h"
#include "peers.h"
#include "token_bucket.h"

namespace exo::cache {

struct FillerOptions {
  CacheFillConfig cfg;
  size_t capacity = 0;      // keys the selector may hold (cache_nodes[].capacity; map is 2x)
  size_t max_kv_bytes = 0;  // key + value that fit one reply frame
  // Rule changes per second that admissions may cost, 0 = no limit: this node's share of
  // switch.rule_update_rate, R / cache nodes (selector.h: an admission costs 1, 2 with a victim).
  double rule_changes_per_s = 0;
  static FillerOptions from(const Cluster& cluster, const CacheNodeInfo& self);
};

class Filler {
 public:
  Filler(FillerOptions opt, CacheState& state, Peers& peers, HotList& hot, CpCounters& cp,
         Clock clock = steady_ms);
  ~Filler();
  Filler(const Filler&) = delete;
  Filler& operator=(const Filler&) = delete;

  // Starts both threads when cache_fill.enabled (else does nothing).
  void start();
  // Wakes and joins the threads. An RPC in flight is not interrupted here: cancel it through
  // the Peers (GrpcPeers::cancel_all) first for a prompt stop. Idempotent.
  void stop();

  // One selection round (the fill thread's body).
  void run_round();
  // One retire pass over the keys retiring now. False when their rule removal failed (they are
  // retiring again and are retried on the next pass).
  bool retire_once();

 private:
  void fill_loop();
  void retire_loop();
  // AddCacheRules without waiting; keys the controller did not count (request lost, or
  // Ruleset 2 full) go to unruled_, to be sent again by retry_rules next round.
  void add_rules_or_defer(const std::vector<KeyRate>& rules, const char* who);
  // AddCacheRules again for inserted keys whose first request failed and that are still held.
  void retry_rules(const std::unordered_map<std::string, uint64_t>& in_map,
                   const std::unordered_set<std::string>& not_held);
  void fetch_and_insert(const std::vector<KeyRate>& admit, uint64_t now_ms);
  // Fill thread, under state_.mu: after a Reset RPC, forget the hit rates and the rule adds to
  // resend (of entries that are gone, whose rules the controller withdrew).
  void forget_if_reset();

  const FillerOptions opt_;
  CacheState& state_;
  Peers& peers_;
  HotList& hot_;
  CpCounters& cp_;
  const Clock clock_;

  // Fill-thread state (only run_round touches it).
  HitRates hit_rates_;
  TokenBucket rule_budget_;  // fill thread only: opt_.rule_changes_per_s, 1 s of burst (ns clock)
  std::unordered_map<std::string, double> unruled_;  // inserted, AddCacheRules failed: key -> rate
  uint64_t fill_resets_ = 0;  // keys.resets() when hit_rates_ and unruled_ were last valid
  Keys stalled_;  // retire thread only: removal failed, still in `removing`, sent again next pass
  uint64_t retire_resets_ = 0;  // retire thread only: keys.resets() when stalled_ was taken
  // Keys found missing (or too big) on FETCH -> until when they are not tried again. A db node
  // may well report a hot key that does not exist (GETs answered NOT_FOUND); without this the
  // filler would FETCH and EVICT it every round.
  std::unordered_map<std::string, uint64_t> uncacheable_;

  std::mutex mu_;  // guards stop_ and retire_wanted_; with cv_, wakes the threads
  std::condition_variable cv_;
  bool stop_ = false;
  bool retire_wanted_ = false;  // the fill thread marked keys retiring since the last pass
  std::thread fill_thread_, retire_thread_;
};

}  // namespace exo::cache
