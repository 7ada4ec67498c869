// What the cache node (the 2PC participant) answered, as the coordinator needs it. The
// propagator (propagator.h) turns CacheNode RPC results into these; the coordinator's state
// machines take them as events. See docs/two-phase-commit.md.
//
// Outcome of Prepare, from CacheNode.Prepare's TxReply:
//   RPC failed or reply.ok == false        -> kFailed:    roll back, Abort (the cache node may
//                                              have prepared after all), answer BUSY
//   reply.ok == true, reply.cached == false -> kNotCached: the cache node no longer holds the
//                                              key; commit locally, no Commit needed
//   reply.ok == true, reply.cached == true  -> kPrepared:  commit locally, then Commit
//
// Outcome of Commit/Abort (FinishOutcome): whether the cache node gave a definitive answer
// (nothing of this txid is left pending there) or the RPC failed (unknown: deliver it again
// later).
#pragma once

#include <cstdint>
#include <string>

namespace exo::db {

struct PrepareOutcome {
  enum Code : uint8_t { kPrepared, kNotCached, kFailed };
  Code code = kFailed;
  std::string error;  // set when kFailed
};

struct FinishOutcome {
  enum Code : uint8_t {
    kDone,         // ok, cached: the cache node applied (Commit) or dropped (Abort) the write
    kNotCached,    // ok, cached=false: it holds neither the key nor a Fetch of it
    kRefused,      // ok=false ("no prepared write for this key", "txid mismatch"): nothing of
                   // this txid is pending there, e.g. it restarted and fetched the key again
    kUnreachable,  // the RPC failed (deadline, connection): the outcome is unknown
  };
  Code code = kUnreachable;
  std::string error;  // set for kRefused and kUnreachable

  // The cache node has nothing of this transaction left pending: stop delivering it.
  bool definitive() const { return code != kUnreachable; }
};

}  // namespace exo::db
