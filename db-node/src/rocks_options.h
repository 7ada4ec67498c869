// The RocksDB options of a db node's store, built in ONE place. RocksStore::open() (store.h)
// opens with exactly these, and every program that opens a data dir goes through
// RocksStore::open(): exo-db-node (src/main.cc), exo-db-load
// (tools/bulk_load.cc) and exo-rocksdb-bench (bench/rocksdb_reads.cc). So the in-process RocksDB
// figures of `make bench` are taken with the node's options by construction; nothing else in
// the tree may build rocksdb::Options for a data dir.
#pragma once

#include <rocksdb/options.h>
#include <rocksdb/utilities/transaction_db.h>

#include <vector>

namespace exo::db {

struct RocksOptions {
  rocksdb::DBOptions db;
  rocksdb::TransactionDBOptions txn;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;  // indexed by Cf (store.h), kNumCfs of them
};

// What RocksStore::open() passes to rocksdb::TransactionDB::Open (defined in store.cc).
RocksOptions rocks_options();

}  // namespace exo::db
