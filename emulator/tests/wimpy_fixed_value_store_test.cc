// FixedValueStore: the same value for every key, writes accepted and forgotten, no-op txns.
#include <gtest/gtest.h>

#include <string>

#include "fixed_value_store.h"
#include "wimpy_test_util.h"

namespace exo::emu {
namespace {

using db::Cf;
using db::StoreOp;
using db::StoreResult;
using testing::B;

TEST(FixedValueStore, EveryKeyGetsTheSameValueOfValueSize) {
  FixedValueStore s(512);
  std::string a, b = "old contents are replaced";
  ASSERT_TRUE(s.get(B("user:1"), &a).ok());
  ASSERT_TRUE(s.get(B("a-key-never-written"), &b).ok());
  EXPECT_EQ(a.size(), 512u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, s.value());
  EXPECT_EQ(a.substr(0, 12), "0123456789ab");

  FixedValueStore empty(0);
  std::string c = "x";
  ASSERT_TRUE(empty.get(B("k"), &c).ok());  // found, with an empty value
  EXPECT_TRUE(c.empty());
}

TEST(FixedValueStore, WritesAreAcceptedAndForgotten) {
  FixedValueStore s(16);
  ASSERT_TRUE(s.put(B("k"), B("a value that is never stored")).ok());
  const StoreOp ops[2] = {StoreOp::put(Cf::kRequests, B("id"), B("rec")),
                          StoreOp::del(Cf::kCached, B("k"))};
  ASSERT_TRUE(s.write(ops, db::Durability::kRelaxed).ok());
  std::string v;
  ASSERT_TRUE(s.get(B("k"), &v).ok());
  EXPECT_EQ(v, s.value());
  ASSERT_TRUE(s.del(B("k")).ok());
  ASSERT_TRUE(s.get(B("k"), &v).ok());  // deleting changes nothing either
  EXPECT_EQ(v.size(), 16u);
}

TEST(FixedValueStore, ScanFindsNothingAndNothingIsPrepared) {
  FixedValueStore s(8);
  ASSERT_TRUE(s.put(B("k"), B("v")).ok());
  for (Cf cf : {Cf::kData, Cf::kCached, Cf::kRequests, Cf::kTxlog}) {
    int visited = 0;
    ASSERT_TRUE(s.scan(cf, [&](std::string_view, std::string_view) { ++visited; }).ok());
    EXPECT_EQ(visited, 0);
  }
  std::vector<db::PreparedTxn> txns;
  ASSERT_TRUE(s.prepared_txns(&txns).ok());
  EXPECT_TRUE(txns.empty());
  EXPECT_TRUE(s.rollback_prepared(42).ok());
}

TEST(FixedValueStore, TransactionsDoNothingAndSucceed) {
  FixedValueStore s(8);
  StoreResult err;
  auto t = s.begin(7, &err);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->put(Cf::kData, B("k"), B("v")).ok());
  EXPECT_TRUE(t->del(Cf::kTxlog, B("x")).ok());
  EXPECT_TRUE(t->prepare().ok());
  EXPECT_TRUE(t->commit().ok());
  auto u = s.begin(8, &err);
  ASSERT_NE(u, nullptr);
  EXPECT_TRUE(u->rollback().ok());
  std::string v;
  ASSERT_TRUE(s.get(B("k"), &v).ok());
  EXPECT_EQ(v, s.value());
}

}  // namespace
}  // namespace exo::emu
