// exo_select_keys (src/fill/selector_capi.cc, what the Python simulator loads with ctypes)
// returns exactly what select_keys returns: same admissions and evictions, in the same order,
// and the same threshold, on random inputs (unsorted and duplicate candidates, skip sets).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fill/selector.h"

extern "C" int exo_selector_capi_version();
extern "C" int exo_select_keys(const char*, const uint32_t*, const double*, size_t, const char*,
                               const uint32_t*, const double*, size_t, const char*,
                               const uint32_t*, size_t, size_t, double, double, int64_t*,
                               size_t*, int64_t*, size_t*, double*);

namespace {

using exo::KeyRate;
using namespace exo::cache;

struct Packed {
  std::string buf;
  std::vector<uint32_t> lens;
  std::vector<double> rates;
};

Packed pack(const std::vector<KeyRate>& v) {
  Packed p;
  for (const auto& kr : v) {
    p.buf += kr.key;
    p.lens.push_back(static_cast<uint32_t>(kr.key.size()));
    p.rates.push_back(kr.rate);
  }
  return p;
}

Selection via_capi(const SelectInput& in) {
  const Packed c = pack(in.candidates), h = pack(in.held);
  std::vector<KeyRate> skip_v;
  for (const auto& k : in.skip) skip_v.push_back({k, 0});
  const Packed s = pack(skip_v);
  std::vector<int64_t> admit(in.candidates.size() + 1), evict(in.held.size() + in.candidates.size() + 1);
  size_t na = 0, ne = 0;
  double threshold = -1;
  EXPECT_EQ(exo_select_keys(c.buf.data(), c.lens.data(), c.rates.data(), c.lens.size(),
                            h.buf.data(), h.lens.data(), h.rates.data(), h.lens.size(),
                            s.buf.data(), s.lens.data(), s.lens.size(), in.capacity, in.min_rate,
                            in.hysteresis, admit.data(), &na, evict.data(), &ne, &threshold),
            0);
  Selection out;
  for (size_t i = 0; i < na; ++i) out.admit.push_back(in.candidates.at(admit[i]));
  for (size_t i = 0; i < ne; ++i) {
    const auto j = static_cast<size_t>(evict[i]);
    out.evict.push_back(j < in.held.size() ? in.held.at(j) : in.candidates.at(j - in.held.size()));
  }
  out.threshold = threshold;
  return out;
}

TEST(SelectorCapi, Version) { EXPECT_EQ(exo_selector_capi_version(), 1); }

TEST(SelectorCapi, MatchesSelectKeysOnRandomInputs) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> rate(0, 100);
  for (int round = 0; round < 2000; ++round) {
    SelectInput in;
    in.capacity = rng() % 10;
    in.min_rate = (rng() % 3) * 2.5;
    in.hysteresis = (rng() % 3) * 0.15;
    const size_t nheld = rng() % 10, ncand = rng() % 16;
    for (size_t i = 0; i < nheld; ++i) in.held.push_back({"h" + std::to_string(i), rate(rng)});
    for (size_t i = 0; i < ncand; ++i)  // a small key space: duplicates and held keys occur
      in.candidates.push_back({(rng() % 4 ? "c" : "h") + std::to_string(rng() % 12), rate(rng)});
    if (rng() % 4)  // usually sorted hottest first, as the filler passes them
      std::sort(in.candidates.begin(), in.candidates.end(),
                [](const KeyRate& a, const KeyRate& b) { return a.rate > b.rate; });
    if (!in.candidates.empty() && rng() % 2) in.skip.insert(in.candidates[rng() % ncand].key);
    const Selection want = select_keys(in);
    const Selection got = via_capi(in);
    ASSERT_EQ(got.admit, want.admit) << "round " << round;
    ASSERT_EQ(got.evict, want.evict) << "round " << round;
    ASSERT_EQ(got.threshold, want.threshold) << "round " << round;
  }
}

TEST(SelectorCapi, NullArraysWithDataAreRefused) {
  size_t na = 0, ne = 0;
  double t = 0;
  int64_t ev[1];
  const double r = 1;
  EXPECT_EQ(exo_select_keys(nullptr, nullptr, &r, 1, nullptr, nullptr, nullptr, 0, nullptr,
                            nullptr, 0, 1, 0, 0, nullptr, &na, ev, &ne, &t),
            -1);
}

}  // namespace
