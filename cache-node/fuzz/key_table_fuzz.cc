// libFuzzer target: the cache node's key table (src/key_table/) on random event sequences, as
// its callers would send them with RPCs overlapping in any order: admissions (Cache RPC,
// filler), FETCH replies for the batches in flight (any order, stale values, unreachable db
// nodes), Prepare/Commit/Abort with any txid, filler victims, the retire thread's steps, Evict,
// DropEntries, Reset, and the end of removals in flight. Four keys over a map of three, so
// inserts push entries out.
//
// Input: pairs [op][arg]. Checked after every event, against a shadow model kept from the events
// alone (not from the table's internals):
//   - the table's own bookkeeping (KeyTable::check: at most one prepared write per key, counts);
//   - a key whose removal is in flight (taken by the retire thread, Evicted, or pushed out by an
//     insert, until its removal_done) is never admitted: no FETCH, no "held";
//   - a FETCH cancelled by Evict or Reset never inserts;
//   - a write committed while its key was being fetched wins over the fetched value (a DELETE:
//     nothing inserted), and a FETCH reply for a key not being fetched changes nothing;
//   - a committed write is applied to the entry; an abort keeps the value.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "key_table/key_table.h"

using namespace exo::cache;
using exo::fuzz::check;

namespace {

constexpr size_t kMaxKv = 64;
const char* const kKeys[] = {"a", "b", "c", "d"};

enum Op : uint8_t {
  kCacheAdmit,  // [key | new batch << 7]
  kFillAdmit,   // [key | room << 2 | new batch << 7]
  kVictim,      // [key]
  kTake,        // the retire thread takes the retiring keys: a removal in flight
  kRulesRemoved,  // [which removal in flight]
  kRemovalDone,   // [which removal in flight]
  kEvict,       // [key]: the Evict RPC, a removal in flight until its removal_done
  kDrop,        // [key]
  kReset,
  kPrepare,     // [key | txid << 2]; txid & 1: a delete
  kCommit,      // [key | txid << 2]
  kAbort,       // [key | txid << 2]
  kCommitPrepared,  // [key]: Commit of the txid prepared now (so commits do apply)
  kAbortPrepared,   // [key]
  kFetchDone,   // [which batch | salt << 3]: found / missing / unreachable per key from the salt
  kStrayReply,  // [key]: a FETCH reply for a key no FETCH of this table is on
  kNumOps
};

struct Shadow {
  LruMap map{3};
  KeyTable t{map};
  std::vector<Keys> batches;   // FETCHes in flight, as admitted
  std::vector<Keys> removals;  // removals in flight (retire batches, Evicts, LRU victims)
  std::set<std::string> removing;   // a removal of it is in flight
  std::set<std::string> cancelled;  // its FETCH in flight was cancelled (Evict, Reset)
  std::map<std::string, PreparedWrite> committed_while_fetching;
  uint64_t round = 0;

  bool fetching(const std::string& k) const {
    for (const auto& b : batches)
      if (std::find(b.begin(), b.end(), k) != b.end()) return true;
    return false;
  }
  const PreparedWrite* prepared(const std::string& k) {
    if (const LruMap::Entry* e = map.find(k)) return e->pending ? &e->prepared : nullptr;
    const Fetch* f = t.fetch(k);
    return f && f->prepared ? &*f->prepared : nullptr;
  }
  void admitted(const std::string& k, bool fetch, bool new_batch) {
    check(!removing.count(k), "a key was admitted while its removal is in flight");
    if (!fetch) return;
    check(!fetching(k), "a key admitted twice for FETCH");
    if (new_batch || batches.empty()) batches.emplace_back();
    batches.back().push_back(k);
    cancelled.erase(k);
    committed_while_fetching.erase(k);
  }
  void removal_started(const Keys& keys) {
    removals.push_back(keys);
    removing.insert(keys.begin(), keys.end());
  }

