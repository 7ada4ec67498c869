#include "store.h"

#include "rocks_options.h"

#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/transaction.h>
#include <rocksdb/utilities/transaction_db.h>
#include <rocksdb/utilities/write_batch_with_index.h>
#include <rocksdb/write_batch.h>

#include <charconv>
#include <filesystem>
#include <system_error>

namespace exo::db {
namespace {

rocksdb::Slice slice(Bytes b) {
  return rocksdb::Slice(reinterpret_cast<const char*>(b.data()), b.size());
}

StoreResult from(const rocksdb::Status& s, const char* what) {
  if (s.ok()) return StoreResult::Ok();
  if (s.IsNotFound()) return StoreResult::NotFound();
  return StoreResult::Error(std::string(what) + ": " + s.ToString());
}

// Reads a prepared transaction's write batch back into RecoveredOps. Only the four column
// families exist, and the node never merges or range-deletes; anything else is reported so
// start-up does not silently drop an operation it does not understand.
class OpCollector final : public rocksdb::WriteBatch::Handler {
 public:
  OpCollector(const std::vector<rocksdb::ColumnFamilyHandle*>& cfs, std::vector<RecoveredOp>* out)
      : cfs_(cfs), out_(out) {}
  rocksdb::Status PutCF(uint32_t id, const rocksdb::Slice& k, const rocksdb::Slice& v) override {
    return add(id, false, k, v);
  }
  rocksdb::Status DeleteCF(uint32_t id, const rocksdb::Slice& k) override {
    return add(id, true, k, {});
  }
  rocksdb::Status SingleDeleteCF(uint32_t id, const rocksdb::Slice& k) override {
    return add(id, true, k, {});
  }
  // Markers delimit the prepared section in the WAL; they carry no data.
  rocksdb::Status MarkBeginPrepare(bool) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkEndPrepare(const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkNoop(bool) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkRollback(const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkCommit(const rocksdb::Slice&) override { return rocksdb::Status::OK(); }

 private:
  rocksdb::Status add(uint32_t id, bool is_delete, const rocksdb::Slice& k,
                      const rocksdb::Slice& v) {
    for (size_t i = 0; i < cfs_.size(); ++i) {
      if (cfs_[i]->GetID() != id) continue;
      out_->push_back(RecoveredOp{static_cast<Cf>(i), is_delete, k.ToString(), v.ToString()});
      return rocksdb::Status::OK();
    }
    return rocksdb::Status::Corruption("prepared transaction writes unknown column family " +
                                       std::to_string(id));
  }
  const std::vector<rocksdb::ColumnFamilyHandle*>& cfs_;
  std::vector<RecoveredOp>* out_;
};

class RocksTxn final : public StoreTxn {
 public:
  RocksTxn(rocksdb::Transaction* t, const std::vector<rocksdb::ColumnFamilyHandle*>& cfs)
      : t_(t), cfs_(cfs) {}
  // A prepared transaction deleted unfinished stays in the WAL (RocksDB only unlocks its keys
  // and forgets the object): the next open recovers it as prepared, as after a crash.
  ~RocksTxn() override = default;

  StoreResult put(Cf c, Bytes key, Bytes value) override {
    return from(t_->Put(cf(c), slice(key), slice(value)), "txn put");
  }
  StoreResult del(Cf c, Bytes key) override {
    return from(t_->Delete(cf(c), slice(key)), "txn delete");
  }
  StoreResult prepare() override { return from(t_->Prepare(), "txn prepare"); }
  StoreResult commit() override { return from(t_->Commit(), "txn commit"); }
  StoreResult rollback() override { return from(t_->Rollback(), "txn rollback"); }

 private:
  rocksdb::ColumnFamilyHandle* cf(Cf c) const { return cfs_[static_cast<size_t>(c)]; }
  std::unique_ptr<rocksdb::Transaction> t_;
  const std::vector<rocksdb::ColumnFamilyHandle*>& cfs_;
};

}  // namespace

const char* cf_name(Cf cf) {
  switch (cf) {
    case Cf::kData:
      return rocksdb::kDefaultColumnFamilyName.c_str();
    case Cf::kCached:
      return "cached";
    case Cf::kRequests:
      return "requests";
    case Cf::kTxlog:
      return "txlog";
  }
  return "?";
}

std::string txn_name(uint64_t txid) { return "tx" + std::to_string(txid); }

bool parse_txn_name(std::string_view name, uint64_t* txid) {
  if (name.size() < 3 || name.substr(0, 2) != "tx") return false;
  const char* end = name.data() + name.size();
  const auto [p, ec] = std::from_chars(name.data() + 2, end, *txid);
  return ec == std::errc() && p == end;
}

RocksOptions rocks_options() {
  RocksOptions o;
  rocksdb::DBOptions& dbo = o.db;
  dbo.create_if_missing = true;
  dbo.create_missing_column_families = true;  // a data dir from before the 2PC log gains them
  // Two-phase commit: Prepare() writes the transaction to the WAL under its name and WAL
  // replay at open brings back every transaction that was prepared but not committed or
  // rolled back (docs/two-phase-commit.md). The WAL is on by default
  // (WriteOptions::disableWAL = false); it is what makes an acked write durable (store.h).
  dbo.allow_2pc = true;
  // Background work: the node is small, two jobs are enough.
  dbo.IncreaseParallelism(2);

  // Most GETs reaching a db node are for the long tail; a bloom filter makes misses cheap.
  rocksdb::ColumnFamilyOptions data_opts;
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  data_opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  for (size_t i = 0; i < kNumCfs; ++i) {
    o.cfs.emplace_back(cf_name(static_cast<Cf>(i)),
                       i == 0 ? data_opts : rocksdb::ColumnFamilyOptions());
  }

  // o.txn stays default: WRITE_COMMITTED, so a transaction's writes reach the memtable only at
  // Commit() and readers never see a prepared value.
  return o;
}

std::unique_ptr<RocksStore> RocksStore::open(const std::string& dir, bool sync_writes,
                                             std::string* error) {
  // RocksDB creates only the last path component; create parents so a fresh run dir works.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create data_dir '" + dir + "': " + ec.message();
    return nullptr;
  }
  RocksOptions o = rocks_options();
  rocksdb::TransactionDB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  const rocksdb::Status s = rocksdb::TransactionDB::Open(o.db, o.txn, dir, o.cfs, &handles, &db);
  if (!s.ok()) {
    *error = "cannot open RocksDB in '" + dir + "': " + s.ToString();
    return nullptr;
  }
  return std::unique_ptr<RocksStore>(new RocksStore(db, std::move(handles), sync_writes));
}

RocksStore::~RocksStore() { close(); }

StoreResult RocksStore::close() {
  if (!db_) return StoreResult::Ok();
  StoreResult r;
  for (rocksdb::ColumnFamilyHandle* h : cfs_) {
    const rocksdb::Status s = db_->DestroyColumnFamilyHandle(h);
    if (!s.ok() && r.ok()) r = StoreResult::Error("close: " + s.ToString());
  }
  cfs_.clear();
  // Deleting the TransactionDB also deletes transactions still registered with it (recovered
  // prepared ones nobody rolled back); they stay prepared in the WAL for the next open.
  const rocksdb::Status s = db_->Close();
  delete db_;
  db_ = nullptr;
  if (!s.ok() && r.ok()) r = StoreResult::Error("close: " + s.ToString());
  return r;
}

StoreResult RocksStore::get(Bytes key, std::string* value) {
  value->clear();
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf(Cf::kData), slice(key), value);
  if (s.ok()) return StoreResult::Ok();
  value->clear();
  if (s.IsNotFound()) return StoreResult::NotFound();
  return StoreResult::Error("get: " + s.ToString());
}

void RocksStore::multi_get(std::span<const Bytes> keys, std::vector<std::string>* values,
                           std::vector<StoreResult>* results) {
  const size_t n = keys.size();
  std::vector<rocksdb::Slice> slices;
  slices.reserve(n);
  for (Bytes k : keys) slices.push_back(slice(k));
  std::vector<rocksdb::PinnableSlice> pinned(n);
  std::vector<rocksdb::Status> statuses(n);
  db_->MultiGet(rocksdb::ReadOptions(), cf(Cf::kData), n, slices.data(), pinned.data(),
                statuses.data());
  values->resize(n);
  results->resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& v = (*values)[i];
    const rocksdb::Status& s = statuses[i];
    if (s.ok()) {
      v.assign(pinned[i].data(), pinned[i].size());
      (*results)[i] = StoreResult::Ok();
    } else {
      v.clear();
      (*results)[i] = s.IsNotFound() ? StoreResult::NotFound()
                                     : StoreResult::Error("multi_get: " + s.ToString());
    }
  }
}

