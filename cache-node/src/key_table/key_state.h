// The per-key state the key table keeps beside the map (key_table.h has the state machine).
#pragma once

#include <cstdint>
#include <optional>

#include "key_table/prepared_write.h"

namespace exo::cache {

// A key's state, as one name (KeyTable::state). The first that applies:
enum class KeyState : uint8_t {
  kFetching,        // a FETCH is in flight; a write prepared or committed meanwhile waits with it
  kFetchCancelled,  // a FETCH in flight that will insert nothing: an Evict or Reset came
  kRetiring,        // selected out by the filler, rule removal not sent yet; entry still served
  kRemoving,        // its rule removal and EVICT are in flight: not admitted again until done
  kPendingWrite,    // in the map with a prepared write: its GETs are forwarded to the db node
  kHeld,            // in the map, served
  kAbsent,          // none of the above
};

inline const char* name(KeyState s) {
  switch (s) {
    case KeyState::kFetching: return "fetching";
    case KeyState::kFetchCancelled: return "fetch-cancelled";
    case KeyState::kRetiring: return "retiring";
    case KeyState::kRemoving: return "removing";
    case KeyState::kPendingWrite: return "pending-write";
    case KeyState::kHeld: return "held";
    case KeyState::kAbsent: return "absent";
  }
  return "?";
}

// Where the key's switch rule is on its way out. One at a time: a key whose removal is in flight
// is not retired again (a committed DELETE of it needs nothing more).
enum class RulePhase : uint8_t { kNone, kRetiring, kRemoving };

// A FETCH in flight (between "decided to fetch" and its reply being inserted). A key being
// fetched has no map entry, so Prepare/Commit/Abort for it land here, and the insert uses the
// committed outcome instead of the fetched value, which may be older.
struct Fetch {
  bool cancelled = false;  // an Evict or Reset came: insert nothing, whatever follows
  std::optional<PreparedWrite> prepared;   // re-applied as pending on the new entry
  std::optional<PreparedWrite> committed;  // wins over the fetched value (is_delete: no insert)
};

}  // namespace exo::cache
