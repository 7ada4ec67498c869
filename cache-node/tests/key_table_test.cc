// KeyTable: every state x event pair against a written transition table, then the cases the table
// cannot show (batches, LRU victims, several keys, Reset counting, the 2PC rule's corners).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "key_table/key_table.h"

namespace {

using namespace exo::cache;

constexpr size_t kMaxKv = 1400;

// One key's whole state in words, the table's notation:
//   [fetch|fetch-x [pT:V] [cT:V]] [retiring|removing] [held] [V [pT:V]] | "-" (no entry) | absent
//   fetch = a FETCH in flight, fetch-x = one that was cancelled; pT:V = a write prepared with
//   txid T and value V (del = a delete), cT:V = one committed while fetching; V = the entry's
//   value. "held" is written only when the key is in the map and nothing else.
std::string describe(KeyTable& t, LruMap& map, const std::string& k) {
  auto w = [](const PreparedWrite& p) {
    return std::to_string(p.txid) + ":" + (p.is_delete ? std::string("del") : p.value);
  };
  std::string s;
  const Fetch* f = t.fetch(k);
  if (f) {
    s = f->cancelled ? "fetch-x" : "fetch";
    if (f->prepared) s += " p" + w(*f->prepared);
    if (f->committed) s += " c" + w(*f->committed);
  }
  const LruMap::Entry* e = map.find(k);
  const RulePhase r = t.rule(k);
  if (r != RulePhase::kNone) {
    s += std::string(s.empty() ? "" : " ") + (r == RulePhase::kRetiring ? "retiring" : "removing");
    if (!f && !e) s += " -";
  }
  if (e) {
    if (s.empty()) s = "held";
    s += " " + e->value;
    if (e->pending) s += " p" + w(e->prepared);
  }
  return s.empty() ? "absent" : s;
}

std::string tx(const TxAnswer& a) {
  std::string s;
  if (a.applied) s = "ok";
  else if (a.ok && !a.cached) s = "uncached";
  else if (a.error == "another write is prepared for this key") s = "busy";
  else if (a.error == "no prepared write for this key") s = "no-pending";
  else if (a.error.rfind("txid mismatch: prepared ", 0) == 0) s = "mismatch";
  else s = "?" + a.error;
  EXPECT_EQ(a.applied, a.ok && a.cached);
  EXPECT_EQ(a.ok, a.error.empty());
  return a.retire ? s + " retire" : s;
}

std::string fetch_result(const InsertOutcome& o, const std::string& k) {
  auto has = [&](const Keys& ks) { return std::find(ks.begin(), ks.end(), k) != ks.end(); };
  std::string s;
  const std::vector<std::pair<const char*, const Keys*>> lists = {
      {"inserted", &o.inserted}, {"not_cached", &o.not_cached}, {"failed", &o.failed},
      {"cancelled", &o.cancelled}, {"evicted", &o.evicted}};
  for (const auto& [name, ks] : lists)
    if (has(*ks)) s += std::string(s.empty() ? "" : "+") + name;
  return s.empty() ? "nothing" : s;
}

struct World {
  LruMap map{4};
  KeyTable t{map};
  const std::string k = "k";