  void tx(const std::string& k, uint64_t txid, bool commit) {
    const PreparedWrite* p = prepared(k);
    const std::optional<PreparedWrite> before = p ? std::optional(*p) : std::nullopt;
    const LruMap::Entry* e = map.find(k);
    const std::optional<std::string> old_value = e ? std::optional(e->value) : std::nullopt;
    const bool was_fetching = t.fetch(k) && !e;
    const TxAnswer a = commit ? t.commit(k, txid, true) : t.abort(k, txid);
    check(a.applied == (before && before->txid == txid), "Commit/Abort applied iff its txid is prepared");
    if (!a.applied) return;
    if (was_fetching) {
      if (commit) committed_while_fetching[k] = *before;
      return;
    }
    const LruMap::Entry* now = map.find(k);
    if (!commit) check(now && !now->pending && now->value == *old_value, "Abort changed the entry");
    else if (before->is_delete) check(!now, "a committed DELETE left the entry");
    else check(now && !now->pending && now->value == before->value, "Commit did not install its value");
  }

  void fetch_done(size_t which, uint8_t salt) {
    if (batches.empty()) return;
    which %= batches.size();
    const Keys want = batches[which];
    batches.erase(batches.begin() + which);
    std::vector<std::pair<std::string, std::string>> found;
    Keys failed;
    std::map<std::string, std::optional<PreparedWrite>> prepared_then;
    for (size_t i = 0; i < want.size(); ++i) {
      const uint8_t r = (salt >> (i % 4 * 2)) & 3;  // 0, 1: found (stale), 2: missing, 3: failed
      if (r < 2) found.emplace_back(want[i], "db" + std::to_string(round));
      if (r == 3) failed.push_back(want[i]);
      const Fetch* f = t.fetch(want[i]);
      check(f != nullptr, "an admitted FETCH is not in the table");
      prepared_then[want[i]] = f->prepared;
    }
    const InsertOutcome o = t.fetched(want, found, failed, kMaxKv);
    auto in = [](const Keys& ks, const std::string& k) {
      return std::find(ks.begin(), ks.end(), k) != ks.end();
    };
    for (const auto& k : want) {
      const bool was_cancelled = cancelled.count(k) > 0;
      const bool unreachable = in(failed, k);
      if (was_cancelled) check(!in(o.inserted, k) && !map.find(k), "a cancelled FETCH inserted");
      if (in(o.inserted, k)) {
        const LruMap::Entry* e = map.find(k);
        check(e != nullptr, "inserted but not in the map");
        auto c = committed_while_fetching.find(k);
        if (c != committed_while_fetching.end())
          check(!c->second.is_delete && e->value == c->second.value,
                "a write committed during the FETCH lost to the fetched value");
        const auto& p = prepared_then[k];
        check(e->pending == p.has_value() && (!p || e->prepared.txid == p->txid),
              "a write prepared during the FETCH was not carried onto the entry");
      } else if (!unreachable && !was_cancelled && !in(o.evicted, k)) {
        auto c = committed_while_fetching.find(k);
        const bool deleted = c != committed_while_fetching.end() && c->second.is_delete;
        const bool found_k = std::any_of(found.begin(), found.end(), [&](auto& kv) { return kv.first == k; });
        check(in(o.not_cached, k) && (deleted || (!found_k && c == committed_while_fetching.end())),
              "a FETCH reply with a value was not inserted");
      }
      cancelled.erase(k);
      committed_while_fetching.erase(k);
    }
    if (!o.evicted.empty()) removal_started(o.evicted);
  }

