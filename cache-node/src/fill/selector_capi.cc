// A C ABI over exo::cache::select_keys (selector.h), so tools outside C++ run the cache node's
// own selection: the Python simulator (experiments/exo_sim/selector.py) loads the shared library
// exo_selector_capi with ctypes. Nothing here decides anything: it copies the arrays into a
// SelectInput, calls select_keys and maps the chosen keys back to indices of the input arrays.
//
// Keys are passed as one buffer of concatenated key bytes plus one length per key (key i starts
// at the sum of the lengths before it), so a numpy array of fixed-width keys passes as is.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "fill/selector.h"

#define EXO_CAPI extern "C" __attribute__((visibility("default")))

namespace {

std::vector<std::string> split(const char* buf, const uint32_t* lens, size_t n) {
  std::vector<std::string> out;
  out.reserve(n);
  size_t off = 0;
  for (size_t i = 0; i < n; ++i) {
    out.emplace_back(buf + off, lens[i]);
    off += lens[i];
  }
  return out;
}

}  // namespace

// Bumped when the signature below changes; the Python loader checks it.
EXO_CAPI int exo_selector_capi_version() { return 1; }

// Runs select_keys on (candidates, held, skip, capacity, min_rate, hysteresis); see selector.h.
//   admit_out (room for n_cand): indices into the candidates, hottest first (Selection::admit).
//   evict_out (room for n_held + n_cand): Selection::evict in its order; an index < n_held is a
//     held key, n_held + j is candidate j (only possible when candidates are not sorted hottest
//     first, so that a key admitted earlier in the round became a victim).
//   A key that appears more than once maps to its first index.
// Returns 0; -1 on a null pointer where data is needed (nothing written); -2 if out of memory.
EXO_CAPI int exo_select_keys(const char* cand_keys, const uint32_t* cand_lens,
                             const double* cand_rates, size_t n_cand,
                             const char* held_keys, const uint32_t* held_lens,
                             const double* held_rates, size_t n_held,
                             const char* skip_keys, const uint32_t* skip_lens, size_t n_skip,
                             size_t capacity, double min_rate, double hysteresis,
                             int64_t* admit_out, size_t* n_admit,
                             int64_t* evict_out, size_t* n_evict, double* threshold) {
  if ((n_cand && (!cand_keys || !cand_lens || !cand_rates || !admit_out)) ||
      (n_held && (!held_keys || !held_lens || !held_rates)) || (n_skip && (!skip_keys || !skip_lens)) || !n_admit ||
      !n_evict || !evict_out || !threshold)
    return -1;
  try {
    exo::cache::SelectInput in;
    in.capacity = capacity;
    in.min_rate = min_rate;
    in.hysteresis = hysteresis;
    in.candidates.reserve(n_cand);
    for (auto& k : split(cand_keys, cand_lens, n_cand)) in.candidates.push_back({std::move(k), 0});
    for (size_t i = 0; i < n_cand; ++i) in.candidates[i].rate = cand_rates[i];
    in.held.reserve(n_held);
    for (auto& k : split(held_keys, held_lens, n_held)) in.held.push_back({std::move(k), 0});
    for (size_t i = 0; i < n_held; ++i) in.held[i].rate = held_rates[i];
    for (auto& k : split(skip_keys, skip_lens, n_skip)) in.skip.insert(std::move(k));

    const exo::cache::Selection s = exo::cache::select_keys(in);

    // select_keys walks the candidates in order and admits a key at its first occurrence, so
    // one walk maps the admissions; a victim taken from the candidates (unsorted input) is rare.
    size_t a = 0, j = 0;
    for (const auto& kr : s.admit) {
      while (in.candidates[j].key != kr.key) ++j;
      admit_out[a++] = static_cast<int64_t>(j);
    }
    std::unordered_map<std::string, int64_t> cand_index;
    auto first_cand = [&](const std::string& key) {
      if (cand_index.empty())
        for (size_t i = n_cand; i-- > 0;) cand_index[in.candidates[i].key] = static_cast<int64_t>(i);
      return cand_index.at(key);
    };
    std::unordered_map<std::string, int64_t> held_index;
    if (!s.evict.empty())
      for (size_t i = n_held; i-- > 0;) held_index[in.held[i].key] = static_cast<int64_t>(i);
    size_t e = 0;
    for (const auto& kr : s.evict) {
      const auto h = held_index.find(kr.key);
      evict_out[e++] = h != held_index.end() ? h->second
                                             : static_cast<int64_t>(n_held) + first_cand(kr.key);
    }
    *n_admit = a;
    *n_evict = e;
    *threshold = s.threshold;
  } catch (...) {  // bad_alloc: no C++ exception may cross the C boundary
    return -2;
  }
  return 0;
}