StoreResult RocksStore::flush() {
  rocksdb::FlushOptions fo;
  fo.wait = true;
  for (rocksdb::ColumnFamilyHandle* h : cfs_) {
    const rocksdb::Status s = db_->Flush(fo, h);
    if (!s.ok())
      return StoreResult::Error(std::string("flush ") + h->GetName() + ": " + s.ToString());
  }
  return StoreResult::Ok();
}

StoreResult RocksStore::compact() {
  StoreResult r = flush();
  if (!r.ok()) return r;
  rocksdb::CompactRangeOptions co;
  // Rewrite the last level too, so the result does not depend on what the background
  // compactions had done when the call came: one sorted run, same shape every time.
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  const rocksdb::Status s = db_->CompactRange(co, cf(Cf::kData), nullptr, nullptr);
  if (!s.ok()) return StoreResult::Error("compact: " + s.ToString());
  return StoreResult::Ok();
}

bool RocksStore::property(const std::string& name, std::string* value) {
  return db_->GetProperty(cf(Cf::kData), name, value);
}

StoreResult RocksStore::write(std::span<const StoreOp> ops, Durability d) {
  rocksdb::WriteBatch batch;
  for (const StoreOp& op : ops) {
    // RocksDB's Delete writes a tombstone and succeeds whether or not the key exists, which is
    // exactly the wire semantics (deleting a missing key is OK).
    const rocksdb::Status s = op.is_delete ? batch.Delete(cf(op.cf), slice(op.key))
                                           : batch.Put(cf(op.cf), slice(op.key), slice(op.value));
    if (!s.ok()) return StoreResult::Error("batch: " + s.ToString());
  }
  rocksdb::WriteOptions wo;
  wo.sync = d == Durability::kAsConfigured && sync_;  // see store.h
  return from(db_->Write(wo, &batch), "write");
}

