// Not a test: ns per Zipf sample at the evaluation's scale (n = 10^8, alpha = 0.99), to see
// whether one generator thread can outpace the cluster. Usage: zipf_bench [samples] [n] [alpha]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "loadgen/zipf.h"

int main(int argc, char** argv) {
  const uint64_t samples = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 50'000'000;
  const uint64_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 100'000'000;
  const double alpha = argc > 3 ? std::strtod(argv[3], nullptr) : 0.99;

  const exo::loadgen::ZipfSampler zipf(n, alpha);
  exo::loadgen::Xoshiro256ss rng(1);
  uint64_t checksum = 0;  // keeps the loop from being optimized away
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < samples; ++i) checksum += zipf(rng);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const double ns = std::chrono::duration<double, std::nano>(elapsed).count();
  std::printf("zipf n=%llu alpha=%.2f: %.1f ns/sample (%llu samples, checksum %llu)\n",
              static_cast<unsigned long long>(n), alpha, ns / static_cast<double>(samples),
              static_cast<unsigned long long>(samples), static_cast<unsigned long long>(checksum));
}
