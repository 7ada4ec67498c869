// exo-rocksdb-bench: see rocksdb_reads.h and rocksdb_reads_main.cc.
#include "rocksdb_reads.h"

#include <CLI/CLI.hpp>
#include <rocksdb/version.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "../tools/bulk_load.h"
#include "../tools/dataset.h"
#include "../tools/dataset_cli.h"

namespace exo::db::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxBatch = 4096;

uint64_t ns_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

double cpu_seconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Uniform ids in [first, first + n): splitmix64 and Lemire's multiply-shift (bias < n / 2^64).
class IdSource {
 public:
  IdSource(uint64_t seed, uint64_t first, uint64_t n) : state_(seed), first_(first), n_(n) {}
  uint64_t next() {
    const unsigned __int128 m = static_cast<unsigned __int128>(splitmix64(&state_)) * n_;
    return first_ + static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_, first_, n_;
};

// One phase (warmup or timed) of reads. Latencies go to `lat` (ns) when it is set.
struct Phase {
  Phase(RocksStore& s, const ReadBenchOptions& opts, IdSource& i, ReadBenchResult& res,
        std::vector<uint32_t>* latencies)
      : store(s), o(opts), ids(i), r(res), lat(latencies) {}

  RocksStore& store;
  const ReadBenchOptions& o;
  IdSource& ids;
  ReadBenchResult& r;
  std::vector<uint32_t>* lat;

  std::string value, expect;
  std::vector<std::string> keys, values;
  std::vector<Bytes> spans;
  std::vector<StoreResult> results;
  std::vector<uint64_t> batch_ids;
  uint64_t done = 0;

  void classify(uint64_t id, const StoreResult& res, const std::string& v) {
    if (!lat) return;  // warmup: not counted
    if (res.code == StoreResult::kOk) {
      ++r.found;
      if (v.size() != o.value_size) {
        ++r.mismatches;
      } else if (o.verify_every != 0 && r.ops % o.verify_every == 0) {
        dataset_value(id, o.value_size, &expect);
        ++r.verified;
        if (v != expect) ++r.mismatches;
      }
    } else if (res.code == StoreResult::kNotFound) {
      ++r.not_found;
    } else {
      if (r.errors++ == 0) r.first_error = res.error;
    }
    ++r.ops;
  }

  void sample(Clock::time_point t0, Clock::time_point t1) {
    if (!lat) return;
    lat->push_back(static_cast<uint32_t>(std::min<uint64_t>(ns_between(t0, t1), UINT32_MAX)));
  }

  // Reads until `seconds` (0: no limit) or `max_ops` (0: no limit) is reached.
  void run(double seconds, uint64_t max_ops) {
    const auto start = Clock::now();
    const auto limit = std::chrono::duration<double>(seconds);
    const auto deadline = seconds > 0 ? start + std::chrono::duration_cast<Clock::duration>(limit)
                                      : Clock::time_point::max();
    if (o.batch > 1) {
      keys.resize(o.batch);
      spans.resize(o.batch);
      batch_ids.resize(o.batch);
    }
    for (;;) {
      Clock::time_point t1;
      if (o.batch == 1) {
        const uint64_t id = ids.next();
        const std::string key = dataset_key(id, o.key_size);
        const auto t0 = Clock::now();
        const StoreResult res = store.get(bytes_of(key), &value);
        t1 = Clock::now();
        sample(t0, t1);
        classify(id, res, value);
        ++done;
      } else {
        for (size_t i = 0; i < o.batch; ++i) {
          batch_ids[i] = ids.next();
          keys[i] = dataset_key(batch_ids[i], o.key_size);
          spans[i] = bytes_of(keys[i]);
        }
        const auto t0 = Clock::now();
        store.multi_get(spans, &values, &results);
        t1 = Clock::now();
        sample(t0, t1);
        for (size_t i = 0; i < o.batch; ++i) classify(batch_ids[i], results[i], values[i]);
        done += o.batch;
      }
      if (t1 >= deadline || (max_ops != 0 && done >= max_ops)) break;
    }
  }
};

double percentile_us(const std::vector<uint32_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  // Nearest rank: the ceil(q * n)-th smallest sample.
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1] / 1000.0;
}

