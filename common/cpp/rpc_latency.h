// Latency histograms of the control RPCs a program serves, exposed as the Prometheus histogram
// `exo_rpc_server_seconds{method, code}`: the time from the call's start on the server to its
// status going out, by gRPC method ("exo.CacheNode/Prepare") and status code name ("OK",
// "PERMISSION_DENIED", ...). Filled by the gRPC interceptor of rpc_metrics.h, rendered by the
// /metrics page (metrics_http.h). No gRPC dependency here, so it links into every program.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace exo::metrics {

inline constexpr std::string_view kRpcHistogramName = "exo_rpc_server_seconds";
// Upper bounds (seconds): from a local Stats (~100 us) to a rule change that waits for the
// switch's rate limit (seconds). The same in the controller (exo_controller/metrics.py), and
// written the same way: Prometheus keeps `le` as a string, so a sum over programs by `le` needs
// "1.0" from both (Python's prometheus_client writes floats as Python's repr does).
struct Bucket {
  double bound;
  const char* le;
};
inline constexpr std::array<Bucket, 16> kRpcBuckets = {{{0.0001, "0.0001"}, {0.00025, "0.00025"},
                                                        {0.0005, "0.0005"}, {0.001, "0.001"},
                                                        {0.0025, "0.0025"}, {0.005, "0.005"},
                                                        {0.01, "0.01"},     {0.025, "0.025"},
                                                        {0.05, "0.05"},     {0.1, "0.1"},
                                                        {0.25, "0.25"},     {0.5, "0.5"},
                                                        {1, "1.0"},         {2.5, "2.5"},
                                                        {5, "5.0"},         {10, "10.0"}}};
// At most this many (method, code) series; further ones are counted under method="other", so a
// caller inventing method names cannot grow the page without bound.
inline constexpr size_t kMaxRpcSeries = 256;

class RpcLatency {
 public:
  void observe(std::string_view method, std::string_view code, double seconds);
  // Appends the histogram family (nothing while no RPC was observed).
  void append(std::string& out) const;

 private:
  struct Series {
    std::array<uint64_t, kRpcBuckets.size()> buckets{};  // not cumulative: one count per bucket
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Series> series_;  // (method, code)
};

// The process's one instance: every gRPC server of the process records into it.
RpcLatency& rpc_latency();

}  // namespace exo::metrics
