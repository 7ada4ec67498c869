// Carrying out the coordinator's actions (coordinator/actions.h) that both of its shells meet:
// write_cached.cc (one write to a cached key) and resolver.cc (undelivered decisions). The
// decisions are made in src/coordinator/; these only do the I/O and log what failed.
#pragma once

#include "cached_keys.h"
#include "coordinator/actions.h"
#include "propagator.h"
#include "store.h"

namespace exo::db {

// Act::kStoreWrite: the batch with its durability. A failure is logged (at warn, naming
// a.what) and returned.
StoreResult carry_out_store_write(KvStore& store, const Action& a);

// Act::kUnmark, under the key's stripe lock: memory always, disk unsynced (marks.h).
void carry_out_unmark(KvStore& store, CachedKeys::Guard& guard, const Action& a);

// Act::kSendCommit or Act::kSendAbort.
FinishOutcome carry_out_finish(Propagator& propagator, const Action& a);

}  // namespace exo::db