  std::string describe() { return ::describe(t, map, k); }
  void hold() {
    ASSERT_EQ(t.admit_for_cache(k), CacheAdmit::kFetch);
    t.fetched({k}, {{k, "v1"}}, {}, kMaxKv);
  }
  // Reaches a start state by events only (so every start state is one the node can be in).
  void setup(const std::string& s) {
    auto fetch = [&] { ASSERT_EQ(t.admit_for_cache(k), CacheAdmit::kFetch); };
    auto prep = [&](bool del) { ASSERT_TRUE(t.prepare(k, 5, del, del ? "" : "v2").applied); };
    auto commit = [&] { ASSERT_TRUE(t.commit(k, 5, true).applied); };
    auto retire = [&] { ASSERT_TRUE(t.mark_retiring(k)); };
    auto take = [&] { ASSERT_EQ(t.take_retiring(), Keys{k}); };
    const std::map<std::string, std::function<void()>> how = {
        {"absent", [] {}},
        {"fetch", fetch},
        {"fetch p5:v2", [&] { fetch(); prep(false); }},
        {"fetch c5:v2", [&] { fetch(); prep(false); commit(); }},
        {"fetch c5:del", [&] { fetch(); prep(true); commit(); }},
        {"fetch-x", [&] { fetch(); t.reset(); }},
        {"fetch-x removing", [&] { fetch(); t.evict(k); }},
        {"held v1", [&] { hold(); }},
        {"held v1 p5:v2", [&] { hold(); prep(false); }},
        {"held v1 p5:del", [&] { hold(); prep(true); }},
        {"retiring v1", [&] { hold(); retire(); }},
        {"retiring v1 p5:v2", [&] { hold(); prep(false); retire(); }},
        {"retiring -", [&] { hold(); retire(); prep(true); commit(); }},
        {"removing v1", [&] { hold(); retire(); take(); }},
        {"removing v1 p5:v2", [&] { hold(); prep(false); retire(); take(); }},
        {"removing v1 p5:del", [&] { hold(); prep(true); retire(); take(); }},
        {"removing -", [&] { hold(); retire(); take(); t.rules_removed({k}); }},
    };
    auto it = how.find(s);
    ASSERT_NE(it, how.end()) << "no setup for state '" << s << "'";
    it->second();
    ASSERT_EQ(describe(), s);
  }
  // Applies one event to "k" and says what the table answered.
  std::string apply(const std::string& ev) {
    auto admit = [](CacheAdmit a) {
      return a == CacheAdmit::kFetch ? "fetch" : a == CacheAdmit::kHeld ? "held" : "skip";
    };
    auto fill = [](FillAdmit a) {
      switch (a) {
        case FillAdmit::kFetch: return "fetch";
        case FillAdmit::kRetirementCancelled: return "uncancel";
        case FillAdmit::kNoRoom: return "noroom";
        case FillAdmit::kSkip: return "skip";
      }
      return "?";
    };
    if (ev == "cache") return admit(t.admit_for_cache(k));
    if (ev == "fill") return fill(t.admit_for_fill(k, true));
    if (ev == "fill-full") return fill(t.admit_for_fill(k, false));
    if (ev == "victim") return t.mark_retiring(k) ? "marked" : "-";
    if (ev == "take") return t.take_retiring() == Keys{k} ? "taken" : "-";
    if (ev == "removed") {
      const Retired r = t.rules_removed({k});
      if (r.gone.empty()) return r.erased ? "?" : "-";
      return r.erased ? "gone erased" : "gone";
    }
    if (ev == "done") {
      t.removal_done({k});
      return "-";
    }
    if (ev == "evict") return t.evict(k) ? "erased" : "skipped";
    if (ev == "drop") return t.drop_entry(k) ? "erased" : "skipped";
    if (ev == "reset") return "dropped " + std::to_string(t.reset());
    if (ev == "prep7") return tx(t.prepare(k, 7, false, "v3"));
    if (ev == "prep3") return tx(t.prepare(k, 3, false, "v0"));
    if (ev == "commit5") return tx(t.commit(k, 5, true));
    if (ev == "commit6") return tx(t.commit(k, 6, true));
    if (ev == "abort5") return tx(t.abort(k, 5));
    if (ev == "abort6") return tx(t.abort(k, 6));
    if (ev == "got") return fetch_result(t.fetched({k}, {{k, "db"}}, {}, kMaxKv), k);
    if (ev == "missing") return fetch_result(t.fetched({k}, {}, {}, kMaxKv), k);
    if (ev == "unreachable") return fetch_result(t.fetched({k}, {}, {k}, kMaxKv), k);
    ADD_FAILURE() << "unknown event " << ev;
    return "?";
  }
};

const std::vector<std::string> kStates = {
    "absent", "fetch", "fetch p5:v2", "fetch c5:v2", "fetch c5:del", "fetch-x", "fetch-x removing",
    "held v1", "held v1 p5:v2", "held v1 p5:del", "retiring v1", "retiring v1 p5:v2", "retiring -",
    "removing v1", "removing v1 p5:v2", "removing v1 p5:del", "removing -"};

// Events on key "k":
//   cache        Cache RPC admits it                 fill / fill-full  the filler admits it (room / none)
//   victim       the filler selects it out           take              the retire thread takes the retiring keys
//   removed      the switch confirmed its rule's removal (retire thread)
//   done         its EVICT is back                   evict             Evict RPC (rule already removed)
//   drop         DropEntries                         reset             Reset RPC
//   prep7/prep3  Prepare txid 7 "v3" / txid 3 "v0"   commit5/6 abort5/6  Commit/Abort with txid 5 / 6
//   got          its FETCH is back with "db"         missing / unreachable  not found / db node not reached
// Commit is called with retire_deleted (cache_fill enabled). Answers: admissions as CacheAdmit /
// FillAdmit (uncancel = kRetirementCancelled); 2PC: ok (applied), uncached (ok, cached=false),
// busy, no-pending, mismatch (refused), "retire" when a committed DELETE retired the key.
const char* const kTable = R"(
absent               | cache       | fetch                  | fetch
absent               | fill        | fetch                  | fetch
absent               | fill-full   | absent                 | noroom
absent               | victim      | absent                 | -
absent               | take        | absent                 | -
absent               | removed     | absent                 | -
absent               | done        | absent                 | -
absent               | evict       | removing -             | skipped
absent               | drop        | absent                 | skipped
absent               | reset       | absent                 | dropped 0
absent               | prep7       | absent                 | uncached
absent               | prep3       | absent                 | uncached
absent               | commit5     | absent                 | uncached
absent               | commit6     | absent                 | uncached
absent               | abort5      | absent                 | uncached
absent               | abort6      | absent                 | uncached
absent               | got         | absent                 | failed
absent               | missing     | absent                 | failed
absent               | unreachable | absent                 | failed

fetch                | cache       | fetch                  | skip
fetch                | fill        | fetch                  | skip
fetch                | fill-full   | fetch                  | noroom
fetch                | victim      | fetch                  | -
fetch                | take        | fetch                  | -
fetch                | removed     | fetch                  | -
fetch                | done        | fetch                  | -
fetch                | evict       | fetch-x removing       | skipped
fetch                | drop        | fetch                  | skipped
fetch                | reset       | fetch-x                | dropped 0
fetch                | prep7       | fetch p7:v3            | ok
fetch                | prep3       | fetch p3:v0            | ok
fetch                | commit5     | fetch                  | no-pending
fetch                | commit6     | fetch                  | no-pending
fetch                | abort5      | fetch                  | no-pending
fetch                | abort6      | fetch                  | no-pending
fetch                | got         | held db                | inserted
fetch                | missing     | absent                 | not_cached
fetch                | unreachable | absent                 | failed

fetch p5:v2          | cache       | fetch p5:v2            | skip
fetch p5:v2          | fill        | fetch p5:v2            | skip
fetch p5:v2          | fill-full   | fetch p5:v2            | noroom
fetch p5:v2          | victim      | fetch p5:v2            | -
fetch p5:v2          | take        | fetch p5:v2            | -
fetch p5:v2          | removed     | fetch p5:v2            | -
fetch p5:v2          | done        | fetch p5:v2            | -
fetch p5:v2          | evict       | fetch-x p5:v2 removing | skipped
fetch p5:v2          | drop        | fetch p5:v2            | skipped
fetch p5:v2          | reset       | fetch-x p5:v2          | dropped 0
fetch p5:v2          | prep7       | fetch p7:v3            | ok
fetch p5:v2          | prep3       | fetch p5:v2            | busy
fetch p5:v2          | commit5     | fetch c5:v2            | ok
fetch p5:v2          | commit6     | fetch p5:v2            | mismatch
fetch p5:v2          | abort5      | fetch                  | ok
fetch p5:v2          | abort6      | fetch p5:v2            | mismatch
fetch p5:v2          | got         | held db p5:v2          | inserted
fetch p5:v2          | missing     | absent                 | not_cached
fetch p5:v2          | unreachable | absent                 | failed

fetch c5:v2          | cache       | fetch c5:v2            | skip
fetch c5:v2          | fill        | fetch c5:v2            | skip
fetch c5:v2          | fill-full   | fetch c5:v2            | noroom
fetch c5:v2          | victim      | fetch c5:v2            | -
fetch c5:v2          | take        | fetch c5:v2            | -
fetch c5:v2          | removed     | fetch c5:v2            | -
fetch c5:v2          | done        | fetch c5:v2            | -
fetch c5:v2          | evict       | fetch-x c5:v2 removing | skipped
fetch c5:v2          | drop        | fetch c5:v2            | skipped
fetch c5:v2          | reset       | fetch-x c5:v2          | dropped 0
fetch c5:v2          | prep7       | fetch p7:v3 c5:v2      | ok
fetch c5:v2          | prep3       | fetch p3:v0 c5:v2      | ok
fetch c5:v2          | commit5     | fetch c5:v2            | no-pending
fetch c5:v2          | commit6     | fetch c5:v2            | no-pending
fetch c5:v2          | abort5      | fetch c5:v2            | no-pending
fetch c5:v2          | abort6      | fetch c5:v2            | no-pending
fetch c5:v2          | got         | held v2                | inserted
fetch c5:v2          | missing     | held v2                | inserted
fetch c5:v2          | unreachable | absent                 | failed

fetch c5:del         | cache       | fetch c5:del           | skip
fetch c5:del         | fill        | fetch c5:del           | skip
fetch c5:del         | fill-full   | fetch c5:del           | noroom
fetch c5:del         | victim      | fetch c5:del           | -
fetch c5:del         | take        | fetch c5:del           | -
fetch c5:del         | removed     | fetch c5:del           | -
fetch c5:del         | done        | fetch c5:del           | -
fetch c5:del         | evict       | fetch-x c5:del removing| skipped
fetch c5:del         | drop        | fetch c5:del           | skipped
fetch c5:del         | reset       | fetch-x c5:del         | dropped 0
fetch c5:del         | prep7       | fetch p7:v3 c5:del     | ok
fetch c5:del         | prep3       | fetch p3:v0 c5:del     | ok
fetch c5:del         | commit5     | fetch c5:del           | no-pending
fetch c5:del         | commit6     | fetch c5:del           | no-pending
fetch c5:del         | abort5      | fetch c5:del           | no-pending
fetch c5:del         | abort6      | fetch c5:del           | no-pending
fetch c5:del         | got         | absent                 | not_cached
fetch c5:del         | missing     | absent                 | not_cached
fetch c5:del         | unreachable | absent                 | failed

fetch-x              | cache       | fetch-x                | skip
fetch-x              | fill        | fetch-x                | skip
fetch-x              | fill-full   | fetch-x                | noroom
fetch-x              | victim      | fetch-x                | -
fetch-x              | take        | fetch-x                | -
fetch-x              | removed     | fetch-x                | -
fetch-x              | done        | fetch-x                | -
fetch-x              | evict       | fetch-x removing       | skipped
fetch-x              | drop        | fetch-x                | skipped
fetch-x              | reset       | fetch-x                | dropped 0
fetch-x              | prep7       | fetch-x p7:v3          | ok
fetch-x              | prep3       | fetch-x p3:v0          | ok
fetch-x              | commit5     | fetch-x                | no-pending
fetch-x              | commit6     | fetch-x                | no-pending
fetch-x              | abort5      | fetch-x                | no-pending
fetch-x              | abort6      | fetch-x                | no-pending
fetch-x              | got         | absent                 | cancelled
fetch-x              | missing     | absent                 | cancelled
fetch-x              | unreachable | absent                 | failed

fetch-x removing     | cache       | fetch-x removing       | skip
fetch-x removing     | fill        | fetch-x removing       | skip
fetch-x removing     | fill-full   | fetch-x removing       | noroom
fetch-x removing     | victim      | fetch-x removing       | -
fetch-x removing     | take        | fetch-x removing       | -
fetch-x removing     | removed     | fetch-x removing       | gone
fetch-x removing     | done        | fetch-x                | -
fetch-x removing     | evict       | fetch-x removing       | skipped
fetch-x removing     | drop        | fetch-x removing       | skipped
fetch-x removing     | reset       | fetch-x removing       | dropped 0
fetch-x removing     | prep7       | fetch-x p7:v3 removing | ok
fetch-x removing     | prep3       | fetch-x p3:v0 removing | ok
fetch-x removing     | commit5     | fetch-x removing       | no-pending
fetch-x removing     | commit6     | fetch-x removing       | no-pending
fetch-x removing     | abort5      | fetch-x removing       | no-pending
fetch-x removing     | abort6      | fetch-x removing       | no-pending
fetch-x removing     | got         | removing -             | cancelled
fetch-x removing     | missing     | removing -             | cancelled
fetch-x removing     | unreachable | removing -             | failed

held v1              | cache       | held v1                | held
held v1              | fill        | held v1                | skip
held v1              | fill-full   | held v1                | noroom
held v1              | victim      | retiring v1            | marked
held v1              | take        | held v1                | -
held v1              | removed     | held v1                | -
held v1              | done        | held v1                | -
held v1              | evict       | removing -             | erased
held v1              | drop        | absent                 | erased
held v1              | reset       | absent                 | dropped 1
held v1              | prep7       | held v1 p7:v3          | ok
held v1              | prep3       | held v1 p3:v0          | ok
held v1              | commit5     | held v1                | no-pending
held v1              | commit6     | held v1                | no-pending
held v1              | abort5      | held v1                | no-pending
held v1              | abort6      | held v1                | no-pending
held v1              | got         | held v1                | failed
held v1              | missing     | held v1                | failed
held v1              | unreachable | held v1                | failed

held v1 p5:v2        | cache       | held v1 p5:v2          | held
held v1 p5:v2        | fill        | held v1 p5:v2          | skip
held v1 p5:v2        | fill-full   | held v1 p5:v2          | noroom
held v1 p5:v2        | victim      | retiring v1 p5:v2      | marked
held v1 p5:v2        | take        | held v1 p5:v2          | -
held v1 p5:v2        | removed     | held v1 p5:v2          | -
held v1 p5:v2        | done        | held v1 p5:v2          | -
held v1 p5:v2        | evict       | removing -             | erased
held v1 p5:v2        | drop        | absent                 | erased
held v1 p5:v2        | reset       | absent                 | dropped 1
held v1 p5:v2        | prep7       | held v1 p7:v3          | ok
held v1 p5:v2        | prep3       | held v1 p5:v2          | busy
held v1 p5:v2        | commit5     | held v2                | ok
held v1 p5:v2        | commit6     | held v1 p5:v2          | mismatch
held v1 p5:v2        | abort5      | held v1                | ok
held v1 p5:v2        | abort6      | held v1 p5:v2          | mismatch
held v1 p5:v2        | got         | held v1 p5:v2          | failed
held v1 p5:v2        | missing     | held v1 p5:v2          | failed
held v1 p5:v2        | unreachable | held v1 p5:v2          | failed

held v1 p5:del       | cache       | held v1 p5:del         | held
held v1 p5:del       | fill        | held v1 p5:del         | skip
held v1 p5:del       | fill-full   | held v1 p5:del         | noroom
held v1 p5:del       | victim      | retiring v1 p5:del     | marked
held v1 p5:del       | take        | held v1 p5:del         | -
held v1 p5:del       | removed     | held v1 p5:del         | -
held v1 p5:del       | done        | held v1 p5:del         | -
held v1 p5:del       | evict       | removing -             | erased
held v1 p5:del       | drop        | absent                 | erased
held v1 p5:del       | reset       | absent                 | dropped 1
held v1 p5:del       | prep7       | held v1 p7:v3          | ok
held v1 p5:del       | prep3       | held v1 p5:del         | busy
held v1 p5:del       | commit5     | retiring -             | ok retire
held v1 p5:del       | commit6     | held v1 p5:del         | mismatch
held v1 p5:del       | abort5      | held v1                | ok
held v1 p5:del       | abort6      | held v1 p5:del         | mismatch
held v1 p5:del       | got         | held v1 p5:del         | failed
held v1 p5:del       | missing     | held v1 p5:del         | failed
held v1 p5:del       | unreachable | held v1 p5:del         | failed

retiring v1          | cache       | held v1                | held
retiring v1          | fill        | held v1                | uncancel
retiring v1          | fill-full   | held v1                | uncancel
retiring v1          | victim      | retiring v1            | -
retiring v1          | take        | removing v1            | taken
retiring v1          | removed     | retiring v1            | -
retiring v1          | done        | retiring v1            | -
retiring v1          | evict       | removing -             | erased
retiring v1          | drop        | retiring -             | erased
retiring v1          | reset       | absent                 | dropped 1
retiring v1          | prep7       | retiring v1 p7:v3      | ok
retiring v1          | prep3       | retiring v1 p3:v0      | ok
retiring v1          | commit5     | retiring v1            | no-pending
retiring v1          | commit6     | retiring v1            | no-pending
retiring v1          | abort5      | retiring v1            | no-pending
retiring v1          | abort6      | retiring v1            | no-pending
retiring v1          | got         | retiring v1            | failed
retiring v1          | missing     | retiring v1            | failed
retiring v1          | unreachable | retiring v1            | failed

retiring v1 p5:v2    | cache       | held v1 p5:v2          | held
retiring v1 p5:v2    | fill        | held v1 p5:v2          | uncancel
retiring v1 p5:v2    | fill-full   | held v1 p5:v2          | uncancel
retiring v1 p5:v2    | victim      | retiring v1 p5:v2      | -
retiring v1 p5:v2    | take        | removing v1 p5:v2      | taken
retiring v1 p5:v2    | removed     | retiring v1 p5:v2      | -
retiring v1 p5:v2    | done        | retiring v1 p5:v2      | -
retiring v1 p5:v2    | evict       | removing -             | erased
retiring v1 p5:v2    | drop        | retiring -             | erased
retiring v1 p5:v2    | reset       | absent                 | dropped 1
retiring v1 p5:v2    | prep7       | retiring v1 p7:v3      | ok
retiring v1 p5:v2    | prep3       | retiring v1 p5:v2      | busy
retiring v1 p5:v2    | commit5     | retiring v2            | ok
retiring v1 p5:v2    | commit6     | retiring v1 p5:v2      | mismatch
retiring v1 p5:v2    | abort5      | retiring v1            | ok
retiring v1 p5:v2    | abort6      | retiring v1 p5:v2      | mismatch
retiring v1 p5:v2    | got         | retiring v1 p5:v2      | failed
retiring v1 p5:v2    | missing     | retiring v1 p5:v2      | failed
retiring v1 p5:v2    | unreachable | retiring v1 p5:v2      | failed

retiring -           | cache       | fetch                  | fetch
retiring -           | fill        | absent                 | uncancel
retiring -           | fill-full   | absent                 | uncancel
retiring -           | victim      | retiring -             | -
retiring -           | take        | removing -             | taken
retiring -           | removed     | retiring -             | -
retiring -           | done        | retiring -             | -
retiring -           | evict       | removing -             | skipped
retiring -           | drop        | retiring -             | skipped
retiring -           | reset       | absent                 | dropped 0
retiring -           | prep7       | retiring -             | uncached
retiring -           | prep3       | retiring -             | uncached
retiring -           | commit5     | retiring -             | uncached
retiring -           | commit6     | retiring -             | uncached
retiring -           | abort5      | retiring -             | uncached
retiring -           | abort6      | retiring -             | uncached
retiring -           | got         | retiring -             | failed
retiring -           | missing     | retiring -             | failed
retiring -           | unreachable | retiring -             | failed

removing v1          | cache       | removing v1            | skip
removing v1          | fill        | removing v1            | skip
removing v1          | fill-full   | removing v1            | noroom
removing v1          | victim      | removing v1            | -
removing v1          | take        | removing v1            | -
removing v1          | removed     | removing -             | gone erased
removing v1          | done        | held v1                | -
removing v1          | evict       | removing -             | erased
removing v1          | drop        | removing -             | erased
removing v1          | reset       | removing -             | dropped 1
removing v1          | prep7       | removing v1 p7:v3      | ok
removing v1          | prep3       | removing v1 p3:v0      | ok
removing v1          | commit5     | removing v1            | no-pending
removing v1          | commit6     | removing v1            | no-pending
removing v1          | abort5      | removing v1            | no-pending
removing v1          | abort6      | removing v1            | no-pending
removing v1          | got         | removing v1            | failed
removing v1          | missing     | removing v1            | failed
removing v1          | unreachable | removing v1            | failed

removing v1 p5:v2    | cache       | removing v1 p5:v2      | skip
removing v1 p5:v2    | fill        | removing v1 p5:v2      | skip
removing v1 p5:v2    | fill-full   | removing v1 p5:v2      | noroom
removing v1 p5:v2    | victim      | removing v1 p5:v2      | -
removing v1 p5:v2    | take        | removing v1 p5:v2      | -
removing v1 p5:v2    | removed     | removing -             | gone erased
removing v1 p5:v2    | done        | held v1 p5:v2          | -
removing v1 p5:v2    | evict       | removing -             | erased
removing v1 p5:v2    | drop        | removing -             | erased
removing v1 p5:v2    | reset       | removing -             | dropped 1
removing v1 p5:v2    | prep7       | removing v1 p7:v3      | ok
removing v1 p5:v2    | prep3       | removing v1 p5:v2      | busy
removing v1 p5:v2    | commit5     | removing v2            | ok
removing v1 p5:v2    | commit6     | removing v1 p5:v2      | mismatch
removing v1 p5:v2    | abort5      | removing v1            | ok
removing v1 p5:v2    | abort6      | removing v1 p5:v2      | mismatch
removing v1 p5:v2    | got         | removing v1 p5:v2      | failed
removing v1 p5:v2    | missing     | removing v1 p5:v2      | failed
removing v1 p5:v2    | unreachable | removing v1 p5:v2      | failed

removing v1 p5:del   | cache       | removing v1 p5:del     | skip
removing v1 p5:del   | fill        | removing v1 p5:del     | skip
removing v1 p5:del   | fill-full   | removing v1 p5:del     | noroom
removing v1 p5:del   | victim      | removing v1 p5:del     | -
removing v1 p5:del   | take        | removing v1 p5:del     | -
removing v1 p5:del   | removed     | removing -             | gone erased
removing v1 p5:del   | done        | held v1 p5:del         | -
removing v1 p5:del   | evict       | removing -             | erased
removing v1 p5:del   | drop        | removing -             | erased
removing v1 p5:del   | reset       | removing -             | dropped 1
removing v1 p5:del   | prep7       | removing v1 p7:v3      | ok
removing v1 p5:del   | prep3       | removing v1 p5:del     | busy
removing v1 p5:del   | commit5     | removing -             | ok
removing v1 p5:del   | commit6     | removing v1 p5:del     | mismatch
removing v1 p5:del   | abort5      | removing v1            | ok
removing v1 p5:del   | abort6      | removing v1 p5:del     | mismatch
removing v1 p5:del   | got         | removing v1 p5:del     | failed
removing v1 p5:del   | missing     | removing v1 p5:del     | failed
removing v1 p5:del   | unreachable | removing v1 p5:del     | failed

removing -           | cache       | removing -             | skip
removing -           | fill        | removing -             | skip
removing -           | fill-full   | removing -             | noroom
removing -           | victim      | removing -             | -
removing -           | take        | removing -             | -
removing -           | removed     | removing -             | gone
removing -           | done        | absent                 | -
removing -           | evict       | removing -             | skipped
removing -           | drop        | removing -             | skipped
removing -           | reset       | removing -             | dropped 0
removing -           | prep7       | removing -             | uncached
removing -           | prep3       | removing -             | uncached
removing -           | commit5     | removing -             | uncached
removing -           | commit6     | removing -             | uncached
removing -           | abort5      | removing -             | uncached
removing -           | abort6      | removing -             | uncached
removing -           | got         | removing -             | failed
removing -           | missing     | removing -             | failed
removing -           | unreachable | removing -             | failed
)";

