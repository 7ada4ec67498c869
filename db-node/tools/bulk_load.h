// exo-db-load's library: fills a db node's data dir with the benchmark data set (dataset.h)
// before the node's first start, through the node's own store (RocksStore::open, so the node's
// RocksDB options: rocks_options.h) and KvStore::write in batches.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "store.h"

namespace exo::db::tools {

struct LoadOptions {
  std::string data_dir;
  uint64_t keys = 0;        // N: ids first .. first + N - 1
  uint64_t first = 0;
  size_t key_size = 16;
  size_t value_size = 512;
  size_t batch = 1000;      // operations per WriteBatch
  bool compact = false;     // full manual compaction afterwards (deterministic LSM shape)
};

// Parses exo-db-load's command line (argv[0] is the program). Returns -1 when the load should
// run; otherwise the exit code: 0 after --help (printed on stdout), 2 for a bad option, with
// *error naming it.
int parse_load_options(int argc, const char* const* argv, LoadOptions* o, std::string* error);

// The data set's own checks, shared with exo-rocksdb-bench: "" if ids first .. first + keys - 1
// fit key_size-byte keys and the sizes are in range, else a message naming the option.
std::string check_dataset_options(uint64_t keys, uint64_t first, size_t key_size,
                                  size_t value_size);

// The checks parse_load_options makes after parsing: "" if `o` is valid, else a message that
// starts with the option's name.
std::string check_load_options(const LoadOptions& o);

struct LoadStats {
  uint64_t keys = 0;         // written so far
  uint64_t bytes = 0;        // key + value bytes written so far
  double load_seconds = 0;   // the writes
  double flush_seconds = 0;  // final flush, or flush + compaction with --compact
};

// Writes ids o.first .. o.first + o.keys - 1 into `store` (Durability::kRelaxed, o.batch per
// WriteBatch), then flushes the memtables (so the next open replays no WAL) and, with
// o.compact, compacts client data fully. progress (if set) is called after every batch.
// Stops at the first failure and returns RocksDB's message; *stats says how far it got.
StoreResult bulk_load(RocksStore& store, const LoadOptions& o, LoadStats* stats,
                      const std::function<void(const LoadStats&)>& progress = {});

}  // namespace exo::db::tools
