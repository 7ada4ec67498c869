// exo-metrics-sample: serves the /metrics page every C++ program serves, for the tests that
// check it with parsers we did not write (tests/unit/test_metrics_exposition.py: Python's
// prometheus_client and `promtool check metrics`) and the Grafana dashboard's metric names.
// Not installed. Every counter of the chosen programs' lists gets a distinct value (its position
// + 1) and the RPC histogram a few observations, so no family is left out of the page.
//
//   exo-metrics-sample [cache|db|proxy]...   (default: all three, one listener each)
// Prints "<program> <port>" per listener on 127.0.0.1, then serves until stdin closes.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "counter_list.h"
#include "metrics_http.h"
#include "rpc_latency.h"

namespace {

std::vector<exo::CounterDesc> list_of(const std::string& program) {
  if (program == "cache")
    return {EXO_CACHE_DP_COUNTERS(EXO_COUNTER_DESC) EXO_CACHE_CP_COUNTERS(EXO_COUNTER_DESC)
                EXO_CACHE_GAUGES(EXO_COUNTER_DESC)};
  if (program == "db") return {EXO_DB_COUNTERS(EXO_COUNTER_DESC) EXO_DB_GAUGES(EXO_COUNTER_DESC)};
  if (program == "proxy") return {EXO_PROXY_COUNTERS(EXO_COUNTER_DESC)};
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> programs(argv + 1, argv + argc);
  if (programs.empty()) programs = {"cache", "db", "proxy"};
  auto& rpc = exo::metrics::rpc_latency();
  rpc.observe("exo.CacheNode/Stats", "OK", 0.0004);
  rpc.observe("exo.CacheNode/Prepare", "PERMISSION_DENIED", 0.002);
  rpc.observe("exo.DbNode/Fetch", "OK", 0.03);
  std::vector<std::unique_ptr<exo::metrics::MetricsHttpServer>> servers;
  for (const std::string& p : programs) {
    std::vector<exo::CounterDesc> descs = list_of(p);
    if (descs.empty()) {
      std::fprintf(stderr, "exo-metrics-sample: unknown program '%s' (cache, db or proxy)\n", p.c_str());
      return 2;
    }
    exo::metrics::NamedValues values;
    for (size_t i = 0; i < descs.size(); ++i) values.emplace_back(descs[i].name, i + 1);
    servers.push_back(std::make_unique<exo::metrics::MetricsHttpServer>());
    const std::string err =
        servers.back()->start("127.0.0.1:0", {p, descs, [values] { return values; }});
    if (!err.empty()) {
      std::fprintf(stderr, "exo-metrics-sample: %s\n", err.c_str());
      return 1;
    }
    std::printf("%s %u\n", p.c_str(), servers.back()->port());
  }
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