const std::vector<std::string> kEvents = {
    "cache", "fill", "fill-full", "victim", "take", "removed", "done", "evict", "drop", "reset",
    "prep7", "prep3", "commit5", "commit6", "abort5", "abort6", "got", "missing", "unreachable"};

struct Row {
  std::string from, event, to, action;
  int line;
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<Row> parse_table() {
  std::vector<Row> rows;
  std::istringstream in(kTable);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (trim(line).empty()) continue;
    std::vector<std::string> cols;
    std::istringstream ls(line);
    for (std::string c; std::getline(ls, c, '|');) cols.push_back(trim(c));
    EXPECT_EQ(cols.size(), 4u) << "table line " << n << ": " << line;
    if (cols.size() == 4) rows.push_back({cols[0], cols[1], cols[2], cols[3], n});
  }
  return rows;
}

// The table has exactly one row for every (state, event) pair, and names nothing else.
TEST(KeyTableTransitions, TableCoversEveryStateAndEventOnce) {
  std::map<std::pair<std::string, std::string>, int> seen;
  for (const Row& r : parse_table()) {
    EXPECT_NE(std::find(kStates.begin(), kStates.end(), r.from), kStates.end()) << r.from;
    EXPECT_NE(std::find(kEvents.begin(), kEvents.end(), r.event), kEvents.end()) << r.event;
    ++seen[{r.from, r.event}];
  }
  for (const auto& s : kStates)
    for (const auto& e : kEvents) EXPECT_EQ((seen[{s, e}]), 1) << "(" << s << ", " << e << ")";
  EXPECT_EQ(seen.size(), kStates.size() * kEvents.size());
}

