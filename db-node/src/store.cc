#include "store.h"

#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include <filesystem>
#include <system_error>

namespace exo::db {
namespace {

rocksdb::Slice slice(Bytes b) {
  return rocksdb::Slice(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace

std::unique_ptr<RocksStore> RocksStore::open(const std::string& dir, bool sync_writes,
                                             std::string* error) {
  // RocksDB creates only the last path component; create parents so a fresh run dir works.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create data_dir '" + dir + "': " + ec.message();
    return nullptr;
  }
  rocksdb::Options opts;
  opts.create_if_missing = true;
  // The WAL is on by default (WriteOptions::disableWAL = false); it is what makes an acked
  // write durable (see store.h). Background work: the node is small, two jobs are enough.
  opts.IncreaseParallelism(2);
  // Most GETs reaching a db node are for the long tail; a bloom filter makes misses cheap.
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  rocksdb::DB* db = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(opts, dir, &db);
  if (!s.ok()) {
    *error = "cannot open RocksDB in '" + dir + "': " + s.ToString();
    return nullptr;
  }
  return std::unique_ptr<RocksStore>(new RocksStore(db, sync_writes));
}

RocksStore::~RocksStore() { close(); }

StoreResult RocksStore::close() {
  if (!db_) return StoreResult::Ok();
  const rocksdb::Status s = db_->Close();
  delete db_;
  db_ = nullptr;
  if (!s.ok()) return StoreResult::Error("close: " + s.ToString());
  return StoreResult::Ok();
}

StoreResult RocksStore::get(Bytes key, std::string* value) {
  value->clear();
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), slice(key), value);
  if (s.ok()) return StoreResult::Ok();
  if (s.IsNotFound()) {
    value->clear();
    return StoreResult::NotFound();
  }
  return StoreResult::Error("get: " + s.ToString());
}

StoreResult RocksStore::put(Bytes key, Bytes value) {
  rocksdb::WriteOptions wo;
  wo.sync = sync_;  // true: fsync the WAL before acking (survives power loss); see store.h
  const rocksdb::Status s = db_->Put(wo, slice(key), slice(value));
  if (!s.ok()) return StoreResult::Error("put: " + s.ToString());
  return StoreResult::Ok();
}

StoreResult RocksStore::del(Bytes key) {
  rocksdb::WriteOptions wo;
  wo.sync = sync_;
  // RocksDB's Delete writes a tombstone and succeeds whether or not the key exists, which is
  // exactly the wire semantics (deleting a missing key is OK).
  const rocksdb::Status s = db_->Delete(wo, slice(key));
  if (!s.ok()) return StoreResult::Error("delete: " + s.ToString());
  return StoreResult::Ok();
}

}  // namespace exo::db
