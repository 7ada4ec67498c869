// The db node's persistent key-value store. `KvStore` is the interface the request handler and
// the control service use (tests substitute a fake that can fail on demand); `RocksStore` is
// the RocksDB implementation.
//
// Durability of an acknowledged write (RocksStore, WAL always on):
//   sync_writes = true : WriteOptions.sync = true. The WAL record is fsync()ed before Put/Delete
//                        returns, i.e. before the client gets OK, so the write survives a process
//                        crash AND an OS crash or power loss.
//   sync_writes = false: the WAL record is written (write(2)) to the OS page cache before the
//                        ack, but not fsync()ed. It survives a process crash (kill -9, segfault)
//                        because the kernel still holds the data, but an OS crash or power loss
//                        can lose the last writes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace rocksdb {
class DB;
}

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

class KvStore {
 public:
  virtual ~KvStore() = default;
  // kOk fills *value (replacing its contents), kNotFound leaves it empty.
  virtual StoreResult get(Bytes key, std::string* value) = 0;
  virtual StoreResult put(Bytes key, Bytes value) = 0;
  // Deleting a missing key is kOk.
  virtual StoreResult del(Bytes key) = 0;
};

class RocksStore final : public KvStore {
 public:
  // Opens (creating if missing, parents included) the database in `dir`. On failure returns
  // nullptr and sets *error.
  static std::unique_ptr<RocksStore> open(const std::string& dir, bool sync_writes,
                                          std::string* error);
  ~RocksStore() override;  // flushes nothing extra: the WAL already holds every acked write
  RocksStore(const RocksStore&) = delete;
  RocksStore& operator=(const RocksStore&) = delete;

  StoreResult get(Bytes key, std::string* value) override;
  StoreResult put(Bytes key, Bytes value) override;
  StoreResult del(Bytes key) override;

  // Closes the database, reporting the status (the destructor calls it too, ignoring errors).
  StoreResult close();
  bool sync_writes() const { return sync_; }

 private:
  RocksStore(rocksdb::DB* db, bool sync) : db_(db), sync_(sync) {}
  rocksdb::DB* db_;
  bool sync_;
};

}  // namespace exo::db