TEST(KeyTableTransitions, EveryStateOnEveryEventAsTheTableSays) {
  for (const Row& r : parse_table()) {
    SCOPED_TRACE("table line " + std::to_string(r.line) + ": " + r.from + " | " + r.event);
    World w;
    w.setup(r.from);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(w.apply(r.event), r.action);
    EXPECT_EQ(w.describe(), r.to);
    EXPECT_EQ(w.t.check(), "");
  }
}

// The one-word state of each start state (KeyState: a FETCH first, then the rule, then the entry).
TEST(KeyTableTransitions, StateNames) {
  const std::map<std::string, std::string> want = {
      {"absent", "absent"},
      {"fetch", "fetching"},
      {"fetch p5:v2", "fetching"},
      {"fetch c5:v2", "fetching"},
      {"fetch c5:del", "fetching"},
      {"fetch-x", "fetch-cancelled"},
      {"fetch-x removing", "fetch-cancelled"},
      {"held v1", "held"},
      {"held v1 p5:v2", "pending-write"},
      {"held v1 p5:del", "pending-write"},
      {"retiring v1", "retiring"},
      {"retiring v1 p5:v2", "retiring"},
      {"retiring -", "retiring"},
      {"removing v1", "removing"},
      {"removing v1 p5:v2", "removing"},
      {"removing v1 p5:del", "removing"},
      {"removing -", "removing"},
  };
  ASSERT_EQ(want.size(), kStates.size());
  for (const auto& s : kStates) {
    World w;
    w.setup(s);
    EXPECT_EQ(name(w.t.state(w.k)), want.at(s)) << s;
  }
}

