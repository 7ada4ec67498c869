// exo-db-load's library (tools/bulk_load.h) and exo-rocksdb-bench's (bench/rocksdb_reads.h):
// a small data set loaded into a temp dir and read back through RocksStore, and their options.
#include <gtest/gtest.h>

#include <set>

#include "bulk_load.h"
#include "dataset.h"
#include "node_parts.h"
#include "recovery.h"
#include "rocksdb_reads.h"
#include "store.h"
#include "test_util.h"

namespace exo::db::tools {
namespace {

using exo::db::testing::TempDir;

// argv for the parsers: {"prog", args...}.
struct Argv {
  std::vector<std::string> args;
  std::vector<const char*> ptrs;
  explicit Argv(std::vector<std::string> a) : args(std::move(a)) {
    args.insert(args.begin(), "prog");
    for (const auto& s : args) ptrs.push_back(s.c_str());
  }
  int argc() const { return static_cast<int>(ptrs.size()); }
  const char* const* argv() const { return ptrs.data(); }
};

LoadOptions small(const std::string& dir, bool compact) {
  LoadOptions o;
  o.data_dir = dir;
  o.keys = 300;
  o.first = 1000;
  o.batch = 64;  // 300 = 4 x 64 + 44: the last batch is partial
  o.compact = compact;
  return o;
}

TEST(Dataset, KeysAreTheLoadGeneratorsAndValuesDependOnTheIdOnly) {
  EXPECT_EQ(dataset_key(42, 16), "key:000000000042");
  EXPECT_EQ(dataset_key(42, 16), exo::loadgen::key_name(42, 16));
  EXPECT_EQ(dataset_key(7, 8), "key:0007");
  std::string a, b, c;
  dataset_value(5, 13, &a);
  dataset_value(5, 13, &b);
  dataset_value(6, 13, &c);
  EXPECT_EQ(a.size(), 13u);  // not a multiple of 8
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  dataset_value(5, 8, &b);
  EXPECT_EQ(a.substr(0, 8), b);  // a shorter value is a prefix
  dataset_value(5, 0, &b);
  EXPECT_TRUE(b.empty());
  std::set<std::string> distinct;
  for (uint64_t id = 0; id < 1000; ++id) {
    dataset_value(id, 16, &a);
    distinct.insert(a);
  }
  EXPECT_EQ(distinct.size(), 1000u);
}

TEST(BulkLoad, LoadsAndReadsBackThroughRocksStore) {
  for (bool compact : {false, true}) {
    TempDir dir;
    const std::string path = (dir.path / "db").string();
    const LoadOptions o = small(path, compact);
    std::string err;
    {
      auto store = RocksStore::open(path, false, &err);
      ASSERT_TRUE(store) << err;
      LoadStats st;
      std::vector<uint64_t> seen;
      const StoreResult r =
          bulk_load(*store, o, &st, [&](const LoadStats& s) { seen.push_back(s.keys); });
      ASSERT_TRUE(r.ok()) << r.error;
      EXPECT_EQ(st.keys, 300u);
      EXPECT_EQ(st.bytes, 300u * (16 + 512));
      EXPECT_EQ(seen, (std::vector<uint64_t>{64, 128, 192, 256, 300}));
      std::string l0;
      ASSERT_TRUE(store->property("rocksdb.num-files-at-level0", &l0));
      if (compact) {
        EXPECT_EQ(l0, "0");  // all of it in one sorted run below L0
      }
      std::string mem;
      ASSERT_TRUE(store->property("rocksdb.num-entries-active-mem-table", &mem));
      EXPECT_EQ(mem, "0");  // flushed: the next open replays nothing
      ASSERT_TRUE(store->close().ok());
    }
    // Read back in a new open, as the node and exo-rocksdb-bench do.
    auto store = RocksStore::open(path, true, &err);
    ASSERT_TRUE(store) << err;
    std::string v, expect;
    for (uint64_t id = 1000; id < 1300; ++id) {
      ASSERT_TRUE(store->get(bytes_of(dataset_key(id, 16)), &v).ok()) << id;
      dataset_value(id, 512, &expect);
      ASSERT_EQ(v, expect) << id;
    }
    EXPECT_EQ(store->get(bytes_of(dataset_key(999, 16)), &v).code, StoreResult::kNotFound);
    EXPECT_EQ(store->get(bytes_of(dataset_key(1300, 16)), &v).code, StoreResult::kNotFound);
    size_t n = 0;
    ASSERT_TRUE(store->scan(Cf::kData, [&](std::string_view, std::string_view) { ++n; }).ok());
    EXPECT_EQ(n, 300u);
  }
}

// exo-db-load's purpose: a data dir the node starts on. What exo-db-node's main() does with it
// (src/main.cc: RocksStore::open with the config's sync_writes, NodeParts::build, recover), then
// a GET frame through a packet thread's handler.
TEST(BulkLoad, TheNodeStartsOnALoadedDirAndServesItsKeys) {
  TempDir dir;
  const std::string path = (dir.path / "db").string();
  std::string err;
  {
    auto store = RocksStore::open(path, false, &err);
    ASSERT_TRUE(store) << err;
    LoadStats st;
    ASSERT_TRUE(bulk_load(*store, small(path, true), &st).ok());
  }
  const Cluster cluster = exo::db::testing::test_cluster();
  auto store = RocksStore::open(path, /*sync_writes=*/true, &err);
  ASSERT_TRUE(store) << err;
  auto parts = NodeParts::build(cluster, 0, *store, &err);
  ASSERT_TRUE(parts) << err;
  RecoveryReport rec;
  const StoreResult r =
      recover(*store, cluster, parts->cached, parts->dedup, parts->resolver, &rec);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(rec.prepared_rolled_back + rec.commits_queued + rec.aborts_queued + rec.marks_loaded +
                rec.dedup_loaded,
            0u);
  const NodeLane lane = parts->add_lane();
  std::vector<uint8_t> out(16384);
  std::string expect;
  for (uint64_t id : {uint64_t{1000}, uint64_t{1150}, uint64_t{1299}}) {
    const std::vector<uint8_t> get = exo::db::testing::request(wire::kGet, dataset_key(id, 16));
    const size_t n = lane.handler->handle(get, out);
    ASSERT_GT(n, 0u);
    wire::FrameView reply{};
    ASSERT_EQ(wire::parse(std::span<const uint8_t>(out.data(), n), reply), wire::ParseError::kNone);
    EXPECT_EQ(reply.status, wire::kOk);
    dataset_value(id, 512, &expect);
    EXPECT_EQ(sv_of(reply.value), expect) << id;
  }
}

TEST(BulkLoad, RefusesBadOptionsWithoutWriting) {
  TempDir dir;
  std::string err;
  auto store = RocksStore::open((dir.path / "db").string(), false, &err);
  ASSERT_TRUE(store) << err;
  LoadOptions o = small((dir.path / "db").string(), false);
  o.key_size = 6;  // 2 digits, ids up to 1299
  LoadStats st;
  const StoreResult r = bulk_load(*store, o, &st);
  EXPECT_EQ(r.code, StoreResult::kError);
  EXPECT_EQ(r.error.rfind("--key-size", 0), 0u) << r.error;
  EXPECT_EQ(st.keys, 0u);
}

TEST(RocksStore, MultiGetMatchesGet) {
  TempDir dir;
  std::string err;
  auto store = RocksStore::open((dir.path / "db").string(), false, &err);
  ASSERT_TRUE(store) << err;
  ASSERT_TRUE(store->put(bytes_of("a"), bytes_of("1")).ok());
  ASSERT_TRUE(store->put(bytes_of("c"), bytes_of("333")).ok());
  const Bytes keys[] = {bytes_of("c"), bytes_of("b"), bytes_of("a")};
  std::vector<std::string> values{"stale"};
  std::vector<StoreResult> results;
  store->multi_get(keys, &values, &results);
  ASSERT_EQ(values.size(), 3u);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(values[0], "333");
  EXPECT_EQ(results[1].code, StoreResult::kNotFound);
  EXPECT_EQ(values[1], "");
  EXPECT_TRUE(results[2].ok());
  EXPECT_EQ(values[2], "1");
}

TEST(ReadBench, ReadsTheLoadedDataSetAndVerifiesIt) {
  TempDir dir;
  const std::string path = (dir.path / "db").string();
  std::string err;
  auto store = RocksStore::open(path, false, &err);
  ASSERT_TRUE(store) << err;
  LoadStats st;
  ASSERT_TRUE(bulk_load(*store, small(path, true), &st).ok());

  for (size_t batch : {size_t{1}, size_t{16}}) {
    ReadBenchOptions o;
    o.data_dir = path;
    o.keys = 300;
    o.first = 1000;
    o.duration = 0;
    o.ops = 2000;
    o.batch = batch;
    o.verify_every = 1;
    ReadBenchResult r;
    ASSERT_TRUE(run_read_bench(*store, o, &r).ok());
    EXPECT_EQ(r.ops, 2000u);  // 2000 = 125 x 16
    EXPECT_EQ(r.found, 2000u);
    EXPECT_EQ(r.not_found + r.errors + r.mismatches, 0u);
    EXPECT_EQ(r.verified, 2000u);
    EXPECT_EQ(r.latency_samples, 2000u / batch);
    EXPECT_GT(r.p50_us, 0);
    EXPECT_LE(r.p50_us, r.p99_us);
    EXPECT_LE(r.p99_us, r.p999_us);
    const nlohmann::json j = read_bench_json(o, r, *store);
    EXPECT_EQ(j["found"], 2000u);
    EXPECT_GT(j["gets_per_s"].get<double>(), 0);
    EXPECT_GT(j["ns_per_get"].get<double>(), 0);
  }

  // Ids past the loaded ones are counted missing; values of another size are mismatches.
  ReadBenchOptions o;
  o.data_dir = path;
  o.keys = 600;
  o.first = 1000;
  o.duration = 0;
  o.ops = 1000;
  ReadBenchResult r;
  ASSERT_TRUE(run_read_bench(*store, o, &r).ok());
  EXPECT_GT(r.not_found, 0u);
  EXPECT_EQ(r.found + r.not_found, 1000u);
  o.keys = 300;
  o.value_size = 100;
  ASSERT_TRUE(run_read_bench(*store, o, &r).ok());
  EXPECT_EQ(r.mismatches, 1000u);
}

// Exit code and message of a command line.
std::pair<int, std::string> load_args(std::vector<std::string> args, LoadOptions* o = nullptr) {
  const Argv a(std::move(args));
  LoadOptions local;
  std::string err;
  const int code = parse_load_options(a.argc(), a.argv(), o ? o : &local, &err);
  return {code, err};
}

std::pair<int, std::string> bench_args(std::vector<std::string> args,
                                       ReadBenchOptions* o = nullptr) {
  const Argv a(std::move(args));
  ReadBenchOptions local;
  std::string err;
  const int code = parse_read_bench_options(a.argc(), a.argv(), o ? o : &local, &err);
  return {code, err};
}

void expect_bad(const std::pair<int, std::string>& got, const std::string& option) {
  EXPECT_EQ(got.first, 2) << option;
  EXPECT_NE(got.second.find(option), std::string::npos)
      << "'" << got.second << "' names no " << option;
}

TEST(BulkLoadOptions, ParsesAndNamesTheBadOption) {
  LoadOptions o;
  EXPECT_EQ(load_args({"--data-dir", "/tmp/x", "--keys", "1000000", "--first", "5", "--key-size",
                       "20", "--value-size", "100", "--batch", "10", "--compact"},
                      &o)
                .first,
            -1);
  EXPECT_EQ(o.data_dir, "/tmp/x");
  EXPECT_EQ(o.keys, 1000000u);
  EXPECT_EQ(o.first, 5u);
  EXPECT_EQ(o.key_size, 20u);
  EXPECT_EQ(o.value_size, 100u);
  EXPECT_EQ(o.batch, 10u);
  EXPECT_TRUE(o.compact);
  LoadOptions d;
  EXPECT_EQ(load_args({"--data-dir", "d", "--keys", "3"}, &d).first, -1);
  EXPECT_EQ(d.key_size, 16u);
  EXPECT_EQ(d.value_size, 512u);
  EXPECT_EQ(d.batch, 1000u);
  EXPECT_FALSE(d.compact);

  expect_bad(load_args({"--keys", "10"}), "--data-dir");
  expect_bad(load_args({"--data-dir", "d"}), "--keys");
  expect_bad(load_args({"--data-dir", "d", "--keys", "0"}), "--keys");
  expect_bad(load_args({"--data-dir", "d", "--keys", "ten"}), "--keys");
  expect_bad(load_args({"--data-dir", "d", "--keys", "-5"}), "--keys");
  expect_bad(load_args({"--data-dir", "d", "--keys", "10", "--key-size", "4"}), "--key-size");
  expect_bad(load_args({"--data-dir", "d", "--keys", "10", "--key-size", "251"}), "--key-size");
  expect_bad(load_args({"--data-dir", "d", "--keys", "1000", "--key-size", "6"}), "--key-size");
  EXPECT_EQ(load_args({"--data-dir", "d", "--keys", "100", "--key-size", "6"}).first, -1);
  expect_bad(load_args({"--data-dir", "d", "--keys", "10", "--first", "18446744073709551615"}),
             "--first");
  expect_bad(load_args({"--data-dir", "d", "--keys", "10", "--value-size", "99999999"}),
             "--value-size");
  expect_bad(load_args({"--data-dir", "d", "--keys", "10", "--batch", "0"}), "--batch");
  expect_bad(load_args({"--data-dir", "d", "--keys", "10", "--bogus"}), "--bogus");
  EXPECT_EQ(load_args({"--help"}).first, 0);
}

TEST(ReadBenchOptions, ParsesAndNamesTheBadOption) {
  ReadBenchOptions o;
  EXPECT_EQ(bench_args({"--data-dir", "d", "--keys", "1000000", "--duration", "5", "--warmup",
                        "2", "--batch", "8", "--out", "r.json"},
                       &o)
                .first,
            -1);
  EXPECT_EQ(o.duration, 5);
  EXPECT_EQ(o.warmup, 2);
  EXPECT_EQ(o.batch, 8u);
  EXPECT_EQ(o.out, "r.json");
  ReadBenchOptions ops_only;
  EXPECT_EQ(bench_args({"--data-dir", "d", "--keys", "10", "--ops", "100"}, &ops_only).first, -1);
  EXPECT_EQ(ops_only.duration, 0);  // --ops alone: no time limit
  EXPECT_EQ(ops_only.ops, 100u);
  ReadBenchOptions both;
  EXPECT_EQ(bench_args({"--data-dir", "d", "--keys", "10", "--ops", "100", "--duration", "1"},
                       &both)
                .first,
            -1);
  EXPECT_EQ(both.duration, 1);

  expect_bad(bench_args({"--keys", "10"}), "--data-dir");
  expect_bad(bench_args({"--data-dir", "d"}), "--keys");
  expect_bad(bench_args({"--data-dir", "d", "--keys", "10", "--duration", "0"}), "--duration");
  expect_bad(bench_args({"--data-dir", "d", "--keys", "10", "--duration", "-1"}), "--duration");
  expect_bad(bench_args({"--data-dir", "d", "--keys", "10", "--duration", "x"}), "--duration");
  expect_bad(bench_args({"--data-dir", "d", "--keys", "10", "--warmup", "-1"}), "--warmup");
  expect_bad(bench_args({"--data-dir", "d", "--keys", "10", "--batch", "0"}), "--batch");
  expect_bad(bench_args({"--data-dir", "d", "--keys", "10", "--batch", "5000"}), "--batch");
  expect_bad(bench_args({"--data-dir", "d", "--keys", "1000", "--key-size", "6"}), "--key-size");
  expect_bad(bench_args({"--data-dir", "d", "--keys", "10", "--bogus", "1"}), "--bogus");
  EXPECT_EQ(bench_args({"--help"}).first, 0);
}

}  // namespace
}  // namespace exo::db::tools
