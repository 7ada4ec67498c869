#include "rpc_latency.h"

#include "metrics_text.h"

namespace exo::metrics {

void RpcLatency::observe(std::string_view method, std::string_view code, double seconds) {
  if (!(seconds >= 0)) seconds = 0;  // NaN or a clock oddity: count it in the first bucket
  size_t b = 0;  // the first bucket whose bound is >= seconds (le: less or equal)
  while (b < kRpcBuckets.size() && kRpcBuckets[b].bound < seconds) ++b;
  std::lock_guard lock(mu_);
  auto key = std::make_pair(std::string(method), std::string(code));
  auto it = series_.find(key);
  if (it == series_.end()) {
    if (series_.size() >= kMaxRpcSeries) key.first = "other";
    it = series_.try_emplace(std::move(key)).first;
  }
  Series& s = it->second;
  if (b < s.buckets.size()) ++s.buckets[b];  // b == size: above the last bound, only in +Inf
  ++s.count;
  s.sum += seconds;
}

void RpcLatency::append(std::string& out) const {
  std::lock_guard lock(mu_);
  if (series_.empty()) return;
  const std::string name(kRpcHistogramName);
  out += "# HELP " + name +
         " Control RPCs served: seconds from the call's start to its status, by method and status "
         "code\n";
  out += "# TYPE " + name + " histogram\n";
  for (const auto& [key, s] : series_) {
    const std::string labels =
        "method=\"" + escape_label_value(key.first) + "\",code=\"" + escape_label_value(key.second) + "\"";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kRpcBuckets.size(); ++i) {
      cumulative += s.buckets[i];
      out += name + "_bucket{" + labels + ",le=\"" + kRpcBuckets[i].le + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(s.count) + "\n";
    out += name + "_sum{" + labels + "} " + format_double(s.sum) + "\n";
    out += name + "_count{" + labels + "} " + std::to_string(s.count) + "\n";
  }
}

RpcLatency& rpc_latency() {
  static RpcLatency instance;
  return instance;
}

}  // namespace exo::metrics