StoreResult RocksStore::scan(Cf c,
                             const std::function<void(std::string_view, std::string_view)>& fn) {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf(c)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    fn(std::string_view(it->key().data(), it->key().size()),
       std::string_view(it->value().data(), it->value().size()));
  }
  const rocksdb::Status s = it->status();
  if (!s.ok()) return StoreResult::Error(std::string("scan ") + cf_name(c) + ": " + s.ToString());
  return StoreResult::Ok();
}

std::unique_ptr<StoreTxn> RocksStore::begin(uint64_t txid, StoreResult* error) {
  rocksdb::WriteOptions wo;
  wo.sync = sync_;  // Prepare() and Commit() are the durable steps; see store.h
  std::unique_ptr<rocksdb::Transaction> t(db_->BeginTransaction(wo));
  if (!t) {
    *error = StoreResult::Error("begin: no transaction");
    return nullptr;
  }
  const rocksdb::Status s = t->SetName(txn_name(txid));
  if (!s.ok()) {
    *error = StoreResult::Error("begin " + txn_name(txid) + ": " + s.ToString());
    return nullptr;
  }
  return std::make_unique<RocksTxn>(t.release(), cfs_);
}

StoreResult RocksStore::prepared_txns(std::vector<PreparedTxn>* out) {
  std::vector<rocksdb::Transaction*> txns;
  db_->GetAllPreparedTransactions(&txns);
  for (rocksdb::Transaction* t : txns) {
    PreparedTxn p;
    if (!parse_txn_name(t->GetName(), &p.txid))
      return StoreResult::Error("prepared transaction with a foreign name '" + t->GetName() + "'");
    OpCollector collect(cfs_, &p.ops);
    const rocksdb::Status s = t->GetWriteBatch()->GetWriteBatch()->Iterate(&collect);
    if (!s.ok()) return StoreResult::Error("reading " + t->GetName() + ": " + s.ToString());
    out->push_back(std::move(p));
  }
  return StoreResult::Ok();
}

StoreResult RocksStore::rollback_prepared(uint64_t txid) {
  rocksdb::Transaction* t = db_->GetTransactionByName(txn_name(txid));
  if (!t) return StoreResult::Error("no prepared transaction " + txn_name(txid));
  const rocksdb::Status s = t->Rollback();
  if (!s.ok()) return StoreResult::Error("rollback " + txn_name(txid) + ": " + s.ToString());
  delete t;  // recovered transactions belong to the caller once resolved
  return StoreResult::Ok();
}

}  // namespace exo::db