// Median cost of the two clock reads around every sample.
double timer_overhead_ns() {
  std::vector<uint32_t> d(100'000);
  for (auto& x : d) {
    const auto a = Clock::now();
    const auto b = Clock::now();
    x = static_cast<uint32_t>(ns_between(a, b));
  }
  std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
  return d[d.size() / 2];
}

// What the timed loop costs per read besides the read (batch 1): id, key, two clock reads and
// a latency sample; the verification of every verify_every-th value.
double harness_ns_per_op(const ReadBenchOptions& o) {
  constexpr size_t kN = 200'000;
  IdSource ids(o.seed ^ 0x5555, o.first, o.keys);
  std::vector<uint32_t> lat;
  lat.reserve(kN);
  std::string expect;
  size_t sink = 0;
  const auto start = Clock::now();
  for (size_t i = 0; i < kN; ++i) {
    const uint64_t id = ids.next();
    const std::string key = dataset_key(id, o.key_size);
    const auto t0 = Clock::now();
    sink += key[key.size() - 1];
    const auto t1 = Clock::now();
    lat.push_back(static_cast<uint32_t>(ns_between(t0, t1)));
    if (o.verify_every != 0 && i % o.verify_every == 0) {
      dataset_value(id, o.value_size, &expect);
      sink += static_cast<uint8_t>(expect.empty() ? 0 : expect[0]);
    }
  }
  const double ns = static_cast<double>(ns_between(start, Clock::now())) / kN;
  return sink == 0xFFFFFFFFFFFFull ? ns + 1 : ns;  // keeps `sink` alive
}

}  // namespace

std::string check_read_bench_options(const ReadBenchOptions& o) {
  if (o.data_dir.empty()) return "--data-dir: must not be empty";
  std::string bad = check_dataset_options(o.keys, o.first, o.key_size, o.value_size);
  if (!bad.empty()) return bad;
  if (!std::isfinite(o.duration) || o.duration < 0) return "--duration: must be >= 0 seconds";
  if (o.duration == 0 && o.ops == 0) return "--duration: must be > 0 unless --ops is given";
  if (!std::isfinite(o.warmup) || o.warmup < 0) return "--warmup: must be >= 0 seconds";
  if (o.batch == 0 || o.batch > kMaxBatch)
    return "--batch: must be in 1.." + std::to_string(kMaxBatch);
  return "";
}

int parse_read_bench_options(int argc, const char* const* argv, ReadBenchOptions* o,
                             std::string* error) {
  CLI::App app{
      "exo-rocksdb-bench: uniform random point reads of an exo-db-load data dir through the db "
      "node's store (RocksStore: the node's RocksDB options), single thread"};
  add_dataset_options(app, {&o->data_dir, &o->keys, &o->first, &o->key_size, &o->value_size},
                      "data dir loaded by exo-db-load (same --keys, --first, --key-size, --value-size)");
  app.add_option("--duration", o->duration, "timed seconds (default 5, none with --ops alone)");
  app.add_option("--ops", o->ops, "stop the timed phase after this many reads (0: no limit)")
      ->check(kUnsigned)
      ->capture_default_str();
  app.add_option("--warmup", o->warmup, "seconds of untimed reads first")->capture_default_str();
  app.add_option("--batch", o->batch, "keys per MultiGet (1: one Get per key)")
      ->check(kUnsigned)
      ->capture_default_str();
  app.add_option("--verify-every", o->verify_every,
                 "check every k-th value byte for byte (0: sizes only)")
      ->check(kUnsigned)
      ->capture_default_str();
  app.add_option("--seed", o->seed, "random seed of the key ids")
      ->check(kUnsigned)
      ->capture_default_str();
  app.add_option("--out", o->out, "write the JSON here (default: stdout)");
  if (const int rc = parse_cli(app, argc, argv, error); rc >= 0) return rc;
  if (app.count("--ops") && o->ops != 0 && !app.count("--duration")) o->duration = 0;
  *error = check_read_bench_options(*o);
  return error->empty() ? -1 : 2;
}

