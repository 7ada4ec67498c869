#include "hot_keys/load_meter.h"

#include <gtest/gtest.h>

namespace exo::db {
namespace {

TEST(LoadMeter, FirstRateInitialisesThenEwma) {
  LoadMeter m(0.5);
  m.update(500, 10000);  // base only: no interval yet
  EXPECT_EQ(m.load(), 0.0);
  m.update(1500, 11000);  // 1000 req in 1 s: the first rate is taken as is
  EXPECT_DOUBLE_EQ(m.load(), 1000.0);
  m.update(2250, 11250);  // 750 req in 0.25 s = 3000/s: 0.5·3000 + 0.5·1000
  EXPECT_DOUBLE_EQ(m.load(), 2000.0);
  m.update(2250, 11500);  // idle: 0.5·0 + 0.5·2000
  EXPECT_DOUBLE_EQ(m.load(), 1000.0);
}

TEST(LoadMeter, AlphaWeighsTheNewestInterval) {
  LoadMeter m(0.25);
  m.update(0, 0);
  m.update(100, 1000);  // 100/s
  m.update(600, 2000);  // 500/s: 0.25·500 + 0.75·100 = 200
  EXPECT_DOUBLE_EQ(m.load(), 200.0);
}

TEST(LoadMeter, NoTimePassedOrCountersGoingBackIsNotARate) {
  LoadMeter m(0.5);
  m.update(0, 1000);
  m.update(100, 2000);
  EXPECT_DOUBLE_EQ(m.load(), 100.0);
  m.update(999, 2000);  // same instant: ignored
  EXPECT_DOUBLE_EQ(m.load(), 100.0);
  m.update(50, 3000);  // total went backwards: re-based, load kept
  EXPECT_DOUBLE_EQ(m.load(), 100.0);
  m.update(350, 4000);  // 300/s from the new base: 0.5·300 + 0.5·100
  EXPECT_DOUBLE_EQ(m.load(), 200.0);
}

}  // namespace
}  // namespace exo::db
