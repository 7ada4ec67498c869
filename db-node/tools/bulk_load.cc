#include "bulk_load.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <vector>

#include "dataset.h"
#include "dataset_cli.h"
#include "wire.h"

namespace exo::db::tools {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr size_t kMaxValueSize = size_t{16} << 20;
constexpr size_t kMaxBatch = 1'000'000;

}  // namespace

std::string check_dataset_options(uint64_t keys, uint64_t first, size_t key_size,
                                  size_t value_size) {
  if (keys == 0) return "--keys: must be at least 1";
  if (key_size < 5 || key_size > wire::kMaxKeyLen)
    return "--key-size: must be in 5.." + std::to_string(wire::kMaxKeyLen) +
           " (\"key:\" + at least one digit; the wire format's longest key)";
  if (first > UINT64_MAX - (keys - 1)) return "--first: --first + --keys overflows";
  const uint64_t last = first + (keys - 1);
  if (decimal_digits(last) > key_size - 4)
    return "--key-size: " + std::to_string(key_size) + " bytes leave " +
           std::to_string(key_size - 4) + " digits, too few for id " + std::to_string(last);
  if (value_size > kMaxValueSize)
    return "--value-size: at most " + std::to_string(kMaxValueSize) + " bytes";
  return "";
}

std::string check_load_options(const LoadOptions& o) {
  if (o.data_dir.empty()) return "--data-dir: must not be empty";
  std::string bad = check_dataset_options(o.keys, o.first, o.key_size, o.value_size);
  if (!bad.empty()) return bad;
  if (o.batch == 0 || o.batch > kMaxBatch)
    return "--batch: must be in 1.." + std::to_string(kMaxBatch);
  return "";
}

int parse_load_options(int argc, const char* const* argv, LoadOptions* o, std::string* error) {
  CLI::App app{
      "exo-db-load: load a db node's data dir with the benchmark data set before its first "
      "start (keys as exo-loadgen sends them, values derived from the id)"};
  add_dataset_options(app, {&o->data_dir, &o->keys, &o->first, &o->key_size, &o->value_size},
                      "the node's data_dir (created if missing)");
  app.add_option("--batch", o->batch, "operations per WriteBatch")
      ->check(kUnsigned)
      ->capture_default_str();
  app.add_flag("--compact", o->compact, "full compaction afterwards (deterministic LSM shape)");
  if (const int rc = parse_cli(app, argc, argv, error); rc >= 0) return rc;
  *error = check_load_options(*o);
  return error->empty() ? -1 : 2;
}

StoreResult bulk_load(RocksStore& store, const LoadOptions& o, LoadStats* stats,
                      const std::function<void(const LoadStats&)>& progress) {
  *stats = LoadStats{};
  const std::string bad = check_load_options(o);
  if (!bad.empty()) return StoreResult::Error(bad);

  // One buffer per batch holding every key and value back to back; the ops point into it.
  const size_t rec = o.key_size + o.value_size;
  std::string buf;
  std::string value;
  std::vector<StoreOp> ops;
  ops.reserve(o.batch);

  const auto t0 = Clock::now();
  const uint64_t end = o.first + (o.keys - 1);  // inclusive: first + keys may overflow
  uint64_t id = o.first;
  for (bool more = true; more;) {
    const uint64_t left = end - id + 1;  // >= 1 (may wrap to 0 only for the full 2^64 range)
    const size_t n = left != 0 && left < o.batch ? static_cast<size_t>(left) : o.batch;
    buf.resize(n * rec);
    ops.clear();
    for (size_t i = 0; i < n; ++i, ++id) {
      char* p = buf.data() + i * rec;
      const std::string key = dataset_key(id, o.key_size);
      std::memcpy(p, key.data(), o.key_size);
      dataset_value(id, o.value_size, &value);
      if (o.value_size) std::memcpy(p + o.key_size, value.data(), o.value_size);
      const auto* b = reinterpret_cast<const uint8_t*>(p);
      ops.push_back(
          StoreOp::put(Cf::kData, Bytes(b, o.key_size), Bytes(b + o.key_size, o.value_size)));
      if (id == end) more = false;
    }
    const StoreResult r = store.write(ops, Durability::kRelaxed);
    if (!r.ok()) {
      stats->load_seconds = seconds_since(t0);
      return r;
    }
    stats->keys += n;
    stats->bytes += n * rec;
    if (progress) {
      stats->load_seconds = seconds_since(t0);
      progress(*stats);
    }
  }
  stats->load_seconds = seconds_since(t0);

  const auto t1 = Clock::now();
  const StoreResult r = o.compact ? store.compact() : store.flush();
  stats->flush_seconds = seconds_since(t1);
  return r;
}

}  // namespace exo::db::tools