// ---- what one key's row cannot show ----

TEST(KeyTable, CommittedDeleteWithoutFillRetiresNothing) {
  World w;
  w.setup("held v1 p5:del");
  EXPECT_EQ(tx(w.t.commit(w.k, 5, /*retire_deleted=*/false)), "ok");
  EXPECT_EQ(w.describe(), "absent");
}

TEST(KeyTable, ErrorsNameTheTxids) {
  World w;
  w.setup("held v1 p5:v2");
  EXPECT_EQ(w.t.commit(w.k, 6, true).error, "txid mismatch: prepared 5, got 6");
  World f;
  f.setup("fetch p5:v2");
  EXPECT_EQ(f.t.abort(f.k, 9).error, "txid mismatch: prepared 5, got 9");
}

TEST(KeyTable, AResentPrepareOfTheSameTxidIsAppliedAgain) {
  World w;
  w.setup("held v1 p5:v2");
  EXPECT_EQ(tx(w.t.prepare(w.k, 5, false, "v2b")), "ok");
  EXPECT_EQ(w.describe(), "held v1 p5:v2b");
  EXPECT_EQ(w.map.pending_count(), 1u);
}

// A Prepare that arrived after its Abort (answered "nothing pending") leaves an orphan pending
// txid; the newer txid replaces it instead of making every later write BUSY.
TEST(KeyTable, NewerPrepareSupersedesAnOrphanedOlderOne) {
  World w;
  w.setup("held v1");
  EXPECT_EQ(tx(w.t.abort(w.k, 7)), "no-pending");
  EXPECT_EQ(tx(w.t.prepare(w.k, 7, false, "orphan")), "ok");
  EXPECT_EQ(tx(w.t.prepare(w.k, 9, false, "new")), "ok");
  EXPECT_EQ(w.map.pending_count(), 1u);
  EXPECT_EQ(tx(w.t.commit(w.k, 7, true)), "mismatch");
  EXPECT_EQ(tx(w.t.commit(w.k, 9, true)), "ok");
  EXPECT_EQ(w.describe(), "held new");
}

