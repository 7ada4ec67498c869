// The cache node's key table: every key's lifecycle and its two-phase writes in one place, as a
// state machine in the style of the controller's flows.py/rule_updater.py. Each method takes one
// event (an RPC's request, a FETCH's reply, a filler decision), moves the key(s) to their next
// state and returns what the caller must do: the RPC reply's fields, the keys to fetch, to ask
// rules for, to remove rules for and to EVICT. No I/O, no gRPC, no lock inside: the caller holds
// CacheState::mu, under which the data plane also reads the same LruMap (value and pending flag
// per entry, nothing else), so the GET path is what it was.
//
// States (KeyState in key_state.h) and the events that move a key between them:
//
//   absent --admit (Cache RPC, filler)--> fetching --reply inserted--> held
//   fetching --Evict/Reset--> fetch-cancelled --reply--> absent (nothing inserted, EVICT it)
//   fetching --Prepare/Commit--> fetching with the write recorded; the insert uses it
//   held --Prepare--> pending write --Commit--> held (new value) | absent + retiring (a DELETE:
//        entry gone, rule still there) ; --Abort--> held (old value)
//   pending write --Prepare(newer txid)--> pending write (the newer one supersedes)
//   held --filler victim--> retiring --retire thread takes it--> removing
//        --rule removed--> removing, entry erased --EVICT back--> absent
//   retiring --selected again / Cache RPC--> held (the removal was never sent)
//   any entry --Evict RPC (rule removed)--> removing, entry erased --EVICT back--> absent
//   any entry --pushed out by an insert (LRU)--> removing (the inserter removes its rule and
//        EVICTs it, then calls removal_done)
//   Reset: every entry dropped, every FETCH cancelled, retiring forgotten; removing stays until
//        its in-flight removal is back.
//
// The exact transition of every state on every event is the table in
// cache-node/tests/key_table_test.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "key_table/key_state.h"
#include "lru_map.h"

namespace exo::cache {

using Keys = std::vector<std::string>;

// The Cache RPC's admission of one requested key.
enum class CacheAdmit : uint8_t {
  kFetch,  // now fetching: FETCH it
  kHeld,   // held already (a retirement not sent yet is cancelled): its rule was asked for at
           // its insert, and asking again would add a second reference at the controller
  kSkip,   // its removal is in flight, or another FETCH is on it: skipped, the caller may retry
};

// The filler's admission of one selected key.
enum class FillAdmit : uint8_t {
  kFetch,                // now fetching: FETCH it
  kRetirementCancelled,  // it was retiring: its removal was never sent, its rule is still there
  kNoRoom,               // no room in this round's batch (the caller says so)
  kSkip,                 // taken meanwhile (held, fetching or removing)
};

// A Prepare/Commit/Abort's TxReply fields, and whether it was applied (the counters).
struct TxAnswer {
  bool ok = true;
  bool cached = false;
  std::string error;
  bool applied = false;
  bool retire = false;  // a committed DELETE erased the entry: the key now retires its rule
};

// What inserting a batch of FETCH replies came to: what to ask rules for, remove and EVICT.
struct InsertOutcome {
  Keys inserted;    // in the map now (and still there after the whole batch): ask for rules
  Keys not_cached;  // not found, deleted while fetching, or too big for one reply frame:
                    // EVICT them so their db node stops tracking them
  Keys failed;      // their db node could not be asked (or no FETCH of them was registered
                    // here); nothing to undo
  Keys cancelled;   // an Evict or Reset came during the FETCH: not inserted; EVICT them too (the
                    // FETCH may have reached the db node after it)
  Keys evicted;     // LRU victims of these inserts (entries gone; rules and db tracking remain),
                    // including keys of this batch pushed out by later ones. They are removing:
                    // remove their rules, EVICT them, then call removal_done(evicted).
};

// The filler's look at the keys that are not simply held.
struct FillView {
  std::unordered_set<std::string> retiring_held;  // retiring with an entry: may be re-admitted
  std::unordered_set<std::string> busy;  // fetching, removing, or retiring without an entry
                                         // (a committed DELETE): not to be admitted now
};

// What the retire thread's rule removal came to.
struct Retired {
  Keys gone;          // still removing: EVICT them, then call removal_done(gone)
  size_t erased = 0;  // entries erased
};

class KeyTable {
 public:
  explicit KeyTable(LruMap& map) : map_(map) {}
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  // ---- admission ----
  CacheAdmit admit_for_cache(const std::string& key);
  // `room`: the caller's batch and the map have room for one more FETCH.
  FillAdmit admit_for_fill(const std::string& key, bool room);
  // Free map slots (retiring entries occupy room until they are erased).
  size_t room() const { return map_.capacity() - map_.size(); }

