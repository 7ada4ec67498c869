// A small, fast, seedable PRNG for the load generator: xoshiro256** (D. Blackman and S. Vigna,
// "Scrambled linear pseudorandom number generators", ACM TOMS 2021), seeded through splitmix64
// (G. Steele, D. Lea and C. Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014) so that any 64-bit seed, including 0, gives a well-mixed state.
//
// Why not std::mt19937_64: 2.5 KB of state per generator thread and slower; the samplers accept
// either (any URBG whose range is the full 64 bits).
#pragma once

#include <cstdint>
#include <limits>

namespace exo::loadgen {

// One step of splitmix64; also handy to derive per-thread seeds from one run seed.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Xoshiro256ss {
 public:
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<uint64_t>::max(); }

  explicit Xoshiro256ss(uint64_t seed) {
    for (auto& word : s_) word = splitmix64(seed);  // never all zero: splitmix64 is a bijection
  }

  result_type operator()() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// A double uniform in [0, 1) from the top 53 bits of a full-range 64-bit URBG.
// (std::generate_canonical is slower and, in some standard libraries, can return 1.0.)
template <class URBG>
double uniform01(URBG& g) {
  static_assert(URBG::min() == 0 && URBG::max() == std::numeric_limits<uint64_t>::max(),
                "needs a URBG producing full-range 64-bit words (e.g. std::mt19937_64)");
  return static_cast<double>(g() >> 11) * 0x1.0p-53;
}

}  // namespace exo::loadgen
