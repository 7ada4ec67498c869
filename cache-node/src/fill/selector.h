// Selection (docs/cache-fill.md 2): which hot-list keys to admit and which held keys to evict.
// A pure function: no clock, no locks, no I/O, so it is tested exhaustively on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "key_rate.h"

namespace exo::cache {

struct SelectInput {
  std::vector<KeyRate> candidates;  // hot-list keys, hottest first (HotList::snapshot order)
  std::vector<KeyRate> held;        // keys the node holds and does not retire, with their rates
  size_t capacity = 0;              // at most this many held keys
  double min_rate = 0;
  double hysteresis = 0;            // a newcomer must beat its victim by this fraction
  std::unordered_set<std::string> skip;  // not admissible now (fetch or rule removal in flight)
  // Rule changes the admissions may cost at most: the node's share of the switch's rule budget
  // this round (filler.cc). An admission into free room costs 1 (its add), one that displaces a
  // victim 2 (the victim's delete too). The hottest candidates go first.
  size_t rule_budget = SIZE_MAX;
};

struct Selection {
  std::vector<KeyRate> admit;  // hottest first
  // Held keys below min_rate / (1 + hysteresis) first (in input order), then the victims of
  // admissions in the order they were chosen (coldest first).
  std::vector<KeyRate> evict;
  double threshold = 0;        // min_rate, or the rate of the last victim
  size_t rule_changes = 0;     // what the admissions cost: one per admission, one per its victim
};

Selection select_keys(const SelectInput& in);

}  // namespace exo::cache