  void step(uint8_t op, uint8_t arg) {
    ++round;
    const std::string k = kKeys[arg & 3];
    switch (op) {
      case kCacheAdmit: {
        const CacheAdmit a = t.admit_for_cache(k);
        if (a != CacheAdmit::kSkip) admitted(k, a == CacheAdmit::kFetch, arg & 0x80);
        return;
      }
      case kFillAdmit: {
        const FillAdmit a = t.admit_for_fill(k, arg & 4);
        if (a == FillAdmit::kFetch || a == FillAdmit::kRetirementCancelled)
          admitted(k, a == FillAdmit::kFetch, arg & 0x80);
        return;
      }
      case kVictim:
        if (t.mark_retiring(k)) check(!removing.count(k), "a key in removal marked retiring");
        return;
      case kTake: {
        const Keys taken = t.take_retiring();
        for (const auto& x : taken) check(!removing.count(x), "a retiring key was removing already");
        if (!taken.empty()) removal_started(taken);
        return;
      }
      case kRulesRemoved: {
        if (removals.empty()) return;
        Keys& r = removals[arg % removals.size()];
        const Retired done = t.rules_removed(r);
        for (const auto& x : r)
          check((std::find(done.gone.begin(), done.gone.end(), x) != done.gone.end()) ==
                    removing.count(x) > 0,
                "rules_removed disagrees with the removals in flight");
        r = done.gone;
        return;
      }
      case kRemovalDone: {
        if (removals.empty()) return;
        const size_t i = arg % removals.size();
        t.removal_done(removals[i]);
        for (const auto& x : removals[i]) removing.erase(x);
        removals.erase(removals.begin() + i);
        return;
      }
      case kEvict:
        if (fetching(k)) cancelled.insert(k);
        t.evict(k);
        removal_started({k});
        return;
      case kDrop:
        t.drop_entry(k);
        return;
      case kReset:
        for (const auto& b : batches) cancelled.insert(b.begin(), b.end());
        t.reset();
        check(map.size() == 0 && map.pending_count() == 0, "Reset left entries");
        return;
      case kPrepare: {
        const uint64_t txid = arg >> 2;
        const PreparedWrite* p = prepared(k);
        const std::optional<uint64_t> before = p ? std::optional(p->txid) : std::nullopt;
        const bool has_slot = map.find(k) || t.fetch(k);
        const TxAnswer a = t.prepare(k, txid, txid & 1, "w" + std::to_string(round));
        check(a.applied == (has_slot && (!before || *before <= txid)),
              "Prepare applied iff held or fetching and not older than the prepared txid");
        if (a.applied) check(prepared(k) && prepared(k)->txid == txid, "Prepare not recorded");
        return;
      }
      case kCommit:
      case kAbort:
        tx(k, arg >> 2, op == kCommit);
        return;
      case kCommitPrepared:
      case kAbortPrepared:
        if (const PreparedWrite* p = prepared(k)) tx(k, p->txid, op == kCommitPrepared);
        return;
      case kFetchDone:
        fetch_done(arg & 7, arg >> 3);
        return;
      case kStrayReply: {
        if (t.fetch(k)) return;
        const LruMap::Entry* e = map.find(k);
        const std::optional<std::string> before = e ? std::optional(e->value) : std::nullopt;
        const InsertOutcome o = t.fetched({k}, {{k, "stray"}}, {}, kMaxKv);
        check(o.failed == Keys{k}, "a stray FETCH reply was not refused");
        const LruMap::Entry* now = map.find(k);
        check(bool(now) == bool(before) && (!now || now->value == *before),
              "a stray FETCH reply changed the entry");
        return;
      }
      default:
        return;
    }
  }

  void invariants() {
    const std::string bad = t.check();
    if (!bad.empty()) check(false, bad.c_str());
    for (const char* k : kKeys) {
      check(t.removing(k) == (removing.count(k) > 0), "table and shadow disagree on removing");
      check(bool(t.fetch(k)) == fetching(k), "table and shadow disagree on fetching");
      if (t.fetch(k)) check(t.fetch(k)->cancelled == (cancelled.count(k) > 0), "cancelled disagrees");
    }
    check(t.fetching_count() <= 4 && map.size() <= map.capacity(), "sizes");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Shadow s;
  for (size_t i = 0; i + 1 < size && i < 2 * 512; i += 2) {
    s.step(data[i] % kNumOps, data[i + 1]);
    s.invariants();
  }
  return 0;
}
