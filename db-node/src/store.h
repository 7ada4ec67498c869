// The db node's persistent key-value store. `KvStore` is the interface the request handler, the
// control service, the resolver and start-up recovery use (tests substitute a fake that can fail
// on demand: tests/test_util.h); `RocksStore` is the RocksDB implementation, a
// rocksdb::TransactionDB with four column families:
//
//   Cf::kData     "default"  client data: key -> value
//   Cf::kCached   "cached"   which cache node holds a key (CachedKeys, persisted): key -> node
//   Cf::kRequests "requests" dedup records of applied writes (records.h)
//   Cf::kTxlog    "txlog"    2PC decisions still to deliver to a cache node (records.h)
//
// A write of a key that a cache node holds is a RocksDB two-phase transaction (begin ->
// put/del -> prepare -> commit or rollback), named after its txid so that start-up finds it in
// the WAL if the process died in between: docs/two-phase-commit.md.
//
// Durability of an acknowledged write (WAL always on):
//   Durability::kAsConfigured, sync_writes = true : WriteOptions.sync = true. The WAL record is
//       fsync()ed before the call returns, i.e. before the client gets OK, so the write survives
//       a process crash AND an OS crash or power loss. Transactions: Prepare() and Commit() are
//       both synced.
//   Durability::kAsConfigured, sync_writes = false: the WAL record is written (write(2)) to the
//       OS page cache before the call returns, but not fsync()ed. It survives a process crash
//       (kill -9, segfault) because the kernel still holds the data, but an OS crash or power
//       loss can lose the last writes.
//   Durability::kRelaxed: never synced, whatever sync_writes says. Only for writes whose loss
//       in an OS crash is harmless because they only tidy up (a delivered decision's txlog
//       record, a mark's removal, an expired dedup record): losing one makes the node redo
//       work that is idempotent.
// A WriteBatch (write()) is atomic: after a crash either all of its operations are there or
// none is, across column families.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rocksdb {
class TransactionDB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace exo::db {

// Status-like result: no exceptions and no asserts on I/O; the caller maps kError to a
// wire ERROR reply and a counter.
struct StoreResult {
  enum Code : uint8_t { kOk, kNotFound, kError };
  Code code = kOk;
  std::string error;  // set when code == kError

