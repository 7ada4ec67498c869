#include "filler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "fill/selector.h"
#include "insert_fetched.h"
#include "log.h"
#include "wire.h"

namespace exo::cache {

FillerOptions FillerOptions::from(const Cluster& cluster, const CacheNodeInfo& self) {
  FillerOptions o;
  o.cfg = cluster.cache_fill;
  o.capacity = self.capacity;
  o.max_kv_bytes = exo::wire::max_kv_bytes(cluster.mtu);
  // Every admission costs the switch a rule add, and a replacement its victim's delete too; the
  // cache nodes share the switch's R. Without this cap, keys near the cut (rates within sampling
  // noise of each other) were swapped in and out ~70 times a second at 3x the figures' rate,
  // more than R = 50 flow-mods/s could follow: Ruleset 2 stayed full with a backlog of deletes,
  // and a real change of the hot set waited behind it (docs/cache-fill.md 2).
  o.rule_changes_per_s = cluster.rule_update_rate / static_cast<double>(std::max<size_t>(1, cluster.cache_nodes.size()));
  return o;
}

Filler::Filler(FillerOptions opt, CacheState& state, Peers& peers, HotList& hot, CpCounters& cp,
               Clock clock)
    : opt_(std::move(opt)), state_(state), peers_(peers), hot_(hot), cp_(cp),
      clock_(std::move(clock)),
      // A key cached by hand starts at min_rate: not evicted as cold before its hits are measured.
      hit_rates_(opt_.cfg.hit_ewma_alpha, opt_.cfg.min_rate),
      rule_budget_(opt_.rule_changes_per_s, std::max(2.0, opt_.rule_changes_per_s), clock_() * 1'000'000) {}

Filler::~Filler() { stop(); }

void Filler::start() {
  if (!opt_.cfg.enabled || fill_thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = false;
  }
  fill_thread_ = std::thread([this] { fill_loop(); });
  retire_thread_ = std::thread([this] { retire_loop(); });
}

void Filler::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (fill_thread_.joinable()) fill_thread_.join();
  if (retire_thread_.joinable()) retire_thread_.join();
}

void Filler::fill_loop() {
  const auto interval = std::chrono::milliseconds(std::max<uint32_t>(opt_.cfg.interval_ms, 1));
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    run_round();
    lock.lock();
    cv_.wait_for(lock, interval, [this] { return stop_; });
  }
}

void Filler::retire_loop() {
  // Woken by new victims; the timeout retries removals that failed (their keys are retiring again).
  const auto interval = std::chrono::milliseconds(std::max<uint32_t>(opt_.cfg.interval_ms, 1));
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, interval, [this] { return stop_ || retire_wanted_; });
    if (stop_) break;
    retire_wanted_ = false;
    lock.unlock();
    retire_once();
    lock.lock();
  }
}