  // ---- a FETCH is back: `want` as admitted, in order; `found` the (key, value) pairs the db
  // nodes returned, `failed` the keys whose db node could not be asked.
  InsertOutcome fetched(const Keys& want, const std::vector<std::pair<std::string, std::string>>& found,
                        const Keys& failed, size_t max_kv_bytes);

  // ---- two-phase writes: the one prepare/commit/abort path (key_tx.cc) ----
  TxAnswer prepare(const std::string& key, uint64_t txid, bool is_delete, std::string_view value);
  // retire_deleted: a committed DELETE retires the key's rule (cache_fill.enabled).
  TxAnswer commit(const std::string& key, uint64_t txid, bool retire_deleted);
  TxAnswer abort(const std::string& key, uint64_t txid);

  // ---- retiring and removing ----
  // The filler selected it out: true if it is now retiring (held, and not on its way out yet).
  bool mark_retiring(const std::string& key);
  // The retire thread takes every retiring key: now removing. Unordered.
  Keys take_retiring();
  // The switch confirmed the removal of `keys`' rules: erase the entries of those still removing.
  Retired rules_removed(const Keys& keys);
  // Their EVICT is back (or their removal is given up after a Reset): no longer removing.
  void removal_done(const Keys& keys);
  // The Evict RPC, once the rule is removed: removing until its EVICT is back, a FETCH in flight
  // cancelled, the entry erased (true if there was one).
  bool evict(const std::string& key);
  // DropEntries (test hook): the entry only. True if there was one.
  bool drop_entry(const std::string& key) { return map_.erase(key); }
  // Reset RPC: drops every entry (pending ones too), cancels every FETCH in flight, forgets the
  // retirements not sent yet; keys whose removal is in flight stay removing until it is back, so
  // no new FETCH of them can be overtaken by its late EVICT. Returns the entries dropped.
  size_t reset();
  // How many Resets have run (the filler forgets its held-key state when this changes).
  uint64_t resets() const { return resets_; }

  // ---- looks (gauges, the filler, tests) ----
  KeyState state(const std::string& key) const;
  RulePhase rule(const std::string& key) const;
  const Fetch* fetch(const std::string& key) const;
  bool held(const std::string& key) const { return map_.find(key) != nullptr; }
  bool removing(const std::string& key) const { return rule(key) == RulePhase::kRemoving; }
  FillView fill_view() const;
  Keys fetching_keys() const;  // with a FETCH in flight (cancelled ones too)
  size_t fetching_count() const { return fetching_; }
  size_t retiring_count() const { return retiring_; }
  size_t removing_count() const { return removing_; }
  // "" when the table's own bookkeeping is consistent, else what is wrong (tests, fuzzing).
  std::string check() const;

 private:
  struct Record {
    RulePhase rule = RulePhase::kNone;
    std::optional<Fetch> fetch;
  };
  using Records = std::unordered_map<std::string, Record>;

  void set_rule(const std::string& key, RulePhase phase);
  void start_fetch(const std::string& key);
  // Drops the record when it holds nothing any more.
  void tidy(Records::iterator it);
  // Where a key's prepared write lives: its map entry, else the FETCH in flight, else nowhere.
  struct Slot {
    LruMap::Entry* entry = nullptr;
    Fetch* fetch = nullptr;
    explicit operator bool() const { return entry || fetch; }
    const PreparedWrite* prepared() const;
  };
  Slot slot(const std::string& key);
  TxAnswer finish(const std::string& key, uint64_t txid, bool commit, bool retire_deleted);

  LruMap& map_;
  Records records_;  // keys fetching, retiring or removing (held keys live in map_ only)
  size_t fetching_ = 0, retiring_ = 0, removing_ = 0;
  uint64_t resets_ = 0;
};

}  // namespace exo::cache
