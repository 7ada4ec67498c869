// exo-db-load: load a db node's data dir before its first start (and the data set of
// `make bench`). See tools/bulk_load.h and db-node/README.md.
//
//   exo-db-load --data-dir DIR --keys N [--first 0] [--key-size 16] [--value-size 512]
//               [--batch 1000] [--compact]
//
// Opens DIR with RocksStore::open (the node's RocksDB options), writes keys "key:" + zero-padded
// id with values derived from the id (tools/dataset.h) in WriteBatches, flushes, optionally
// compacts. stderr: a progress line each second and the elapsed time; stdout: a JSON summary.
// Exit 0 done; 2 bad option (named on stderr); 1 RocksDB error (its message on stderr).
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bulk_load.h"
#include "store.h"

using exo::db::RocksStore;
using namespace exo::db::tools;

int main(int argc, char** argv) {
  LoadOptions o;
  std::string err;
  const int code = parse_load_options(argc, argv, &o, &err);
  if (code >= 0) {
    if (code != 0) std::fprintf(stderr, "exo-db-load: %s\n", err.c_str());
    return code;
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<RocksStore> store =
      RocksStore::open(o.data_dir, /*sync_writes=*/false, &err);  // writes are kRelaxed anyway
  if (!store) {
    std::fprintf(stderr, "exo-db-load: %s\n", err.c_str());
    return 1;
  }

  double next_report = 1.0;
  LoadStats st;
  const exo::db::StoreResult r = bulk_load(*store, o, &st, [&](const LoadStats& s) {
    if (s.load_seconds < next_report) return;
    next_report = s.load_seconds + 1.0;
    std::fprintf(stderr, "exo-db-load: %llu / %llu keys (%.1f%%), %.0f keys/s, %.1f MB/s\n",
                 static_cast<unsigned long long>(s.keys), static_cast<unsigned long long>(o.keys),
                 100.0 * static_cast<double>(s.keys) / static_cast<double>(o.keys),
                 static_cast<double>(s.keys) / s.load_seconds,
                 static_cast<double>(s.bytes) / s.load_seconds / 1e6);
  });
  if (!r.ok()) {
    std::fprintf(stderr, "exo-db-load: after %llu keys: %s\n",
                 static_cast<unsigned long long>(st.keys), r.error.c_str());
    return 1;
  }
  std::string levels, sst_bytes;
  store->property("rocksdb.levelstats", &levels);
  store->property("rocksdb.total-sst-files-size", &sst_bytes);
  const exo::db::StoreResult c = store->close();
  if (!c.ok()) {
    std::fprintf(stderr, "exo-db-load: %s\n", c.error.c_str());
    return 1;
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::fprintf(stderr,
               "exo-db-load: %llu keys (%.1f MB) in %.2f s: writes %.2f s (%.0f keys/s), "
               "%s %.2f s\n",
               static_cast<unsigned long long>(st.keys), static_cast<double>(st.bytes) / 1e6, total,
               st.load_seconds, static_cast<double>(st.keys) / st.load_seconds,
               o.compact ? "flush + compaction" : "flush", st.flush_seconds);
  if (!levels.empty()) std::fprintf(stderr, "%s", levels.c_str());

  nlohmann::json j;
  j["tool"] = "exo-db-load";
  j["data_dir"] = o.data_dir;
  j["keys"] = st.keys;
  j["first"] = o.first;
  j["key_size"] = o.key_size;
  j["value_size"] = o.value_size;
  j["batch"] = o.batch;
  j["bytes"] = st.bytes;
  j["compact"] = o.compact;
  j["seconds"] = total;
  j["write_seconds"] = st.load_seconds;
  j[o.compact ? "flush_compact_seconds" : "flush_seconds"] = st.flush_seconds;
  j["keys_per_s"] = static_cast<double>(st.keys) / st.load_seconds;
  if (!sst_bytes.empty()) j["sst_bytes"] = std::stoull(sst_bytes);
  std::printf("%s\n", j.dump(2).c_str());
  return std::fflush(stdout) == 0 ? 0 : 1;
}