void Filler::run_round() {
  const uint64_t now = clock_();
  ++cp_.fill_rounds;
  const std::vector<KeyRate> hot = hot_.snapshot(now);

  // One short look at the shared state: hit counters, and the keys that are not "held".
  std::vector<std::pair<std::string, uint64_t>> hits;
  std::unordered_set<std::string> retiring;  // retiring and still in the map: may be re-admitted
  std::unordered_set<std::string> skip;      // fetch or rule removal in flight
  {
    std::lock_guard lock(state_.mu);
    forget_if_reset();
    hits.reserve(state_.map.size());
    state_.map.for_each([&](const LruMap::Entry& e) { hits.emplace_back(e.key, e.hits); });
    FillView view = state_.keys.fill_view();
    retiring = std::move(view.retiring_held);
    skip = std::move(view.busy);
  }
  std::erase_if(uncacheable_, [&](const auto& kv) { return kv.second <= now; });
  for (const auto& [k, until] : uncacheable_) skip.insert(k);
  hit_rates_.sample(hits, now);
  const std::unordered_map<std::string, uint64_t> in_map(hits.begin(), hits.end());
  std::unordered_set<std::string> not_held = skip;
  not_held.insert(retiring.begin(), retiring.end());
  retry_rules(in_map, not_held);

  std::unordered_map<std::string, double> reported;
  for (const auto& kr : hot) reported.emplace(kr.key, kr.rate);
  auto reported_rate = [&](const std::string& k) {
    auto it = reported.find(k);
    return it == reported.end() ? 0.0 : it->second;
  };
  // A held key's rate is its own hit rate, but its db node may still see its GETs (the rule is
  // not installed yet, or writes are pending): take the larger, so a key whose rule is still
  // queued at the controller is not evicted for lack of hits it could not get.
  auto rate_of = [&](const std::string& k) {
    return std::max(hit_rates_.rate(k), reported_rate(k));
  };

  SelectInput in;
  in.capacity = opt_.capacity;
  in.min_rate = opt_.cfg.min_rate;
  in.hysteresis = opt_.cfg.hysteresis;
  in.skip = std::move(skip);
  const uint64_t now_ns = now * 1'000'000;
  if (opt_.rule_changes_per_s > 0)
    in.rule_budget = static_cast<size_t>(std::floor(rule_budget_.available(now_ns)));
  for (const auto& [k, count] : hits)
    if (!not_held.count(k)) in.held.push_back({k, rate_of(k)});
  // Candidates: the hot list plus the retiring keys (which compete with what they would have).
  for (const auto& kr : hot)
    if (!retiring.count(kr.key)) in.candidates.push_back(kr);
  for (const auto& k : retiring) in.candidates.push_back({k, rate_of(k)});
  std::sort(in.candidates.begin(), in.candidates.end(), [](const KeyRate& a, const KeyRate& b) {
    return a.rate != b.rate ? a.rate > b.rate : a.key < b.key;
  });

  const Selection sel = select_keys(in);
  cp_.threshold_milli = static_cast<uint64_t>(std::llround(std::max(sel.threshold, 0.0) * 1000));

  // Victims: marked retiring, served until the retire thread has removed their rules.
  // Admissions: a retiring key just stays; others are fetched, within the batch limit and the
  // map's free room (retiring entries occupy room until they are erased).
  std::vector<KeyRate> to_fetch;
  size_t marked = 0, cancelled = 0;
  {
    std::lock_guard lock(state_.mu);
    for (const auto& v : sel.evict) marked += state_.keys.mark_retiring(v.key);
    const size_t room = state_.keys.room();
    for (const auto& a : sel.admit) {
      const bool has_room = to_fetch.size() < opt_.cfg.max_fetch_batch && to_fetch.size() < room;
      switch (state_.keys.admit_for_fill(a.key, has_room)) {
        case FillAdmit::kFetch: to_fetch.push_back(a); break;
        case FillAdmit::kRetirementCancelled: ++cancelled; break;
        case FillAdmit::kNoRoom:
        case FillAdmit::kSkip: break;  // next round, or taken by a concurrent Cache RPC
      }
    }
  }
  cp_.fill_evicted += marked;
  cp_.fill_admitted += cancelled;
  // Charged as selected (fetches that find no room this round still had their victims marked).
  if (opt_.rule_changes_per_s > 0 && sel.rule_changes > 0)
    rule_budget_.take(now_ns, static_cast<double>(sel.rule_changes));
  if (marked > 0) {
    {
      std::lock_guard lock(mu_);
      retire_wanted_ = true;
    }
    cv_.notify_all();
  }
  if (!to_fetch.empty()) fetch_and_insert(to_fetch, now);
}

void Filler::fetch_and_insert(const std::vector<KeyRate>& admit, uint64_t now_ms) {
  Keys keys;
  for (const auto& a : admit) keys.push_back(a.key);
  // FETCH first: from its reply on, the db node two-phase-commits writes to these keys with us.
  const FetchResult got = peers_.fetch(keys);
  if (!got.error.empty()) LOG_WARN("fill: %s", got.error.c_str());
  InsertOutcome o;
  {
    std::lock_guard lock(state_.mu);
    // A Reset since this round's snapshot cancelled every FETCH registered before it, so what
    // is inserted now was registered after it: forget the older state before recording theirs.
    forget_if_reset();
    o = insert_fetched(state_, keys, got, opt_.max_kv_bytes);
  }
  cp_.fill_fetch_failed += o.failed.size();  // still hot: selected and fetched again next round
  cp_.fill_admitted += o.inserted.size();
  cp_.evictions += o.evicted.size();

  // The values are in the map: now the switch may send GETs here, hottest first.
  const std::unordered_set<std::string> inserted(o.inserted.begin(), o.inserted.end());
  std::vector<KeyRate> rules;
  for (const auto& a : admit)
    if (inserted.count(a.key)) {
      rules.push_back(a);
      hit_rates_.admitted(a.key, a.rate, now_ms);
    }
  if (!rules.empty()) add_rules_or_defer(rules, "fill");
  // LRU victims only when a concurrent Cache RPC filled the map: their entries are gone already,
  // so a GET still routed here is forwarded; queue the removal without waiting. They stay
  // removing (not fetched again) until their EVICT below is back.
  if (!o.evicted.empty())
    if (std::string e = peers_.remove_rules(o.evicted, /*no_wait=*/true).error; !e.empty()) {
      ++cp_.fill_rule_errors;
      LOG_WARN("fill: %s", e.c_str());
    }
  // Not found (or too big): the db node marked them cached on FETCH and should stop tracking.
  // Cancelled ones (Evict or Reset RPC meanwhile) too, but they may be fetched again at once.
  for (const auto& k : o.not_cached) uncacheable_[k] = now_ms + opt_.cfg.report_ttl_ms;
  Keys untrack = o.not_cached;
  untrack.insert(untrack.end(), o.cancelled.begin(), o.cancelled.end());
  untrack.insert(untrack.end(), o.evicted.begin(), o.evicted.end());
  if (!untrack.empty())
    if (std::string e = peers_.evict(untrack); !e.empty()) LOG_WARN("fill: %s", e.c_str());
  if (!o.evicted.empty()) {
    std::lock_guard lock(state_.mu);
    state_.keys.removal_done(o.evicted);
  }
}

