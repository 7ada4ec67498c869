// The coordinator fuzz target's invariant checker (fuzz/coordinator_model.h) shown to reject a
// known-bad coordinator: this test is built with EXO_FAULTS, so CachedWrite carries the
// skip-prepare branch of the mutant db node (exo-db-node-mutant --fault skip-prepare), and runs
// the same inputs with the fault off (no invariant may break) and on (one must).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../fuzz/coordinator_model.h"
#include "fault_switch.h"

namespace exo::db {
namespace {

using model::BrokenInvariant;

class CoordinatorModel : public ::testing::Test {
 protected:
  void SetUp() override { model::throw_on_broken() = true; }
  void TearDown() override {
    model::throw_on_broken() = false;
    exo::fault::active_name().clear();
  }
  // The invariant the input breaks, or "" when it breaks none.
  static std::string broken_by(const std::vector<uint8_t>& input) {
    try {
      model::run(input.data(), input.size());
    } catch (const BrokenInvariant& b) {
      return b.invariant + ": " + b.detail;
    }
    return "";
  }
  // Random inputs from a fixed seed, so every run sees the same ones.
  static std::vector<std::vector<uint8_t>> inputs(size_t n) {
    std::mt19937 rng(20240611);
    std::vector<std::vector<uint8_t>> out(n);
    for (auto& in : out) {
      in.resize(8 + rng() % 56);
      for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
    }
    return out;
  }
};

// Step bytes (coordinator_model.h, step()): low 3 bits the step, bits 4-5 the key.
constexpr uint8_t kFetchA = 0x03, kPutA = 0x00, kRound = 0x02;

TEST_F(CoordinatorModel, TheShippedCoordinatorBreaksNoInvariant) {
  EXPECT_EQ(broken_by({kFetchA, kPutA, kRound, kPutA}), "");
  for (const auto& in : inputs(3000)) ASSERT_EQ(broken_by(in), "");
}

TEST_F(CoordinatorModel, SkipPrepareIsCaughtOnTheFirstWriteOfACachedKey) {
  exo::fault::active_name() = std::string(exo::fault::kSkipPrepare);
  const std::string b = broken_by({kFetchA, kPutA});
  EXPECT_EQ(b.substr(0, b.find(':')), "ack") << b;
}

TEST_F(CoordinatorModel, SkipPrepareIsCaughtByRandomInputs) {
  exo::fault::active_name() = std::string(exo::fault::kSkipPrepare);
  size_t caught = 0;
  for (const auto& in : inputs(3000))
    if (!broken_by(in).empty()) ++caught;
  EXPECT_GT(caught, 0u);
  std::printf("skip-prepare: %zu of 3000 random inputs break an invariant\n", caught);
}

}  // namespace
}  // namespace exo::db
