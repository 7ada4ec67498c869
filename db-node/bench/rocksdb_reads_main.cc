// exo-rocksdb-bench: RocksDB in-process random point reads of a data dir loaded by exo-db-load,
// through the db node's own store, opened with RocksStore::open: the node's RocksDB options by
// construction (src/rocks_options.h), nothing set here. The in-process side of `make bench`'s
// db node / RocksDB ratio; the harness pins it (taskset -c 1) as it pins the node.
//
//   exo-rocksdb-bench --data-dir DIR --keys N [--first 0] [--key-size 16] [--value-size 512]
//                     [--duration 5] [--ops K] [--warmup 0] [--batch 1] [--verify-every 64]
//                     [--seed 1] [--out FILE]
//
// Single thread. Each timed read is one KvStore::get (batch 1) or one multi_get of --batch keys
// between two steady_clock reads (timer_overhead_ns in the JSON is what those add to each
// latency sample). JSON to --out or stdout; one summary line on stderr.
// Exit 0; 2 bad option (named) or DIR holds no database; 1 RocksDB cannot open DIR, the probe
// of the first and last id fails, or the run saw errors, missing keys or wrong values (the JSON
// is still written).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "../tools/dataset.h"
#include "rocksdb_reads.h"
#include "store.h"

using exo::db::RocksStore;
using exo::db::StoreResult;
using namespace exo::db::tools;

int main(int argc, char** argv) {
  ReadBenchOptions o;
  std::string err;
  const int code = parse_read_bench_options(argc, argv, &o, &err);
  if (code >= 0) {
    if (code != 0) std::fprintf(stderr, "exo-rocksdb-bench: %s\n", err.c_str());
    return code;
  }
  // RocksStore::open creates a missing database; a benchmark of an empty one is a mistake.
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(o.data_dir) / "CURRENT", ec)) {
    std::fprintf(stderr, "exo-rocksdb-bench: --data-dir: no RocksDB database in '%s' (load it "
                 "with exo-db-load first)\n", o.data_dir.c_str());
    return 2;
  }
  std::unique_ptr<RocksStore> store = RocksStore::open(o.data_dir, /*sync_writes=*/false, &err);
  if (!store) {
    std::fprintf(stderr, "exo-rocksdb-bench: %s\n", err.c_str());
    return 1;
  }
  // The data set must be the one asked for: its first and last ids present, with their values.
  std::string v, expect;
  for (uint64_t id : {o.first, o.first + (o.keys - 1)}) {
    const StoreResult r = store->get(exo::db::bytes_of(dataset_key(id, o.key_size)), &v);
    dataset_value(id, o.value_size, &expect);
    if (!r.ok() || v != expect) {
      std::fprintf(stderr,
                   "exo-rocksdb-bench: %s: key %s %s; was '%s' loaded with --keys %llu --first "
                   "%llu --key-size %zu --value-size %zu?\n",
                   o.data_dir.c_str(), dataset_key(id, o.key_size).c_str(),
                   r.code == StoreResult::kError ? r.error.c_str()
                   : r.ok()                      ? "has another value"
                                                 : "is missing",
                   o.data_dir.c_str(), static_cast<unsigned long long>(o.keys),
                   static_cast<unsigned long long>(o.first), o.key_size, o.value_size);
      return 1;
    }
  }

  ReadBenchResult r;
  const StoreResult run = run_read_bench(*store, o, &r);
  if (!run.ok()) {
    std::fprintf(stderr, "exo-rocksdb-bench: %s\n", run.error.c_str());
    return 2;
  }
  const nlohmann::json j = read_bench_json(o, r, *store);
  const StoreResult closed = store->close();

  std::fprintf(stderr,
               "exo-rocksdb-bench: %llu reads in %.2f s: %.0f gets/s, %.0f ns/get, p50 %.2f us, "
               "p99 %.2f us, p999 %.2f us; found %llu, not found %llu, errors %llu, "
               "mismatches %llu of %llu verified\n",
               static_cast<unsigned long long>(r.ops), r.seconds, j["gets_per_s"].get<double>(),
               j["ns_per_get"].get<double>(), r.p50_us, r.p99_us, r.p999_us,
               static_cast<unsigned long long>(r.found),
               static_cast<unsigned long long>(r.not_found),
               static_cast<unsigned long long>(r.errors),
               static_cast<unsigned long long>(r.mismatches),
               static_cast<unsigned long long>(r.verified));
  if (o.out.empty()) {
    std::printf("%s\n", j.dump(2).c_str());
    if (std::fflush(stdout) != 0) return 1;
  } else {
    std::ofstream f(o.out);
    f << j.dump(2) << "\n";
    f.close();
    if (!f) {
      std::fprintf(stderr, "exo-rocksdb-bench: cannot write %s\n", o.out.c_str());
      return 1;
    }
  }
  if (!closed.ok()) {
    std::fprintf(stderr, "exo-rocksdb-bench: %s\n", closed.error.c_str());
    return 1;
  }
  return r.errors || r.not_found || r.mismatches ? 1 : 0;
}
