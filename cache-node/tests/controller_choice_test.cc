// controller_choice.h: which controller instance a cache node asks after a refusal.
#include "controller_choice.h"

#include <gtest/gtest.h>

namespace {

using exo::cache::controller_after;
const std::vector<exo::ControllerInstanceInfo> kThree = {{"c1", "a:1"}, {"c2", "a:2"}, {"c3", "a:3"}};

TEST(ControllerChoice, FollowsTheNamedMaster) {
  EXPECT_EQ(controller_after(kThree, 0, false, true, "not the master; the master is c3"), 2u);
  EXPECT_EQ(controller_after(kThree, 2, false, true, "not the master; the master is c1"), 0u);
}

TEST(ControllerChoice, NextOneWhenUnreachableOrNoMasterNamed) {
  EXPECT_EQ(controller_after(kThree, 0, true, false, "failed to connect"), 1u);
  EXPECT_EQ(controller_after(kThree, 2, true, false, ""), 0u);
  EXPECT_EQ(controller_after(kThree, 1, false, true, "not the master; the master is unknown (election)"), 2u);
  // A name that is only a prefix of the one given is not it ("c1" in "c10").
  EXPECT_EQ(controller_after(kThree, 1, false, true, "the master is c10"), 2u);
  // Naming itself (a stale answer) does not keep us there.
  EXPECT_EQ(controller_after(kThree, 1, false, true, "the master is c2"), 2u);
}

TEST(ControllerChoice, StaysOnOtherAnswersAndWithOneController) {
  EXPECT_EQ(controller_after(kThree, 1, false, false, "deadline"), 1u);
  const std::vector<exo::ControllerInstanceInfo> one = {{"controller", "unix:/x"}};
  EXPECT_EQ(controller_after(one, 0, true, false, ""), 0u);
}

}  // namespace
