// The /metrics page's pure parts: names and text generated from the counter lists, the RPC
// latency histogram, and what a request head asks for (metrics_text.h, rpc_latency.h,
// metrics_http.h). The page is also parsed by real Prometheus parsers in
// tests/unit/test_metrics_exposition.py.
#include <gtest/gtest.h>

#include <string>

#include "counter_list.h"
#include "metrics_http.h"
#include "metrics_text.h"
#include "rpc_latency.h"

namespace {

using exo::metrics::Route;
using exo::metrics::route_request;

TEST(MetricsText, NamesFollowPrometheusConventions) {
  const exo::CounterDesc hits{"hits", exo::CounterKind::COUNTER, "GETs answered from memory"};
  const exo::CounterDesc entries{"entries", exo::CounterKind::GAUGE, "keys in the map"};
  EXPECT_EQ(exo::metrics::exposed_name("cache", hits), "exo_cache_hits_total");
  EXPECT_EQ(exo::metrics::exposed_name("cache", entries), "exo_cache_entries");
}

TEST(MetricsText, CountersComeFromTheListWithTheirHelp) {
  static constexpr exo::CounterDesc kList[] = {EXO_CACHE_DP_COUNTERS(EXO_COUNTER_DESC)
                                                   EXO_CACHE_GAUGES(EXO_COUNTER_DESC)};
  std::string out;
  exo::metrics::append_counters(out, "cache", kList,
                                {{"hits", 7}, {"entries", 3}, {"not_in_the_list", 99}});
  EXPECT_EQ(out,
            "# HELP exo_cache_hits_total GETs answered from memory\n"
            "# TYPE exo_cache_hits_total counter\n"
            "exo_cache_hits_total 7\n"
            "# HELP exo_cache_entries keys in the map\n"
            "# TYPE exo_cache_entries gauge\n"
            "exo_cache_entries 3\n");
}

TEST(MetricsText, EscapesHelpAndLabelValues) {
  EXPECT_EQ(exo::metrics::escape_help("a\\b\nc \"d\""), "a\\\\b\\nc \"d\"");
  EXPECT_EQ(exo::metrics::escape_label_value("a\\b\nc \"d\""), "a\\\\b\\nc \\\"d\\\"");
  EXPECT_EQ(exo::metrics::format_double(0.00025), "0.00025");
  EXPECT_EQ(exo::metrics::format_double(10), "10");
  EXPECT_EQ(exo::metrics::format_double(1.0 / 0.0), "+Inf");
}

TEST(RpcLatency, BucketsAreCumulativeAndEndInInf) {
  exo::metrics::RpcLatency h;
  std::string empty;
  h.append(empty);
  EXPECT_EQ(empty, "") << "no family before the first RPC";
  h.observe("exo.CacheNode/Stats", "OK", 0.0003);
  h.observe("exo.CacheNode/Stats", "OK", 0.0003);
  h.observe("exo.CacheNode/Stats", "OK", 42.0);  // above every bound: only in +Inf
  h.observe("exo.CacheNode/Reset", "PERMISSION_DENIED", 0.001);  // exactly a bound: le is <=
  std::string out;
  h.append(out);
  const std::string s = "exo_rpc_server_seconds_bucket{method=\"exo.CacheNode/Stats\",code=\"OK\",";
  EXPECT_NE(out.find(s + "le=\"0.00025\"} 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find(s + "le=\"0.0005\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find(s + "le=\"10.0\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find(s + "le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("exo_rpc_server_seconds_count{method=\"exo.CacheNode/Stats\",code=\"OK\"} 3\n"),
            std::string::npos);
  EXPECT_NE(out.find("{method=\"exo.CacheNode/Reset\",code=\"PERMISSION_DENIED\",le=\"0.001\"} 1\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("# TYPE exo_rpc_server_seconds histogram\n"),
            out.rfind("# TYPE exo_rpc_server_seconds histogram\n"))
      << "one TYPE line for the whole family";
}

TEST(RpcLatency, SeriesAreBoundedWhateverMethodNamesArrive) {
  exo::metrics::RpcLatency h;
  for (size_t i = 0; i < exo::metrics::kMaxRpcSeries + 50; ++i)
    h.observe("made.Up/M" + std::to_string(i), "UNIMPLEMENTED", 0.001);
  std::string out;
  h.append(out);
  size_t count_lines = 0;
  for (size_t p = 0; (p = out.find("exo_rpc_server_seconds_count{", p)) != std::string::npos; ++p) ++count_lines;
  EXPECT_EQ(count_lines, exo::metrics::kMaxRpcSeries + 1);  // + method="other"
  EXPECT_NE(out.find("_count{method=\"other\",code=\"UNIMPLEMENTED\"} 50\n"), std::string::npos);
}

TEST(RouteRequest, GetMetricsOnly) {
  EXPECT_EQ(route_request("GET /metrics HTTP/1.1\r\nHost: x:9100\r\nAccept: */*\r\n\r\n"), Route::kMetrics);
  EXPECT_EQ(route_request("GET /metrics HTTP/1.0\r\n\r\n"), Route::kMetrics);
  EXPECT_EQ(route_request("GET /metrics?name[]=x HTTP/1.1\r\n\r\n"), Route::kMetrics);
  EXPECT_EQ(route_request("GET / HTTP/1.1\r\n\r\n"), Route::kNotFound);
  EXPECT_EQ(route_request("GET /metricsx HTTP/1.1\r\n\r\n"), Route::kNotFound);
  EXPECT_EQ(route_request("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), Route::kNotFound);
  EXPECT_EQ(route_request("HEAD /metrics HTTP/1.1\r\n\r\n"), Route::kNotFound);
}

TEST(RouteRequest, WaitsForTheWholeHead) {
  EXPECT_EQ(route_request(""), Route::kIncomplete);
  EXPECT_EQ(route_request("GET /met"), Route::kIncomplete);
  EXPECT_EQ(route_request("GET /metrics HTTP/1.1\r\nHost: a"), Route::kIncomplete);
  EXPECT_EQ(route_request("GET /metrics HTTP/1.1\r\n\r"), Route::kIncomplete);
}

TEST(RouteRequest, MalformedIsRefusedAsSoonAsVisible) {
  EXPECT_EQ(route_request("GARBAGE\r\n"), Route::kBadRequest);
  EXPECT_EQ(route_request("GET /metrics\r\n\r\n"), Route::kBadRequest);            // no version
  EXPECT_EQ(route_request("GET /metrics HTTP/2.0\r\n\r\n"), Route::kBadRequest);
  EXPECT_EQ(route_request("GET  /metrics HTTP/1.1\r\n\r\n"), Route::kBadRequest);  // two spaces
  EXPECT_EQ(route_request("get /metrics HTTP/1.1\r\n\r\n"), Route::kBadRequest);
  EXPECT_EQ(route_request("GET metrics HTTP/1.1\r\n\r\n"), Route::kBadRequest);
  EXPECT_EQ(route_request("GET /metrics HTTP/1.1\nHost: x\n\n"), Route::kBadRequest);  // bare LF
  EXPECT_EQ(route_request("GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n"), Route::kBadRequest);
  EXPECT_EQ(route_request("GET /metrics HTTP/1.1\r\n: empty name\r\n\r\n"), Route::kBadRequest);
  EXPECT_EQ(route_request(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)),
            Route::kBadRequest) << "a TLS ClientHello on the plain HTTP port";
  static constexpr char kNul[] = "GET /metrics HTTP/1.1\r\nX: a\0b\r\n\r\n";
  EXPECT_EQ(route_request(std::string(kNul, sizeof kNul - 1)), Route::kBadRequest);
}

TEST(RouteRequest, SizeIsBounded) {
  const std::string big = "GET /metrics HTTP/1.1\r\nX: " + std::string(exo::metrics::kMaxRequestBytes, 'a');
  EXPECT_EQ(route_request(big), Route::kBadRequest);
  const std::string complete_but_big = big + "\r\n\r\n";
  EXPECT_EQ(route_request(complete_but_big), Route::kBadRequest);
  EXPECT_EQ(route_request("GET /metrics HTTP/1.1\r\nX: aaaa\r\n\r\n", 20), Route::kBadRequest);
}

TEST(ParseIpv4Port, AcceptsOnlyIpv4AndAPort) {
  uint32_t ip = 0;
  uint16_t port = 0;
  EXPECT_TRUE(exo::metrics::parse_ipv4_port("172.31.0.11:9180", &ip, &port));
  EXPECT_EQ(port, 9180);
  EXPECT_TRUE(exo::metrics::parse_ipv4_port("127.0.0.1:0", &ip, &port));
  for (const char* bad : {"", "9180", ":9180", "172.31.0.11", "172.31.0.11:", "172.31.0.11:65536",
                          "host:9180", "::1:9180", "172.31.0.11:91a0", "172.31.0.11:-1"})
    EXPECT_FALSE(exo::metrics::parse_ipv4_port(bad, &ip, &port)) << bad;
}

}  // namespace
