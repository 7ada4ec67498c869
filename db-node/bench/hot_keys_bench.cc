// hot_keys_bench: what hot-key detection costs a db node, and how big a REPORT is
// (docs/cache-fill.md, 1). Not a test: it prints figures and asserts nothing.
//
//   hot_keys_bench [--out results.json] [--requests N]
//
// For k (= hot_keys.top_k = report_keys) in {100, 1000, 10000}, on a Zipf(0.99) stream over
// 1e6 distinct 16-byte keys (drawn and written out up front, so the draw is not timed):
//   update ns   one Space-Saving offer (what a sampled GET pays inside the lock)
//   req ns      per GET through the packet thread's path: sampler + (if sampled) clock read,
//               lock and offer; at the default sample rate 1/16 and at 1 (no sampling)
//   hottest us  building the rate list of a report, hottest(k), over 4 filled segments
//   report B    ReportRequest::ByteSizeLong() with k keys of 16 bytes
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "../tests/zipf.h"
#include "hot_keys/hot_key_detector.h"
#include "hot_keys/sampler.h"
#include "hot_keys/space_saving.h"
#include "reporter.h"

using namespace exo::db;
using Clock = std::chrono::steady_clock;
using exo::steady_ms;

namespace {

constexpr size_t kDistinct = 1'000'000;
constexpr size_t kKeyLen = 16;
constexpr double kZipfS = 0.99;
constexpr double kDefaultRate = 1.0 / 16;

// The request stream as the packet thread sees it: each request's key bytes in order. Written
// out up front (32 MB for 2e6 requests), so a measurement reads keys sequentially, as a handler
// reads the key of the frame it just received, instead of paying a cache miss into a 16 MB
// key table that no real request pays.
class Stream {
 public:
  // Key of rank r: "k" + r in 15 decimal digits, so every key is exactly 16 bytes.
  Stream(const std::vector<uint32_t>& ranks) : buf_(ranks.size() * kKeyLen) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      char* p = &buf_[i * kKeyLen];
      p[0] = 'k';
      size_t v = ranks[i];
      for (size_t d = kKeyLen - 1; d >= 1; --d, v /= 10) p[d] = static_cast<char>('0' + v % 10);
    }
  }
  size_t size() const { return buf_.size() / kKeyLen; }
  std::string_view operator[](size_t i) const { return {&buf_[i * kKeyLen], kKeyLen}; }

 private:
  std::vector<char> buf_;
};

double ns_since(Clock::time_point t0) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

struct Row {
  size_t k = 0;
  double update_ns = 0, req_ns_sampled = 0, req_ns_unsampled = 0, hottest_us = 0;
  size_t report_bytes = 0;
};

double bench_update(size_t k, const Stream& stream) {
  SpaceSaving ss(k);
  const size_t warm = stream.size() / 10;  // fill the summary so evictions are in steady state
  for (size_t i = 0; i < warm; ++i) ss.offer(stream[i]);
  const auto t0 = Clock::now();
  for (size_t i = warm; i < stream.size(); ++i) ss.offer(stream[i]);
  return ns_since(t0) / static_cast<double>(stream.size() - warm);
}

// The request handler's path, minus the store: sample, then observe with a clock read.
double bench_requests(size_t k, double rate, const Stream& stream) {
  exo::HotKeysConfig cfg;
  cfg.top_k = static_cast<uint32_t>(k);
  cfg.sample_rate = rate;
  HotKeyDetector det(cfg, steady_ms());
  Sampler sampler(rate, 12345);
  const auto t0 = Clock::now();
  for (size_t i = 0; i < stream.size(); ++i)
    if (sampler.sample()) det.observe(stream[i], steady_ms());
  const double ns = ns_since(t0) / static_cast<double>(stream.size());
  if (det.sampled(steady_ms()) == 0) std::fprintf(stderr, "warning: nothing sampled\n");
  return ns;
}

