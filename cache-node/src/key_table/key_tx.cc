// Two-phase writes (thesis 3.4.2) in the key table: the owning db node is the coordinator.
//   Prepare: the key's write is prepared; a held key turns pending, so the data plane forwards
//            its GETs to the db node until the outcome.
//   Commit:  the prepared write is applied (new value; a DELETE erases the entry but keeps its
//            switch rule, so GETs miss here, are forwarded, and the db node answers NOT_FOUND).
//   Abort:   the prepared write is dropped, the old value kept.
// One path for both places a write can be prepared: a held key's map entry, or a FETCH in flight
// (whose insert then uses the committed outcome instead of a possibly older fetched value). The
// rule that decides (prepared_write.h) is the same for both; only where the write is kept differs.
#include "key_table/key_table.h"

namespace exo::cache {
namespace {

TxAnswer refused(std::string error) {
  TxAnswer a;
  a.ok = false;
  a.cached = true;
  a.error = std::move(error);
  return a;
}

TxAnswer applied() {
  TxAnswer a;
  a.cached = true;
  a.applied = true;
  return a;
}

}  // namespace

const PreparedWrite* KeyTable::Slot::prepared() const {
  if (entry) return entry->pending ? &entry->prepared : nullptr;
  return fetch && fetch->prepared ? &*fetch->prepared : nullptr;
}

KeyTable::Slot KeyTable::slot(const std::string& key) {
  Slot s;
  s.entry = map_.find(key);
  if (!s.entry)
    if (auto it = records_.find(key); it != records_.end() && it->second.fetch)
      s.fetch = &*it->second.fetch;
  return s;
}

TxAnswer KeyTable::prepare(const std::string& key, uint64_t txid, bool is_delete,
                           std::string_view value) {
  Slot s = slot(key);
  // Neither held nor being fetched: ok, not cached (the db node untracks the key).
  if (!s) return {};
  if (check_prepare(s.prepared(), txid) == TxCheck::kBusy)
    return refused("another write is prepared for this key");
  PreparedWrite w{txid, is_delete, std::string(value)};
  if (s.entry) map_.set_pending(*s.entry, std::move(w));
  else s.fetch->prepared = std::move(w);
  return applied();
}

TxAnswer KeyTable::commit(const std::string& key, uint64_t txid, bool retire_deleted) {
  return finish(key, txid, /*commit=*/true, retire_deleted);
}

TxAnswer KeyTable::abort(const std::string& key, uint64_t txid) {
  return finish(key, txid, /*commit=*/false, /*retire_deleted=*/false);
}

// Commit and Abort share the lookup, the txid check and the replies; they differ only in what
// happens to the prepared write.
TxAnswer KeyTable::finish(const std::string& key, uint64_t txid, bool commit, bool retire_deleted) {
  Slot s = slot(key);
  if (!s) return {};  // evicted since Prepare: nothing to update
  const PreparedWrite* p = s.prepared();
  switch (check_finish(p, txid)) {
    case TxCheck::kNoPending:
      return refused("no prepared write for this key");
    case TxCheck::kTxidMismatch:
      return refused("txid mismatch: prepared " + std::to_string(p->txid) + ", got " +
                     std::to_string(txid));
    default:
      break;
  }
  TxAnswer a = applied();
  if (s.fetch) {
    // The pending FETCH's insert will use this outcome instead of its value.
    if (commit) s.fetch->committed = std::move(s.fetch->prepared);
    s.fetch->prepared.reset();
    return a;
  }
  LruMap::Entry& e = *s.entry;
  if (!commit) {
    map_.clear_pending(e);
  } else if (e.prepared.is_delete) {
    map_.erase(key);
    // A committed DELETE took the entry; its rule is still on the switch. The retire thread
    // removes it (and EVICTs the key) like any victim's. A key already retiring or removing has
    // its removal under way.
    if (retire_deleted && rule(key) == RulePhase::kNone) {
      set_rule(key, RulePhase::kRetiring);
      a.retire = true;
    }
  } else {
    e.value.swap(e.prepared.value);
    map_.clear_pending(e);
  }
  return a;
}

}  // namespace exo::cache
