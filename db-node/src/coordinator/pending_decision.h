// A 2PC decision (Commit or Abort of a txid) that a cache node has not acknowledged yet: what
// the resolver delivers (decision_book.h, delivery.h) and what a txlog record stores on disk
// (records.h).
#pragma once

#include <cstdint>
#include <string>

#include "records.h"

namespace exo::db {

struct PendingDecision {
  uint64_t txid = 0;
  Decision decision = Decision::kAbort;
  std::string cache_node;
  std::string key;
};

}  // namespace exo::db