StoreResult run_read_bench(RocksStore& store, const ReadBenchOptions& o, ReadBenchResult* r) {
  *r = ReadBenchResult{};
  const std::string bad = check_read_bench_options(o);
  if (!bad.empty()) return StoreResult::Error(bad);

  r->timer_overhead_ns = timer_overhead_ns();
  r->harness_ns_per_op = harness_ns_per_op(o);

  IdSource ids(o.seed, o.first, o.keys);
  if (o.warmup > 0) {
    ReadBenchResult ignored;
    Phase warm(store, o, ids, ignored, nullptr);
    const auto t0 = Clock::now();
    warm.run(o.warmup, 0);
    r->warmup_seconds = static_cast<double>(ns_between(t0, Clock::now())) / 1e9;
    r->warmup_ops = warm.done;
  }

  std::vector<uint32_t> lat;
  // Room for ~2M samples per second of the run up front, so the vector rarely grows while timed.
  const double expect = o.ops ? static_cast<double>(o.ops) : 2e6 * o.duration;
  lat.reserve(static_cast<size_t>(std::min(expect / static_cast<double>(o.batch), 64e6)));
  Phase timed(store, o, ids, *r, &lat);
  const double cpu0 = cpu_seconds(RUSAGE_SELF), tcpu0 = cpu_seconds(RUSAGE_THREAD);
  const auto t0 = Clock::now();
  timed.run(o.duration, o.ops);
  const auto t1 = Clock::now();
  r->cpu_seconds = cpu_seconds(RUSAGE_SELF) - cpu0;
  r->thread_cpu_seconds = cpu_seconds(RUSAGE_THREAD) - tcpu0;
  r->seconds = static_cast<double>(ns_between(t0, t1)) / 1e9;

  r->latency_samples = lat.size();
  if (!lat.empty()) {
    double sum = 0;
    for (uint32_t x : lat) sum += x;
    r->mean_us = sum / static_cast<double>(lat.size()) / 1000.0;
    std::sort(lat.begin(), lat.end());
    r->p50_us = percentile_us(lat, 0.50);
    r->p99_us = percentile_us(lat, 0.99);
    r->p999_us = percentile_us(lat, 0.999);
    r->max_us = lat.back() / 1000.0;
  }
  return StoreResult::Ok();
}

nlohmann::json read_bench_json(const ReadBenchOptions& o, const ReadBenchResult& r,
                               RocksStore& store) {
  nlohmann::json j;
  j["benchmark"] = "exo-rocksdb-bench";
  j["what"] = o.batch == 1 ? "RocksStore::get (KvStore::get, the db node's GET call)"
                           : "RocksStore::multi_get (rocksdb MultiGet)";
  j["options_from"] = "exo::db::rocks_options() via RocksStore::open (db-node/src/rocks_options.h)";
  j["data_dir"] = o.data_dir;
  j["keys"] = o.keys;
  j["first"] = o.first;
  j["key_size"] = o.key_size;
  j["value_size"] = o.value_size;
  j["batch"] = o.batch;
  j["seed"] = o.seed;
  j["duration_s"] = o.duration;
  j["ops_limit"] = o.ops;
  j["warmup_s"] = o.warmup;
  j["warmup_ops"] = r.warmup_ops;
  j["ops"] = r.ops;
  j["found"] = r.found;
  j["not_found"] = r.not_found;
  j["errors"] = r.errors;
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  j["verified"] = r.verified;
  j["mismatches"] = r.mismatches;
  j["seconds"] = r.seconds;
  const double ops = static_cast<double>(r.ops);
  j["gets_per_s"] = r.seconds > 0 ? ops / r.seconds : 0.0;
  j["ns_per_get"] = r.ops ? r.seconds * 1e9 / ops : 0.0;
  j["cpu_seconds"] = r.cpu_seconds;
  j["thread_cpu_seconds"] = r.thread_cpu_seconds;
  j["cpu_ns_per_get"] = r.ops ? r.cpu_seconds * 1e9 / ops : 0.0;
  j["latency_us"] = {{"unit", o.batch == 1 ? "one get" : "one multi_get of batch keys"},
                     {"samples", r.latency_samples},
                     {"p50", r.p50_us},
                     {"p99", r.p99_us},
                     {"p999", r.p999_us},
                     {"max", r.max_us},
                     {"mean", r.mean_us}};
  j["timer_overhead_ns"] = r.timer_overhead_ns;
  j["harness_ns_per_op"] = r.harness_ns_per_op;

  nlohmann::json rdb;
  rdb["version"] = std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) + "." +
                   std::to_string(ROCKSDB_PATCH);
  for (const char* p : {"rocksdb.estimate-num-keys", "rocksdb.total-sst-files-size",
                        "rocksdb.block-cache-capacity", "rocksdb.block-cache-usage",
                        "rocksdb.num-immutable-mem-table", "rocksdb.cur-size-all-mem-tables"}) {
    std::string v;
    if (store.property(p, &v))
      rdb[std::string(p).substr(8)] = std::strtoull(v.c_str(), nullptr, 10);
  }
  nlohmann::json files = nlohmann::json::array();
  for (int level = 0; level < 7; ++level) {
    std::string v;
    if (store.property("rocksdb.num-files-at-level" + std::to_string(level), &v))
      files.push_back(std::strtoull(v.c_str(), nullptr, 10));
  }
  rdb["files_per_level"] = files;
  j["rocksdb"] = rdb;

  cpu_set_t set;
  CPU_ZERO(&set);
  nlohmann::json cpus = nlohmann::json::array();
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  j["cpu_affinity"] = cpus;
  j["cpu"] = sched_getcpu();
  return j;
}

}  // namespace exo::db::tools