TEST(KeyTable, AFetchedValueTooBigForAReplyIsNotCached) {
  World w;
  ASSERT_EQ(w.t.admit_for_cache("big"), CacheAdmit::kFetch);
  const auto o = w.t.fetched({"big"}, {{"big", std::string(kMaxKv - 2, 'x')}}, {}, kMaxKv);
  EXPECT_EQ(o.not_cached, Keys{"big"});
  EXPECT_FALSE(w.t.held("big"));
  ASSERT_EQ(w.t.admit_for_cache("fits"), CacheAdmit::kFetch);
  EXPECT_EQ(w.t.fetched({"fits"}, {{"fits", std::string(kMaxKv - 4, 'x')}}, {}, kMaxKv).inserted,
            Keys{"fits"});
}

TEST(KeyTable, LruVictimsAreRemovingUntilTheInserterIsDone) {
  World w;  // map of 4
  Keys want = {"a", "b", "c", "d"};
  for (const auto& k : want) ASSERT_EQ(w.t.admit_for_cache(k), CacheAdmit::kFetch);
  std::vector<std::pair<std::string, std::string>> found;
  for (const auto& k : want) found.emplace_back(k, "v" + k);
  EXPECT_EQ(w.t.fetched(want, found, {}, kMaxKv).inserted, want);
  ASSERT_TRUE(w.t.mark_retiring("a"));
  ASSERT_TRUE(w.t.mark_retiring("b"));
  ASSERT_EQ(w.t.take_retiring().size(), 2u);  // a and b removing (the retire thread's)
  ASSERT_TRUE(w.t.mark_retiring("a") == false);
  ASSERT_TRUE(w.t.prepare("c", 3, false, "c3").applied);
  // Three more: a, b and c are pushed out (LRU order), whatever their state.
  Keys more = {"e", "f", "g"};
  for (const auto& k : more) ASSERT_EQ(w.t.admit_for_cache(k), CacheAdmit::kFetch);
  const auto o = w.t.fetched(more, {{"e", "ve"}, {"f", "vf"}, {"g", "vg"}}, {}, kMaxKv);
  EXPECT_EQ(o.inserted, more);
  EXPECT_EQ(o.evicted, (Keys{"a", "b", "c"}));
  EXPECT_EQ(w.map.pending_count(), 0u) << "c's pending write went with its entry";
  for (const auto& k : o.evicted) {
    EXPECT_EQ(name(w.t.state(k)), std::string("removing")) << k;
    EXPECT_EQ(w.t.admit_for_cache(k), CacheAdmit::kSkip) << k << " fetched before its EVICT";
    EXPECT_EQ(w.t.admit_for_fill(k, true), FillAdmit::kSkip) << k;
  }
  w.t.removal_done(o.evicted);
  for (const auto& k : o.evicted) EXPECT_EQ(name(w.t.state(k)), std::string("absent")) << k;
  EXPECT_EQ(w.t.check(), "");
}

