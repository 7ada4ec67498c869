// RocksStore against a real RocksDB in a temp dir.
#include <gtest/gtest.h>

#include <fstream>

#include "store.h"
#include "test_util.h"

namespace exo::db {
namespace {

using testing::B;
using testing::TempDir;

TEST(RocksStore, PutGetDeleteNotFound) {
  TempDir dir;
  std::string err;
  auto s = RocksStore::open(dir.path / "db", true, &err);
  ASSERT_TRUE(s) << err;
  std::string v = "stale";
  EXPECT_EQ(s->get(B("a"), &v).code, StoreResult::kNotFound);
  EXPECT_EQ(v, "");
  ASSERT_TRUE(s->put(B("a"), B("1")).ok());
  ASSERT_TRUE(s->get(B("a"), &v).ok());
  EXPECT_EQ(v, "1");
  ASSERT_TRUE(s->put(B("a"), B("22")).ok());  // overwrite
  ASSERT_TRUE(s->get(B("a"), &v).ok());
  EXPECT_EQ(v, "22");
  ASSERT_TRUE(s->del(B("a")).ok());
  EXPECT_EQ(s->get(B("a"), &v).code, StoreResult::kNotFound);
  EXPECT_TRUE(s->del(B("never-written")).ok());  // deleting a missing key is OK
}

TEST(RocksStore, BinaryKeysAndValues) {
  TempDir dir;
  std::string err;
  auto s = RocksStore::open(dir.path / "db", false, &err);
  ASSERT_TRUE(s) << err;
  const std::string key("k\0\xff", 3), value("\0\0v\x80", 4), empty;
  ASSERT_TRUE(s->put(B(key), B(value)).ok());
  ASSERT_TRUE(s->put(B("e"), B(empty)).ok());
  std::string v;
  ASSERT_TRUE(s->get(B(key), &v).ok());
  EXPECT_EQ(v, value);
  EXPECT_EQ(s->get(B(std::string("k", 1)), &v).code, StoreResult::kNotFound);  // no prefix match
  ASSERT_TRUE(s->get(B("e"), &v).ok());  // an empty value is found, not missing
  EXPECT_EQ(v, "");
}

TEST(RocksStore, ReopenKeepsData) {
  TempDir dir;
  std::string err;
  for (bool sync : {true, false}) {
    const auto path = dir.path / (sync ? "sync" : "nosync");
    {
      auto s = RocksStore::open(path, sync, &err);
      ASSERT_TRUE(s) << err;
      EXPECT_EQ(s->sync_writes(), sync);
      ASSERT_TRUE(s->put(B("kept"), B("yes")).ok());
      ASSERT_TRUE(s->put(B("gone"), B("x")).ok());
      ASSERT_TRUE(s->del(B("gone")).ok());
      ASSERT_TRUE(s->close().ok());
    }
    auto s = RocksStore::open(path, sync, &err);
    ASSERT_TRUE(s) << err;
    std::string v;
    ASSERT_TRUE(s->get(B("kept"), &v).ok());
    EXPECT_EQ(v, "yes");
    EXPECT_EQ(s->get(B("gone"), &v).code, StoreResult::kNotFound);
  }
}

TEST(RocksStore, OpenCreatesParents) {
  TempDir dir;
  std::string err;
  auto s = RocksStore::open(dir.path / "a" / "b" / "db", true, &err);
  ASSERT_TRUE(s) << err;
  EXPECT_TRUE(std::filesystem::exists(dir.path / "a" / "b" / "db" / "CURRENT"));
}

TEST(RocksStore, OpenFailureIsReportedNotThrown) {
  TempDir dir;
  const auto file = dir.path / "plain-file";
  { std::ofstream(file) << "x"; }
  std::string err;
  auto s = RocksStore::open(file / "db", true, &err);  // parent is a regular file
  EXPECT_FALSE(s);
  EXPECT_NE(err.find("data_dir"), std::string::npos) << err;
}

TEST(RocksStore, SecondOpenOfSameDirFailsCleanly) {
  TempDir dir;
  std::string err;
  auto a = RocksStore::open(dir.path / "db", true, &err);
  ASSERT_TRUE(a) << err;
  auto b = RocksStore::open(dir.path / "db", true, &err);  // RocksDB's LOCK file
  EXPECT_FALSE(b);
  EXPECT_NE(err.find("RocksDB"), std::string::npos) << err;
}

}  // namespace
}  // namespace exo::db