  bool ok() const { return code == kOk; }
  static StoreResult Ok() { return {}; }
  static StoreResult NotFound() { return {kNotFound, {}}; }
  static StoreResult Error(std::string e) { return {kError, std::move(e)}; }
};

using Bytes = std::span<const uint8_t>;

inline Bytes bytes_of(std::string_view s) {
  return Bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
inline std::string_view sv_of(Bytes b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

// Column families (see the top of this file).
enum class Cf : uint8_t { kData = 0, kCached = 1, kRequests = 2, kTxlog = 3 };
inline constexpr size_t kNumCfs = 4;
const char* cf_name(Cf cf);

enum class Durability : uint8_t { kAsConfigured, kRelaxed };

// One operation of an atomic batch. The spans must stay valid during the write() call.
struct StoreOp {
  Cf cf = Cf::kData;
  bool is_delete = false;
  Bytes key;
  Bytes value;  // ignored for deletes

  static StoreOp put(Cf cf, Bytes k, Bytes v) { return {cf, false, k, v}; }
  static StoreOp del(Cf cf, Bytes k) { return {cf, true, k, {}}; }
};

// An operation as read back from the WAL (owns its bytes).
struct RecoveredOp {
  Cf cf = Cf::kData;
  bool is_delete = false;
  std::string key, value;
};

// A transaction RocksDB found prepared but neither committed nor rolled back when the database
// was opened: the process died between Prepare() and Commit()/Rollback().
struct PreparedTxn {
  uint64_t txid = 0;
  std::vector<RecoveredOp> ops;
};

// One two-phase transaction. Not thread-safe; used by one thread under the key's stripe lock.
// Destroying it unfinished: a transaction that was not prepared is discarded; a PREPARED one is
// left in the WAL exactly as if the process had died, and the next start-up finds it through
// KvStore::prepared_txns() (the request handler never does this: it commits or rolls back).
class StoreTxn {
 public:
  virtual ~StoreTxn() = default;
  virtual StoreResult put(Cf cf, Bytes key, Bytes value) = 0;
  virtual StoreResult del(Cf cf, Bytes key) = 0;
  // Writes the transaction to the WAL as prepared (the redo record; the old value in the
  // database is the undo). Nothing is visible to readers yet.
  virtual StoreResult prepare() = 0;
  // The decision point: once this returns OK the writes are durable (as configured) and
  // visible. On failure they are not visible; see docs/two-phase-commit.md for what a failed
  // commit means after a restart.
  virtual StoreResult commit() = 0;
  // Drops the transaction (prepared or not).
  virtual StoreResult rollback() = 0;
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Client data (Cf::kData). kOk fills *value (replacing its contents), kNotFound leaves it
  // empty.
  virtual StoreResult get(Bytes key, std::string* value) = 0;
  // Reads many keys of client data at once: (*values)[i] and (*results)[i] for keys[i], as get()
  // would return them; both vectors are resized to keys.size(). The packet loop reads a burst's
  // GETs with one call (RocksDB's MultiGet batches the index and block lookups); this default
  // is a loop over get() for stores without a batched read.
  virtual void multi_get(std::span<const Bytes> keys, std::vector<std::string>* values,
                         std::vector<StoreResult>* results) {
    values->resize(keys.size());
    results->resize(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) (*results)[i] = get(keys[i], &(*values)[i]);
  }
  // Applies `ops` atomically (one WriteBatch).
  virtual StoreResult write(std::span<const StoreOp> ops,
                            Durability d = Durability::kAsConfigured) = 0;
  // Calls fn for every record of `cf` in key order. For start-up loads (not for hot paths).
  virtual StoreResult scan(
      Cf cf, const std::function<void(std::string_view key, std::string_view value)>& fn) = 0;
  // Starts a two-phase transaction named after `txid` (unique per node: TxIdSource). Returns
  // nullptr and sets *error on failure.
  virtual std::unique_ptr<StoreTxn> begin(uint64_t txid, StoreResult* error) = 0;
  // Start-up only: the transactions found prepared when the store was opened (and not rolled
  // back since), with their operations.
  virtual StoreResult prepared_txns(std::vector<PreparedTxn>* out) = 0;
  // Start-up only: rolls back one of prepared_txns().
  virtual StoreResult rollback_prepared(uint64_t txid) = 0;

  // Single data writes (tests and tools). Deleting a missing key is kOk.
  StoreResult put(Bytes key, Bytes value) {
    const StoreOp op = StoreOp::put(Cf::kData, key, value);
    return write(std::span<const StoreOp>(&op, 1));
  }
  StoreResult del(Bytes key) {
    const StoreOp op = StoreOp::del(Cf::kData, key);
    return write(std::span<const StoreOp>(&op, 1));
  }
};

// The RocksDB name of a transaction (and the inverse; false for names that are not ours).
std::string txn_name(uint64_t txid);
bool parse_txn_name(std::string_view name, uint64_t* txid);

// The RocksDB options RocksStore::open() uses are built by rocks_options() (rocks_options.h),
// the one place they are set: the node, exo-db-load and exo-rocksdb-bench all open through
// RocksStore::open(), so they run with the same options by construction.
class RocksStore final : public KvStore {
 public:
  // Opens (creating if missing, parents and column families included) the database in `dir`.
  // On failure returns nullptr and sets *error.
  static std::unique_ptr<RocksStore> open(const std::string& dir, bool sync_writes,
                                          std::string* error);
  ~RocksStore() override;  // flushes nothing extra: the WAL already holds every acked write
  RocksStore(const RocksStore&) = delete;
  RocksStore& operator=(const RocksStore&) = delete;

  StoreResult get(Bytes key, std::string* value) override;
  StoreResult write(std::span<const StoreOp> ops,
                    Durability d = Durability::kAsConfigured) override;
  StoreResult scan(Cf cf,
                   const std::function<void(std::string_view, std::string_view)>& fn) override;
  std::unique_ptr<StoreTxn> begin(uint64_t txid, StoreResult* error) override;
  StoreResult prepared_txns(std::vector<PreparedTxn>* out) override;
  StoreResult rollback_prepared(uint64_t txid) override;

  void multi_get(std::span<const Bytes> keys, std::vector<std::string>* values,
                 std::vector<StoreResult>* results) override;

  // Not part of KvStore (the node's paths do not use them); for tools and benchmarks.
  // Flushes every column family's memtable to an SST file (and waits).
  StoreResult flush();
  // flush(), then a full manual compaction of client data, the bottommost level included, so
  // the LSM shape after a bulk load does not depend on background timing. Blocks until done.
  StoreResult compact();
  // A RocksDB property of the client data column family (e.g. "rocksdb.levelstats",
  // "rocksdb.estimate-num-keys"); false if RocksDB does not know it.
  bool property(const std::string& name, std::string* value);

  // Closes the database, reporting the status (the destructor calls it too, ignoring errors).
  // Every StoreTxn must be gone first.
  StoreResult close();
  bool sync_writes() const { return sync_; }

 private:
  RocksStore(rocksdb::TransactionDB* db, std::vector<rocksdb::ColumnFamilyHandle*> cfs, bool sync)
      : db_(db), cfs_(std::move(cfs)), sync_(sync) {}
  rocksdb::ColumnFamilyHandle* cf(Cf c) const { return cfs_[static_cast<size_t>(c)]; }

  rocksdb::TransactionDB* db_;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs_;  // indexed by Cf
  bool sync_;
};

}  // namespace exo::db
