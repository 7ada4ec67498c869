// The Prometheus /metrics listener of every C++ program: a small HTTP/1.1 server on one thread
// of its own, answering `GET /metrics` with the program's counters (metrics_text.h), the control
// RPCs' latency histograms (rpc_latency.h) and its own request counters
// (EXO_METRICS_HTTP_COUNTERS). Anything else well-formed gets 404; a malformed, oversized or
// unfinished request gets 400 and is counted. One connection at a time, each closed after its
// answer and bounded in size (kMaxRequestBytes) and time (kConnectionTimeout), so a slow or
// hostile peer holds the port for at most that long and cannot grow memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "counter_list.h"
#include "metrics_text.h"

namespace exo::metrics {

inline constexpr size_t kMaxRequestBytes = 8192;
inline constexpr std::chrono::milliseconds kConnectionTimeout{2000};

// What the page shows of a program.
struct Source {
  std::string program;                   // "cache", "db", "proxy": names are exo_<program>_...
  std::vector<CounterDesc> descs;        // its counter list(s) from counter_list.h, in page order
  std::function<NamedValues()> values;   // their values now; called on the listener's thread
};

// The listener's own counters (counter_list.h), bumped by its one thread, read by the page.
struct HttpCounters {
#define EXO_FIELD(name, kind, help) std::atomic<uint64_t> name{0};
  EXO_METRICS_HTTP_COUNTERS(EXO_FIELD)
#undef EXO_FIELD
  NamedValues values() const;
};

// ---- pure parts ----

enum class Route { kIncomplete, kMetrics, kNotFound, kBadRequest };

// What the request bytes read so far ask for: kIncomplete until the head's blank line (CRLF
// CRLF) arrives, unless what is there is already malformed or `head` reached max_bytes without
// it (kBadRequest). A well-formed GET of /metrics (a query string is ignored) is kMetrics; any
// other well-formed request is kNotFound.
Route route_request(std::string_view head, size_t max_bytes = kMaxRequestBytes);

// The whole HTTP response: status line, headers (Content-Length, Connection: close), body.
std::string http_response(int status, std::string_view body,
                          std::string_view content_type = "text/plain; charset=utf-8");
inline constexpr std::string_view kExpositionType = "text/plain; version=0.0.4; charset=utf-8";

// The page: the source's counters, the process's RPC latency histograms, the listener's counters.
std::string render_page(const Source& source, const HttpCounters& own);

// "a.b.c.d:port" -> the parts; false for anything else (port 0 is allowed: any free port).
bool parse_ipv4_port(const std::string& address, uint32_t* ip_be, uint16_t* port);

// ---- the server ----

class MetricsHttpServer {
 public:
  MetricsHttpServer() = default;
  ~MetricsHttpServer() { stop(); }
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Listens on `address` ("<IPv4>:<port>") and serves from a new thread. An empty address is the
  // config's "no listener": nothing starts and "" is returned. Else "" or why not (bind error,
  // bad address), with nothing left running.
  std::string start(const std::string& address, Source source);
  // Stops the thread and closes the socket. Idempotent.
  void stop();

  uint16_t port() const { return port_; }  // the bound port (after start), 0 if not listening
  const HttpCounters& counters() const { return counters_; }

 private:
  void run();
  void serve_connection(int fd);

  Source source_;
  HttpCounters counters_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd: readable once stop() is called
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace exo::metrics