// A detector whose 4 segments are all filled (fake clock), then hottest(k) and the REPORT.
void bench_report(Row& row, const Stream& stream) {
  exo::HotKeysConfig cfg;  // defaults: 4 segments of 1000 ms
  cfg.top_k = static_cast<uint32_t>(row.k);
  cfg.sample_rate = kDefaultRate;
  // The size of a REPORT of k keys: with the default confidence bound, keys sampled only once
  // are left out and the report would hold fewer than k (how many depends on the stream).
  cfg.confidence_z = 0;
  const uint64_t t0 = 1'000'000;
  const uint64_t span = uint64_t{cfg.segments} * cfg.segment_ms;
  HotKeyDetector det(cfg, t0);
  for (size_t i = 0; i < stream.size(); ++i) det.observe(stream[i], t0 + i * span / stream.size());
  const uint64_t now = t0 + span - cfg.segment_ms / 2;  // current segment half full

  size_t rounds = 0;
  const auto start = Clock::now();
  do {
    const auto hot = det.hottest(row.k, now);
    if (hot.empty()) std::fprintf(stderr, "warning: empty hottest()\n");
    ++rounds;
  } while (rounds < 3 || (rounds < 200 && ns_since(start) < 2e8));
  row.hottest_us = ns_since(start) / static_cast<double>(rounds) / 1000.0;

  // Realistic magnitudes for the scalar fields (varints grow with the value).
  const exo::ReportRequest r = build_report("db0", 123456.7, det, row.k, 1'000'000, now);
  if (static_cast<size_t>(r.keys_size()) != row.k)
    std::fprintf(stderr, "warning: k=%zu report has %d keys\n", row.k, r.keys_size());
  row.report_bytes = r.ByteSizeLong();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hot-key detection cost and REPORT size"};
  std::string out;
  size_t requests = 2'000'000;
  app.add_option("--out", out, "also write the figures as JSON to this file");
  app.add_option("--requests", requests, "stream length per measurement")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::vector<uint32_t> ranks(requests);
  {
    exo::db::testing::Zipf zipf(kDistinct, kZipfS, 2024);
    for (auto& r : ranks) r = zipf.next();
  }
  const Stream stream(ranks);

  std::vector<Row> rows;
  for (size_t k : {size_t{100}, size_t{1000}, size_t{10000}}) {
    Row row;
    row.k = k;
    row.update_ns = bench_update(k, stream);
    row.req_ns_sampled = bench_requests(k, kDefaultRate, stream);
    row.req_ns_unsampled = bench_requests(k, 1.0, stream);
    bench_report(row, stream);
    rows.push_back(row);
  }

  std::printf("hot_keys_bench: Zipf(%.2f) over %zu distinct %zu-byte keys, %zu requests per run\n",
              kZipfS, kDistinct, kKeyLen, requests);
  std::printf("%7s %11s %16s %12s %14s %14s\n", "k", "update ns", "req ns p=1/16", "req ns p=1",
              "hottest(k) us", "REPORT bytes");
  for (const Row& r : rows)
    std::printf("%7zu %11.1f %16.1f %12.1f %14.1f %14zu\n", r.k, r.update_ns, r.req_ns_sampled,
                r.req_ns_unsampled, r.hottest_us, r.report_bytes);

  if (!out.empty()) {
    nlohmann::json j;
    j["benchmark"] = "hot_keys_bench";
    j["zipf_s"] = kZipfS;
    j["distinct_keys"] = kDistinct;
    j["key_bytes"] = kKeyLen;
    j["requests"] = requests;
    j["default_sample_rate"] = kDefaultRate;
    for (const Row& r : rows)
      j["rows"].push_back({{"k", r.k},
                           {"update_ns", r.update_ns},
                           {"request_ns_sample_1_16", r.req_ns_sampled},
                           {"request_ns_sample_1", r.req_ns_unsampled},
                           {"hottest_us", r.hottest_us},
                           {"report_bytes", r.report_bytes}});
    std::ofstream f(out);
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "hot_keys_bench: cannot write %s\n", out.c_str());
      return 1;
    }
  }
  return 0;
}
