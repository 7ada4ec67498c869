// The /metrics listener over real sockets on 127.0.0.1: the page, 404 and 400 (counted), a
// silent or slow peer that cannot hold the port for long, and start/stop errors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "counter_list.h"
#include "metrics_http.h"

namespace {

using exo::metrics::MetricsHttpServer;
using exo::metrics::Source;

Source sample_source() {
  return {"cache",
          {EXO_CACHE_DP_COUNTERS(EXO_COUNTER_DESC) EXO_CACHE_GAUGES(EXO_COUNTER_DESC)},
          [] { return exo::metrics::NamedValues{{"gets", 10}, {"hits", 4}, {"entries", 2}}; }};
}

int connect_to(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request`, reads until the server closes (5 s at most).
std::string exchange(uint16_t port, const std::string& request) {
  const int fd = connect_to(port);
  if (fd < 0) return "<connect failed>";
  if (!request.empty() && send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    close(fd);
    return "<send failed>";
  }
  std::string got;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return got;
}

TEST(MetricsHttp, ServesThePageAndCountsWhatItRefuses) {
  MetricsHttpServer server;
  ASSERT_EQ(server.start("127.0.0.1:0", sample_source()), "");
  ASSERT_NE(server.port(), 0);

  const std::string ok = exchange(server.port(), "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos);
  EXPECT_NE(ok.find("\nexo_cache_hits_total 4\n"), std::string::npos) << ok;
  EXPECT_NE(ok.find("\nexo_cache_entries 2\n"), std::string::npos) << ok;
  const size_t body = ok.find("\r\n\r\n") + 4;
  EXPECT_NE(ok.find("Content-Length: " + std::to_string(ok.size() - body) + "\r\n"), std::string::npos);

  EXPECT_EQ(exchange(server.port(), "GET /other HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_EQ(exchange(server.port(), "HELLO\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(exchange(server.port(), std::string(20000, 'A')).rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(exchange(server.port(), std::string("\x16\x03\x01\x00\x10", 5)).rfind("HTTP/1.1 400 ", 0), 0u);

  EXPECT_EQ(server.counters().metrics_requests.load(), 1u);
  EXPECT_EQ(server.counters().metrics_not_found.load(), 1u);
  EXPECT_EQ(server.counters().metrics_bad_requests.load(), 3u);
  // ... and the page shows them (this request included).
  const std::string again = exchange(server.port(), "GET /metrics HTTP/1.0\r\n\r\n");
  EXPECT_NE(again.find("\nexo_cache_metrics_bad_requests_total 3\n"), std::string::npos) << again;
  EXPECT_NE(again.find("\nexo_cache_metrics_requests_total 2\n"), std::string::npos) << again;
}

TEST(MetricsHttp, ASilentPeerHoldsThePortForAtMostTheTimeout) {
  MetricsHttpServer server;
  ASSERT_EQ(server.start("127.0.0.1:0", sample_source()), "");
  const int silent = connect_to(server.port());  // connects, never sends
  ASSERT_GE(silent, 0);
  const int partial = connect_to(server.port());  // sends half a request, then nothing
  ASSERT_GE(partial, 0);
  ASSERT_GT(send(partial, "GET /metr", 9, MSG_NOSIGNAL), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string ok = exchange(server.port(), "GET /metrics HTTP/1.1\r\n\r\n");
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_LT(waited, 3 * exo::metrics::kConnectionTimeout);
  close(silent);
  close(partial);
  EXPECT_EQ(server.counters().metrics_bad_requests.load(), 1u) << "the unfinished request; not the bare connect";
}

TEST(MetricsHttp, StartErrorsNameTheAddressAndStopIsIdempotent) {
  MetricsHttpServer none;
  EXPECT_EQ(none.start("", sample_source()), "") << "\"\" is the config's no listener";
  EXPECT_EQ(none.port(), 0);

  MetricsHttpServer a;
  ASSERT_EQ(a.start("127.0.0.1:0", sample_source()), "");
  MetricsHttpServer b;
  const std::string busy = "127.0.0.1:" + std::to_string(a.port());
  EXPECT_NE(b.start(busy, sample_source()).find("cannot listen on " + busy), std::string::npos);
  EXPECT_NE(b.start("localhost:9100", sample_source()).find("want <IPv4>:<port>"), std::string::npos);
  a.stop();
  a.stop();
  EXPECT_EQ(a.port(), 0);
  EXPECT_EQ(b.start(busy, sample_source()), "") << "the port is free again after stop()";
}

}  // namespace
