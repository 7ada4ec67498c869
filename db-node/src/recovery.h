// Start-up recovery of the db node's 2PC state (docs/two-phase-commit.md), run after the store
// is opened and before any packet thread, gRPC handler or resolver round touches it:
//
//  1. Transactions RocksDB found prepared in the WAL (the process died between Prepare() and
//     Commit()/Rollback()) were never acknowledged: each is rolled back, after a durable abort
//     record is written for the cache node it had (perhaps) prepared.
//  2. Every txlog record is a decision the cache node may not have received: Commit for
//     committed writes, Abort for abandoned ones. All go to the resolver. A record naming a
//     cache node that is no longer in the cluster config is dropped: no GET can reach it.
//  3. Marks (Cf::kCached) go back into CachedKeys, except for unknown cache nodes.
//  4. Dedup records go back into the DedupTable (expired ones too: the sweep deletes them).
#pragma once

#include <cstddef>

#include "cached_keys.h"
#include "cluster.h"
#include "dedup_table.h"
#include "resolver.h"
#include "store.h"

namespace exo::db {

struct RecoveryReport {
  size_t prepared_rolled_back = 0;  // step 1
  size_t commits_queued = 0;        // step 2
  size_t aborts_queued = 0;
  size_t txlog_dropped = 0;         // unknown cache node, unreadable, or superseded by a Commit
  size_t marks_loaded = 0;          // step 3
  size_t marks_dropped = 0;         // unknown cache node or unreadable
  size_t dedup_loaded = 0;          // step 4
  size_t dedup_dropped = 0;         // unreadable
};

// On a store error returns it (the node must not start: it could lose an Abort or a mark).
StoreResult recover(KvStore& store, const Cluster& cluster, CachedKeys& cached, DedupTable& dedup,
                    Resolver& resolver, RecoveryReport* report);

}  // namespace exo::db