void Filler::forget_if_reset() {
  if (state_.keys.resets() == fill_resets_) return;
  fill_resets_ = state_.keys.resets();
  hit_rates_.clear();
  unruled_.clear();
}

void Filler::add_rules_or_defer(const std::vector<KeyRate>& rules, const char* who) {
  const RuleOutcome r = peers_.add_rules(rules, /*no_wait=*/true);
  if (r.error.empty()) return;
  // The controller counts references, so an add it received is never resent, with two
  // exceptions that it did not count: a request that never reached it, and adds turned down
  // because Ruleset 2 was full (our own retiring keys' removals will make room). Without the
  // second, a hot key admitted while the rules were full stayed cached with no rule: its GETs
  // never came here, and its db node's reports kept it from being evicted (Figure 4.4 at 3x).
  if (!r.delivered) {
    ++cp_.fill_rule_errors;
    LOG_WARN("%s: %s", who, r.error.c_str());
    for (const auto& kr : rules) unruled_[kr.key] = kr.rate;
    return;
  }
  const std::unordered_set<std::string> full(r.full.begin(), r.full.end());
  for (const auto& kr : rules)
    if (full.count(kr.key)) unruled_[kr.key] = kr.rate;
  cp_.fill_rules_deferred += full.size();
  if (r.rejected > full.size() || r.rejected == 0) {  // refused for another reason, or unconfirmed
    ++cp_.fill_rule_errors;
    LOG_WARN("%s: %s", who, r.error.c_str());
  }
}

void Filler::retry_rules(const std::unordered_map<std::string, uint64_t>& in_map,
                         const std::unordered_set<std::string>& not_held) {
  std::erase_if(unruled_, [&](const auto& kv) {
    return !in_map.count(kv.first) || not_held.count(kv.first);
  });
  if (unruled_.empty()) return;
  std::vector<KeyRate> rules;
  for (const auto& [k, r] : unruled_) rules.push_back({k, r});
  std::sort(rules.begin(), rules.end(), [](const KeyRate& a, const KeyRate& b) {
    return a.rate != b.rate ? a.rate > b.rate : a.key < b.key;
  });
  unruled_.clear();  // what must be sent again is put back by add_rules_or_defer
  add_rules_or_defer(rules, "fill: retry");
}

bool Filler::retire_once() {
  // Keys stay in `removing` from here until their EVICT is back: while there, neither the filler
  // nor a Cache RPC fetches them again, so a late EVICT cannot untrack a fresh copy, and a
  // removal the controller has already queued is never cancelled by a re-admission.
  Keys batch = std::move(stalled_);
  stalled_.clear();
  {
    std::lock_guard lock(state_.mu);
    if (state_.keys.resets() != retire_resets_) {
      // A Reset RPC came since these were taken: the controller withdrew their rules and their
      // db nodes forgot this node, so there is nothing left to remove or EVICT.
      state_.keys.removal_done(batch);
      batch.clear();
      retire_resets_ = state_.keys.resets();
    }
    // No longer removing: an Evict RPC took care of it.
    std::erase_if(batch, [&](const std::string& k) { return !state_.keys.removing(k); });
    const Keys taken = state_.keys.take_retiring();
    batch.insert(batch.end(), taken.begin(), taken.end());
  }
  if (batch.empty()) return true;
  std::sort(batch.begin(), batch.end());
  // Wait for the switch: until the rule is gone, GETs may still arrive and must be served.
  if (std::string e = peers_.remove_rules(batch, /*no_wait=*/false).error; !e.empty()) {
    ++cp_.fill_rule_errors;
    LOG_WARN("retire: %s (retrying)", e.c_str());
    stalled_ = std::move(batch);  // sent again next pass: removing an absent rule is a no-op
    return false;
  }
  Retired r;
  {
    std::lock_guard lock(state_.mu);
    r = state_.keys.rules_removed(batch);  // of the keys still removing: entries erased
  }
  const Keys& gone = r.gone;
  cp_.retired += r.erased;
  // Only now may the db node stop two-phase-committing these keys with us.
  if (gone.empty()) return true;
  if (std::string e = peers_.evict(gone); !e.empty()) LOG_WARN("retire: %s", e.c_str());
  std::lock_guard lock(state_.mu);
  state_.keys.removal_done(gone);
  return true;
}

}  // namespace exo::cache
