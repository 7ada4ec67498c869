#include "loadgen/series.h"

#include <cmath>

#include "wire.h"

namespace exo::loadgen {
namespace {

constexpr uint64_t kNsPerSec = 1'000'000'000ULL;

// Single-writer increment: no read-modify-write instruction needed.
void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

double us(double ns) { return std::round(ns / 100.0) / 10.0; }  // 0.1 us resolution

}  // namespace

Series::Series(uint64_t start_ns, uint64_t bins, uint64_t bin_ns)
    : start_ns_(start_ns), bin_ns_(bin_ns < 1 ? kNsPerSec : bin_ns),
      seconds_(std::make_unique<Second[]>(bins < 1 ? 1 : bins)), n_(bins < 1 ? 1 : bins) {}

uint64_t Series::second_of(uint64_t ns) const {
  const uint64_t t = ns > start_ns_ ? (ns - start_ns_) / bin_ns_ : 0;
  return t < n_ ? t : n_ - 1;
}

void Series::on_sent(uint64_t send_ns, uint64_t n) {
  bump(seconds_[second_of(send_ns)].sent, n);
  bump(sent_, n);
}

void Series::on_reply(uint64_t send_ns, uint64_t recv_ns, uint8_t status, uint8_t flags) {
  Second& s = seconds_[second_of(send_ns)];
  bump(s.answered);
  if (flags & wire::kFromCache) bump(s.from_cache);
  if (status == wire::kNotFound) bump(s.not_found);
  else if (status != wire::kOk) bump(s.errors);
  if (!s.latency) s.latency = std::make_unique<LogHistogram>();
  s.latency->record(recv_ns > send_ns ? recv_ns - send_ns : 0);
  bump(seconds_[second_of(recv_ns)].rx);
  bump(answered_);
}

std::vector<SecondRow> Series::rows() const {
  uint64_t last = 0;
  bool any = false;
  for (uint64_t t = 0; t < n_; ++t) {
    if (seconds_[t].sent.load() != 0 || seconds_[t].rx.load() != 0) {
      last = t;
      any = true;
    }
  }
  std::vector<SecondRow> out;
  if (!any) return out;
  for (uint64_t t = 0; t <= last; ++t) {
    const Second& s = seconds_[t];
    SecondRow r;
    r.t = static_cast<double>(t * bin_ns_) / 1e9;
    r.sent = s.sent.load();
    r.answered = s.answered.load();
    r.lost = r.sent > r.answered ? r.sent - r.answered : 0;
    r.from_cache = s.from_cache.load();
    r.not_found = s.not_found.load();
    r.errors = s.errors.load();
    r.rx = s.rx.load();
    if (s.latency && s.latency->count() > 0) {
      r.p50_us = us(s.latency->percentile(0.5));
      r.p90_us = us(s.latency->percentile(0.9));
      r.p99_us = us(s.latency->percentile(0.99));
      r.p999_us = us(s.latency->percentile(0.999));
    }
    out.push_back(r);
  }
  return out;
}

LogHistogram Series::overall() const {
  LogHistogram all;
  for (uint64_t t = 0; t < n_; ++t)
    if (seconds_[t].latency) all.merge(*seconds_[t].latency);
  return all;
}

}  // namespace exo::loadgen
