#include "coordinator_shell.h"

#include "log.h"
#include "marks.h"

namespace exo::db {

StoreResult carry_out_store_write(KvStore& store, const Action& a) {
  const StoreResult r = store.write(a.store_ops(), a.durability);
  if (!r.ok())
    LOG_WARN("txid %llu: %s failed: %s", static_cast<unsigned long long>(a.txid), a.what,
             r.error.c_str());
  return r;
}

void carry_out_unmark(KvStore& store, CachedKeys::Guard& guard, const Action& a) {
  std::string err;
  unmark_held(store, guard, a.key, a.cache_node, &err);
  // Harmless: a stale mark on disk only costs the next write a Prepare answered cached=false.
  if (!err.empty()) LOG_WARN("unmarking a key on disk failed: %s", err.c_str());
}

FinishOutcome carry_out_finish(Propagator& propagator, const Action& a) {
  const Bytes key = bytes_of(a.key);
  const std::string node(a.cache_node);
  return a.kind == Act::kSendCommit ? propagator.commit(node, key, a.txid)
                                    : propagator.abort(node, key, a.txid);
}

}  // namespace exo::db
