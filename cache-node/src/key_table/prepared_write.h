// A prepared (two-phase) write and the one rule that decides every Prepare, Commit and Abort
// (thesis 3.4.2), wherever the write is kept: on a map entry (LruMap::Entry, where the data plane
// sees its `pending` flag) or with a FETCH in flight (KeyTable). Pure: no storage, no I/O.
#pragma once

#include <cstdint>
#include <string>

namespace exo::cache {

struct PreparedWrite {
  uint64_t txid = 0;
  bool is_delete = false;
  std::string value;  // the value to install on Commit (empty for a delete)
};

enum class TxCheck : uint8_t {
  kOk,            // apply the event
  kBusy,          // Prepare: a newer txid is prepared already
  kNoPending,     // Commit/Abort: nothing is prepared
  kTxidMismatch,  // Commit/Abort: another txid is prepared
};

// Prepare(txid) against the write prepared now (nullptr: none). A newer txid supersedes an older
// pending one: the owning db node resolves (delivers Commit/Abort for) a key's earlier
// transaction before it prepares a new one, so an older txid still pending here is one whose
// Prepare arrived late, after its Abort was answered "nothing pending". Refusing would make every
// later write of the key BUSY for good. An equal txid is a resent Prepare: it is applied again.
inline TxCheck check_prepare(const PreparedWrite* prepared, uint64_t txid) {
  return prepared && prepared->txid > txid ? TxCheck::kBusy : TxCheck::kOk;
}

// Commit(txid) or Abort(txid): only the prepared txid ends the pending state.
inline TxCheck check_finish(const PreparedWrite* prepared, uint64_t txid) {
  if (!prepared) return TxCheck::kNoPending;
  return prepared->txid == txid ? TxCheck::kOk : TxCheck::kTxidMismatch;
}

}  // namespace exo::cache