TEST(KeyTable, ABatchLargerThanTheMapReportsItsOwnPushedOutKeys) {
  World w;  // map of 4
  Keys want = {"a", "b", "c", "d", "e", "f"};
  std::vector<std::pair<std::string, std::string>> found;
  for (const auto& k : want) {
    ASSERT_EQ(w.t.admit_for_cache(k), CacheAdmit::kFetch);
    found.emplace_back(k, "v");
  }
  const auto o = w.t.fetched(want, found, {}, kMaxKv);
  EXPECT_EQ(o.inserted, (Keys{"c", "d", "e", "f"}));
  EXPECT_EQ(o.evicted, (Keys{"a", "b"}));
  EXPECT_EQ(w.t.fetching_count(), 0u);
}

TEST(KeyTable, FetchedKeysWithoutARegisteredFetchChangeNothing) {
  World w;
  w.setup("held v1 p5:v2");
  const auto o = w.t.fetched({"k", "never"}, {{"k", "db"}, {"never", "x"}}, {}, kMaxKv);
  EXPECT_EQ(o.failed, (Keys{"k", "never"}));
  EXPECT_EQ(w.describe(), "held v1 p5:v2");
  EXPECT_FALSE(w.t.held("never"));
}

TEST(KeyTable, ResetCountsAndKeepsRemovalsInFlight) {
  World w;
  for (const auto& k : {"a", "b", "c"}) ASSERT_EQ(w.t.admit_for_cache(k), CacheAdmit::kFetch);
  w.t.fetched({"a", "b", "c"}, {{"a", "1"}, {"b", "2"}, {"c", "3"}}, {}, kMaxKv);
  ASSERT_TRUE(w.t.mark_retiring("a"));
  ASSERT_EQ(w.t.take_retiring(), Keys{"a"});
  ASSERT_TRUE(w.t.mark_retiring("b"));
  ASSERT_EQ(w.t.admit_for_cache("d"), CacheAdmit::kFetch);
  EXPECT_EQ(w.t.resets(), 0u);
  EXPECT_EQ(w.t.reset(), 3u);
  EXPECT_EQ(w.t.resets(), 1u);
  EXPECT_EQ(w.map.size(), 0u);
  EXPECT_EQ(w.t.retiring_count(), 0u);
  EXPECT_EQ(w.t.removing_count(), 1u);
  EXPECT_TRUE(w.t.removing("a"));
  EXPECT_EQ(w.t.fetching_count(), 1u);
  EXPECT_EQ(w.t.fetched({"d"}, {{"d", "4"}}, {}, kMaxKv).cancelled, Keys{"d"});
  EXPECT_EQ(w.t.check(), "");
}

