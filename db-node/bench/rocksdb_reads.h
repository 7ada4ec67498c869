// exo-rocksdb-bench's library: uniform random point reads of the benchmark data set
// (tools/dataset.h) straight through the node's store, RocksStore::get (KvStore::get, the
// call the request handler makes for a GET) or, with batch > 1, RocksStore::multi_get. The
// store is opened by the caller with RocksStore::open, i.e. with the node's RocksDB options.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "store.h"

namespace exo::db::tools {

struct ReadBenchOptions {
  std::string data_dir;
  std::string out;             // JSON file; empty: stdout
  uint64_t keys = 0;           // N: ids first .. first + N - 1, drawn uniformly
  uint64_t first = 0;
  size_t key_size = 16;
  size_t value_size = 512;     // what the loader wrote (checked on every read)
  double duration = 5;         // timed phase, seconds (0: no time limit; then ops > 0)
  uint64_t ops = 0;            // timed phase stops after this many reads (0: no limit)
  double warmup = 0;           // seconds of the same reads before timing, not recorded
  size_t batch = 1;            // 1: get(); > 1: one multi_get() of this many keys per call
  uint64_t verify_every = 64;  // compare every k-th value byte for byte (0: sizes only)
  uint64_t seed = 1;
};

// Parses exo-rocksdb-bench's command line. Returns -1 to run, or the exit code: 0 after --help,
// 2 for a bad option (*error names it). --ops without --duration means no time limit.
int parse_read_bench_options(int argc, const char* const* argv, ReadBenchOptions* o,
                             std::string* error);
std::string check_read_bench_options(const ReadBenchOptions& o);

struct ReadBenchResult {
  uint64_t ops = 0;  // keys read in the timed phase
  uint64_t found = 0, not_found = 0, errors = 0;
  uint64_t verified = 0, mismatches = 0;  // compared byte for byte; wrong size or bytes
  std::string first_error;
  uint64_t warmup_ops = 0;
  double warmup_seconds = 0;
  double seconds = 0;             // wall time of the timed phase
  double cpu_seconds = 0;         // getrusage(RUSAGE_SELF) user + sys over the timed phase
  double thread_cpu_seconds = 0;  // getrusage(RUSAGE_THREAD): the reading thread alone
  uint64_t latency_samples = 0;   // one per get() call, or per multi_get() call
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0, mean_us = 0;
  double timer_overhead_ns = 0;   // median of two back-to-back steady_clock::now(), included
                                  // in every latency sample
  double harness_ns_per_op = 0;   // the loop without the read: RNG, key, clock, sample; included
                                  // in ns_per_get (= seconds / ops), not in the latencies
};

// Runs the warmup and the timed phase on `store`. Fails only for a bad `o`; read errors are
// counted in *r.
StoreResult run_read_bench(RocksStore& store, const ReadBenchOptions& o, ReadBenchResult* r);

// The JSON record of a run (what exo-rocksdb-bench writes). `store` adds RocksDB's view: LSM
// shape, key estimate, SST bytes, block cache.
nlohmann::json read_bench_json(const ReadBenchOptions& o, const ReadBenchResult& r,
                               RocksStore& store);

}  // namespace exo::db::tools
