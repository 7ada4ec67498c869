// The key table's lifecycle events: admission, FETCH replies, retiring/removing, Reset. The
// two-phase writes are in key_tx.cc.
#include "key_table/key_table.h"

#include <algorithm>
#include <map>
#include <set>

namespace exo::cache {

// ---- bookkeeping ----

void KeyTable::set_rule(const std::string& key, RulePhase phase) {
  auto it = records_.find(key);
  if (it == records_.end()) {
    if (phase == RulePhase::kNone) return;
    it = records_.emplace(key, Record{}).first;
  }
  RulePhase& cur = it->second.rule;
  if (cur == phase) return;
  if (cur == RulePhase::kRetiring) --retiring_;
  if (cur == RulePhase::kRemoving) --removing_;
  if (phase == RulePhase::kRetiring) ++retiring_;
  if (phase == RulePhase::kRemoving) ++removing_;
  cur = phase;
  tidy(it);
}

void KeyTable::start_fetch(const std::string& key) {
  Record& r = records_[key];
  if (!r.fetch) ++fetching_;
  r.fetch.emplace();
}

void KeyTable::tidy(Records::iterator it) {
  if (it->second.rule == RulePhase::kNone && !it->second.fetch) records_.erase(it);
}

KeyState KeyTable::state(const std::string& key) const {
  if (auto it = records_.find(key); it != records_.end()) {
    const Record& r = it->second;
    if (r.fetch) return r.fetch->cancelled ? KeyState::kFetchCancelled : KeyState::kFetching;
    if (r.rule == RulePhase::kRetiring) return KeyState::kRetiring;
    if (r.rule == RulePhase::kRemoving) return KeyState::kRemoving;
  }
  const LruMap::Entry* e = map_.find(key);
  if (!e) return KeyState::kAbsent;
  return e->pending ? KeyState::kPendingWrite : KeyState::kHeld;
}

RulePhase KeyTable::rule(const std::string& key) const {
  auto it = records_.find(key);
  return it == records_.end() ? RulePhase::kNone : it->second.rule;
}

const Fetch* KeyTable::fetch(const std::string& key) const {
  auto it = records_.find(key);
  return it == records_.end() || !it->second.fetch ? nullptr : &*it->second.fetch;
}

// ---- admission ----

CacheAdmit KeyTable::admit_for_cache(const std::string& key) {
  // Its rule removal is in flight: adding it now could reach the controller before the removal
  // and be undone by it.
  const RulePhase phase = rule(key);
  if (phase == RulePhase::kRemoving) return CacheAdmit::kSkip;
  // Removal not sent yet: cancel it, the key is wanted again.
  if (phase == RulePhase::kRetiring) set_rule(key, RulePhase::kNone);
  if (map_.find(key)) return CacheAdmit::kHeld;
  if (fetch(key)) return CacheAdmit::kSkip;  // another Cache() or the filler is on it
  start_fetch(key);
  return CacheAdmit::kFetch;
}

FillAdmit KeyTable::admit_for_fill(const std::string& key, bool room) {
  if (rule(key) == RulePhase::kRetiring) {
    set_rule(key, RulePhase::kNone);  // its removal was never sent: its rule is still there
    return FillAdmit::kRetirementCancelled;
  }
  if (!room) return FillAdmit::kNoRoom;
  // A concurrent Cache RPC may have taken the key since the filler's snapshot.
  if (map_.find(key) || fetch(key) || rule(key) == RulePhase::kRemoving) return FillAdmit::kSkip;
  start_fetch(key);
  return FillAdmit::kFetch;
}

// ---- FETCH replies ----

InsertOutcome KeyTable::fetched(const Keys& want,
                                const std::vector<std::pair<std::string, std::string>>& found,
                                const Keys& failed, size_t max_kv_bytes) {
  InsertOutcome out;
  std::map<std::string_view, const std::string*> values;
  for (const auto& [k, v] : found) values.emplace(k, &v);
  const std::set<std::string_view> unreachable(failed.begin(), failed.end());

  for (const auto& k : want) {
    auto it = records_.find(k);
    if (it == records_.end() || !it->second.fetch) {
      out.failed.push_back(k);  // not a FETCH this table started: nothing of it to apply
      continue;
    }
    Fetch f = std::move(*it->second.fetch);
    it->second.fetch.reset();
    --fetching_;
    tidy(it);
    if (unreachable.count(k)) {
      out.failed.push_back(k);
      continue;
    }
    if (f.cancelled) {
      out.cancelled.push_back(k);
      continue;
    }
    // A write committed while we were fetching is newer than what the db node returned.
    const std::string* value = nullptr;
    if (f.committed) value = f.committed->is_delete ? nullptr : &f.committed->value;
    else if (auto v = values.find(k); v != values.end()) value = v->second;
    // Not found on the db node (or deleted meanwhile), or too big to ever fit a reply frame.
    if (!value || k.size() + value->size() > max_kv_bytes) {
      out.not_cached.push_back(k);
      continue;
    }
    const size_t victims = out.evicted.size();
    LruMap::Entry* e = map_.insert(k, *value, &out.evicted);
    // Victims' entries are gone; their rules and db tracking are the inserter's to remove, and
    // until that is done they must not be fetched again (a late EVICT would untrack the copy).
    for (size_t i = victims; i < out.evicted.size(); ++i) set_rule(out.evicted[i], RulePhase::kRemoving);
    // A write still prepared is re-applied as pending on the new entry, by the same rule.
    if (e && f.prepared && check_prepare(e->pending ? &e->prepared : nullptr, f.prepared->txid) ==
                               TxCheck::kOk)
      map_.set_pending(*e, std::move(*f.prepared));
    out.inserted.push_back(k);
  }
  // A batch larger than the free space evicts its own first keys: those are not cached any more
  // (they are in `evicted`).
  std::erase_if(out.inserted, [&](const std::string& k) { return !map_.find(k); });
  return out;
}

// ---- retiring and removing ----

bool KeyTable::mark_retiring(const std::string& key) {
  if (!map_.find(key) || rule(key) != RulePhase::kNone) return false;
  set_rule(key, RulePhase::kRetiring);
  return true;
}

Keys KeyTable::take_retiring() {
  Keys out;
  for (auto& [k, r] : records_)
    if (r.rule == RulePhase::kRetiring) {
      r.rule = RulePhase::kRemoving;
      out.push_back(k);
    }
  retiring_ -= out.size();
  removing_ += out.size();
  return out;
}

Retired KeyTable::rules_removed(const Keys& keys) {
  Retired out;
  for (const auto& k : keys) {
    // Not removing any more: an Evict RPC or a Reset already took care of it.
    if (rule(k) != RulePhase::kRemoving) continue;
    if (map_.erase(k)) ++out.erased;
    out.gone.push_back(k);
  }
  return out;
}

void KeyTable::removal_done(const Keys& keys) {
  for (const auto& k : keys)
    if (rule(k) == RulePhase::kRemoving) set_rule(k, RulePhase::kNone);
}

bool KeyTable::evict(const std::string& key) {
  // Its rule is gone: nothing left for the retire thread to do. Removing until the EVICT is back,
  // so no FETCH of the key can be overtaken by it.
  set_rule(key, RulePhase::kRemoving);
  // A FETCH in flight must not insert it after all (not even with a write committed later).
  if (auto it = records_.find(key); it != records_.end() && it->second.fetch)
    it->second.fetch->cancelled = true;
  return map_.erase(key);
}

size_t KeyTable::reset() {
  const size_t dropped = map_.clear();
  for (auto it = records_.begin(); it != records_.end();) {
    Record& r = it->second;
    if (r.fetch) r.fetch->cancelled = true;
    // A retirement not sent yet: its rule is gone and its db node forgot this node.
    if (r.rule == RulePhase::kRetiring) {
      r.rule = RulePhase::kNone;
      --retiring_;
    }
    if (r.rule == RulePhase::kNone && !r.fetch) it = records_.erase(it);
    else ++it;
  }
  ++resets_;
  return dropped;
}

FillView KeyTable::fill_view() const {
  FillView v;
  for (const auto& [k, r] : records_) {
    // A retiring key whose entry is gone (a committed DELETE) still has a rule to remove:
    // fetching it now would race its pending removal.
    if (r.rule == RulePhase::kRetiring) (map_.find(k) ? v.retiring_held : v.busy).insert(k);
    if (r.rule == RulePhase::kRemoving || r.fetch) v.busy.insert(k);
  }
  return v;
}

Keys KeyTable::fetching_keys() const {
  Keys out;
  for (const auto& [k, r] : records_)
    if (r.fetch) out.push_back(k);
  return out;
}

std::string KeyTable::check() const {
  size_t fetching = 0, retiring = 0, removing = 0;
  for (const auto& [k, r] : records_) {
    if (r.rule == RulePhase::kNone && !r.fetch) return "empty record for '" + k + "'";
    fetching += r.fetch.has_value();
    retiring += r.rule == RulePhase::kRetiring;
    removing += r.rule == RulePhase::kRemoving;
    // At most one prepared write per key: a key being fetched has no entry to hold another.
    const LruMap::Entry* e = map_.find(k);
    if (r.fetch && e && e->pending && r.fetch->prepared) return "two prepared writes for '" + k + "'";
  }
  if (fetching != fetching_ || retiring != retiring_ || removing != removing_)
    return "state counts out of step";
  size_t pending = 0;
  map_.for_each([&](const LruMap::Entry& e) { pending += e.pending; });
  if (pending != map_.pending_count()) return "pending count out of step";
  if (map_.size() > map_.capacity()) return "map over capacity";
  return "";
}

}  // namespace exo::cache