TEST(KeyTable, FillViewSplitsRetiringByEntry) {
  World w;
  for (const auto& k : {"a", "b", "c"}) ASSERT_EQ(w.t.admit_for_cache(k), CacheAdmit::kFetch);
  w.t.fetched({"a", "b", "c"}, {{"a", "1"}, {"b", "2"}, {"c", "3"}}, {}, kMaxKv);
  ASSERT_TRUE(w.t.mark_retiring("a"));
  ASSERT_TRUE(w.t.mark_retiring("b"));
  ASSERT_TRUE(w.t.prepare("b", 1, true, "").applied);
  ASSERT_TRUE(w.t.commit("b", 1, true).applied);  // b: retiring without an entry
  ASSERT_TRUE(w.t.mark_retiring("c"));
  ASSERT_EQ(w.t.take_retiring().size(), 3u);  // all removing
  ASSERT_TRUE(w.t.mark_retiring("a") == false);
  w.t.removal_done({"a"});
  ASSERT_TRUE(w.t.mark_retiring("a"));
  ASSERT_EQ(w.t.admit_for_cache("f"), CacheAdmit::kFetch);
  const FillView v = w.t.fill_view();
  EXPECT_EQ(v.retiring_held, (std::unordered_set<std::string>{"a"}));
  EXPECT_EQ(v.busy, (std::unordered_set<std::string>{"b", "c", "f"}));
  EXPECT_EQ(w.t.room(), 4u - 2u);
}

}  // namespace
