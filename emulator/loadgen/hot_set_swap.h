// Popularity rank -> key id under a hot-set swap schedule (thesis 4.3, Figure 4.4: "every T
// seconds, swap the H hottest keys with H of the coldest"), and fixed-width key names.
//
// Keys are ids 0..n-1; ranks are 1..n as ZipfSampler draws them. Before any swap rank r is key
// r-1. Split the ranks into the hot block P0 = ranks 1..H and, from the cold end, blocks
// P_j = ranks n-jH+1 .. n-(j-1)H (j = 1, 2, ...), and call the keys initially at P_j block C_j.
// Swap s exchanges what P0 holds with what P_s holds, reversed, so the hottest key becomes the
// coldest of its block (as in harness/exo_harness/keyspace.py's HotSetSwap, whose first swap this matches).
// After s swaps:
//   P0  holds C_s reversed        (every hot set is a block never hot before),
//   P1  holds C_0 reversed        (the original hot keys, sunk to the coldest ranks),
//   P_j holds C_{j-1} in order    for 2 <= j <= s (reversed twice),
//   every other rank is unmoved.
// So a lookup is O(1) arithmetic with no table, and each state is a bijection on 0..n-1.
// The cold blocks run out after max_swaps() = n/H - 1 swaps; choose n, H and T so that a run
// needs fewer (e.g. n = 10^8, H = 10^4 allows 9,999 swaps).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace exo::loadgen {

class HotSetSwap {
 public:
  // n >= 1 keys; hot set size H with 2H <= n (H = 0: never swap); period_ns = T (0: never swap).
  HotSetSwap(uint64_t n, uint64_t hot, uint64_t period_ns = 0)
      : n_(n), hot_(hot), period_ns_(period_ns) {
    if (n == 0) throw std::invalid_argument("HotSetSwap: n must be >= 1");
    if (hot > n / 2) throw std::invalid_argument("HotSetSwap: hot set larger than n/2");
  }

  uint64_t n() const { return n_; }
  uint64_t hot() const { return hot_; }
  uint64_t max_swaps() const { return hot_ == 0 ? 0 : n_ / hot_ - 1; }

  // Swaps done by elapsed_ns into the run: floor(elapsed / T), held at max_swaps() once the cold
  // blocks are used up (the last hot set then stays hot).
  uint64_t swaps_at(uint64_t elapsed_ns) const {
    if (period_ns_ == 0 || hot_ == 0) return 0;
    const uint64_t s = elapsed_ns / period_ns_;
    return s < max_swaps() ? s : max_swaps();
  }

  // Key id (0..n-1) of popularity rank (1..n) after `swaps` swaps (<= max_swaps()).
  uint64_t key_for_rank(uint64_t rank, uint64_t swaps) const {
    if (rank < 1 || rank > n_) throw std::out_of_range("HotSetSwap: rank outside 1..n");
    if (swaps > max_swaps()) throw std::out_of_range("HotSetSwap: more swaps than cold blocks");
    const uint64_t r = rank - 1;  // 0-based position
    if (swaps == 0) return r;
    if (r < hot_) return cold_start(swaps) + (hot_ - 1 - r);
    const uint64_t from_end = n_ - 1 - r;  // 0 for the coldest rank
    const uint64_t j = from_end / hot_ + 1;  // which cold block P_j the rank is in
    if (j > swaps) return r;
    const uint64_t offset = r - cold_start(j);  // position inside P_j
    if (j == 1) return hot_ - 1 - offset;
    return cold_start(j - 1) + offset;
  }

 private:
  // First key id of cold block C_j (j >= 1).
  uint64_t cold_start(uint64_t j) const { return n_ - j * hot_; }

  uint64_t n_;
  uint64_t hot_;
  uint64_t period_ns_;
};

// The thesis's fixed-width keys (16 bytes): "key:" and the id in zero-padded decimal, e.g.
// key_name(42) = "key:000000000042". Deterministic, distinct per id, readable in packet dumps,
// and the same prefix as client-lib's key_name (which does not pad). Ids must fit in
// width - 4 digits (10^12 keys at width 16).
inline std::string key_name(uint64_t id, size_t width = 16) {
  static constexpr char kPrefix[] = "key:";
  constexpr size_t prefix_len = sizeof(kPrefix) - 1;
  if (width <= prefix_len) throw std::invalid_argument("key_name: width too small");
  std::string out(width, '0');
  out.replace(0, prefix_len, kPrefix);
  for (size_t pos = width; id != 0; id /= 10) {
    if (pos == prefix_len) throw std::out_of_range("key_name: id does not fit in width");
    out[--pos] = static_cast<char>('0' + id % 10);
  }
  return out;
}

}  // namespace exo::loadgen
