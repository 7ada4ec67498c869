// RocksStore against a real RocksDB (TransactionDB) in a temp dir.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <fstream>
#include <map>

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

std::map<std::string, std::string> scan_all(KvStore& s, Cf cf) {
  std::map<std::string, std::string> m;
  EXPECT_TRUE(
      s.scan(cf, [&](std::string_view k, std::string_view v) { m[std::string(k)] = v; }).ok());
  return m;
}

TEST(RocksStore, ColumnFamiliesAreSeparateAndABatchSpansThem) {
  TempDir dir;
  std::string err;
  auto s = RocksStore::open(dir.path / "db", false, &err);
  ASSERT_TRUE(s) << err;
  // bytes_of (a view of the literal), not B (a view of a temporary string): the ops outlive
  // the full expression.
  const StoreOp ops[] = {StoreOp::put(Cf::kData, bytes_of("k"), bytes_of("data")),
                         StoreOp::put(Cf::kCached, bytes_of("k"), bytes_of("cache0")),
                         StoreOp::put(Cf::kRequests, bytes_of("r2"), bytes_of("x")),
                         StoreOp::put(Cf::kRequests, bytes_of("r1"), bytes_of("y")),
                         StoreOp::put(Cf::kTxlog, bytes_of("t"), bytes_of("z"))};
  ASSERT_TRUE(s->write(ops).ok());
  std::string v;
  ASSERT_TRUE(s->get(B("k"), &v).ok());
  EXPECT_EQ(v, "data");
  EXPECT_EQ(s->get(B("r1"), &v).code, StoreResult::kNotFound);  // get reads client data only
  EXPECT_EQ(scan_all(*s, Cf::kCached), (std::map<std::string, std::string>{{"k", "cache0"}}));
  EXPECT_EQ(scan_all(*s, Cf::kRequests),
            (std::map<std::string, std::string>{{"r1", "y"}, {"r2", "x"}}));
  EXPECT_EQ(scan_all(*s, Cf::kTxlog), (std::map<std::string, std::string>{{"t", "z"}}));
  const StoreOp del[] = {StoreOp::del(Cf::kRequests, bytes_of("r1")),
                         StoreOp::del(Cf::kTxlog, bytes_of("t"))};
  ASSERT_TRUE(s->write(del, Durability::kRelaxed).ok());
  EXPECT_EQ(scan_all(*s, Cf::kRequests).size(), 1u);
  EXPECT_TRUE(scan_all(*s, Cf::kTxlog).empty());
}

TEST(RocksStore, ATransactionIsInvisibleUntilCommitAndRollbackDropsIt) {
  TempDir dir;
  std::string err;
  auto s = RocksStore::open(dir.path / "db", true, &err);
  ASSERT_TRUE(s) << err;
  ASSERT_TRUE(s->put(B("k"), B("old")).ok());
  StoreResult e;
  {
    auto t = s->begin(1, &e);
    ASSERT_TRUE(t) << e.error;
    ASSERT_TRUE(t->put(Cf::kData, B("k"), B("new")).ok());
    ASSERT_TRUE(t->put(Cf::kTxlog, B("t1"), B("x")).ok());
    ASSERT_TRUE(t->prepare().ok());
    std::string v;
    ASSERT_TRUE(s->get(B("k"), &v).ok());
    EXPECT_EQ(v, "old");  // prepared, not visible
    EXPECT_TRUE(scan_all(*s, Cf::kTxlog).empty());
    ASSERT_TRUE(t->commit().ok());
    ASSERT_TRUE(s->get(B("k"), &v).ok());
    EXPECT_EQ(v, "new");
    EXPECT_EQ(scan_all(*s, Cf::kTxlog).size(), 1u);  // all of it at once
  }
  {
    auto t = s->begin(2, &e);
    ASSERT_TRUE(t) << e.error;
    ASSERT_TRUE(t->del(Cf::kData, B("k")).ok());
    ASSERT_TRUE(t->prepare().ok());
    ASSERT_TRUE(t->rollback().ok());
    std::string v;
    ASSERT_TRUE(s->get(B("k"), &v).ok());
    EXPECT_EQ(v, "new");
  }
  std::vector<PreparedTxn> prepared;
  ASSERT_TRUE(s->prepared_txns(&prepared).ok());
  EXPECT_TRUE(prepared.empty());
  EXPECT_FALSE(s->rollback_prepared(99).ok());
}

TEST(RocksStore, TransactionNamesMustBeUnique) {
  TempDir dir;
  std::string err;
  auto s = RocksStore::open(dir.path / "db", false, &err);
  ASSERT_TRUE(s) << err;
  StoreResult e;
  auto a = s->begin(5, &e);
  ASSERT_TRUE(a) << e.error;
  auto b = s->begin(5, &e);
  EXPECT_FALSE(b);
  EXPECT_EQ(e.code, StoreResult::kError);
}

TEST(RocksStore, ADataDirFromBeforeTheColumnFamiliesOpens) {
  TempDir dir;
  const std::string path = (dir.path / "db").string();
  {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, path, &raw).ok());
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "k", "v").ok());
    ASSERT_TRUE(raw->Close().ok());
    delete raw;
  }
  std::string err;
  auto s = RocksStore::open(path, false, &err);
  ASSERT_TRUE(s) << err;
  std::string v;
  ASSERT_TRUE(s->get(B("k"), &v).ok());
  EXPECT_EQ(v, "v");
  EXPECT_TRUE(scan_all(*s, Cf::kCached).empty());
}

}  // namespace
}  // namespace exo::db
