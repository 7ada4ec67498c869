// The fault switch of the mutant test builds (docs/chaos.md, "Mutants").
//
// exo-db-node-mutant and exo-cache-node-mutant are built from the production sources with
// EXO_FAULTS defined (cmake/mutants.cmake). Only they have the --fault flag and the hooks, each
// fenced in `#ifdef EXO_FAULTS`; the production binaries contain neither (a test checks that
// they reject --fault and hold no fault name). A mutant exists to show that the chaos
// campaign's linearizability checker catches a broken two-phase commit: a known-bad system.
#pragma once

#ifndef EXO_FAULTS
#error "fault_switch.h belongs to the EXO_FAULTS test builds only"
#endif

#include <initializer_list>
#include <string>
#include <string_view>

namespace exo::fault {

// One name per hook. Each node's main() accepts only its own.
//   skip-prepare (db node, propagator.cc): a write to a key a cache node holds is committed
//     without Prepare or Commit reaching the cache node, which keeps serving the old value.
//   serve-stale (cache node, control_tx.cc): a Commit is carried out as an Abort (the prepared
//     write is dropped, the old value served again) while the db node is told it committed.
inline constexpr std::string_view kSkipPrepare = "skip-prepare";
inline constexpr std::string_view kServeStale = "serve-stale";
//   ack-at-head (db node, replication/chain_runtime.cc): at replication factor > 1 the head
//     answers a write OK before the rest of its chain has it (the forward is left to the
//     resolver's next round), so the tail can serve an older value after the acknowledgement.
inline constexpr std::string_view kAckAtHead = "ack-at-head";

// The fault this process runs with ("" = none). Set once by main() before any thread starts and
// never changed afterwards, so the hooks read it without a lock.
inline std::string& active_name() {
  static std::string name;
  return name;
}

inline bool active(std::string_view name) { return active_name() == name; }

// Selects `name` (from --fault) if it is one of `known`; else false and *error says which names
// this binary knows. An empty name selects no fault.
inline bool select(const std::string& name, std::initializer_list<std::string_view> known,
                   std::string* error) {
  std::string names;
  for (std::string_view k : known) {
    if (name == k || name.empty()) {
      active_name() = name;
      return true;
    }
    names += (names.empty() ? "" : ", ") + std::string(k);
  }
  *error = "--fault: unknown fault '" + name + "' (this build knows: " + names + ")";
  return false;
}

}  // namespace exo::fault
