#include "metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "log.h"
#include "rpc_latency.h"

namespace exo::metrics {
namespace {

constexpr std::string_view kCrlf = "\r\n";

bool is_tchar(char c) {  // RFC 9110 token characters
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
bool is_visible(char c) { return c > 0x20 && c < 0x7f; }

// One request line: METHOD SP /target SP HTTP/1.x. Empty method on a malformed line.
struct RequestLine {
  std::string_view method, target;
};
bool parse_request_line(std::string_view line, RequestLine* out) {
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp1 > 16) return false;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return false;
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  for (const char c : method)
    if (c < 'A' || c > 'Z') return false;
  if (target[0] != '/') return false;
  for (const char c : target)
    if (!is_visible(c)) return false;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
  *out = {method, target};
  return true;
}

// "Name: value" with a token name and a value of visible characters, spaces and tabs.
bool valid_header(std::string_view line) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  for (size_t i = 0; i < colon; ++i)
    if (!is_tchar(line[i])) return false;
  for (size_t i = colon + 1; i < line.size(); ++i)
    if (!is_visible(line[i]) && line[i] != ' ' && line[i] != '\t') return false;
  return true;
}

// Bytes that cannot appear in a request head at all (controls other than CR, LF, tab; DEL;
// anything non-ASCII): a binary or TLS client on the plain HTTP port is refused at once.
bool has_foreign_byte(std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\r' && c != '\n' && c != '\t') || c >= 0x7f) return true;
  }
  return false;
}

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    default: return "Internal Server Error";
  }
}

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Sends all of `data` before `deadline`; false if the peer is gone or too slow.
bool send_all(int fd, std::string_view data, std::chrono::steady_clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int ms = remaining_ms(deadline);
      if (ms == 0 || ::poll(&p, 1, ms) <= 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace

NamedValues HttpCounters::values() const {
  NamedValues out;
#define EXO_OUT(name, kind, help) out.emplace_back(#name, name.load(std::memory_order_relaxed));
  EXO_METRICS_HTTP_COUNTERS(EXO_OUT)
#undef EXO_OUT
  return out;
}

Route route_request(std::string_view head, size_t max_bytes) {
  const size_t end = head.find("\r\n\r\n");
  const std::string_view checked = end == std::string_view::npos ? head : head.substr(0, end + 2);
  if (has_foreign_byte(checked)) return Route::kBadRequest;
  // The request line can be judged as soon as it is complete, before the headers arrive.
  const size_t eol = checked.find(kCrlf);
  RequestLine rl;
  if (eol != std::string_view::npos && !parse_request_line(checked.substr(0, eol), &rl))
    return Route::kBadRequest;
  if (end == std::string_view::npos) {
    if (head.size() >= max_bytes) return Route::kBadRequest;
    // A line longer than the whole budget, or a bare LF where CRLF belongs, never completes well.
    const size_t lf = head.find('\n');
    if (lf != std::string_view::npos && (lf == 0 || head[lf - 1] != '\r')) return Route::kBadRequest;
    return Route::kIncomplete;
  }
  if (end + 4 > max_bytes) return Route::kBadRequest;
  // Headers: every line between the request line and the blank one.
  for (size_t pos = eol + 2; pos < end + 2;) {
    const size_t next = head.find(kCrlf, pos);
    if (!valid_header(head.substr(pos, next - pos))) return Route::kBadRequest;
    pos = next + 2;
  }
  const std::string_view path = rl.target.substr(0, rl.target.find('?'));
  return rl.method == "GET" && path == "/metrics" ? Route::kMetrics : Route::kNotFound;
}

std::string http_response(int status, std::string_view body, std::string_view content_type) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  out += "Content-Type: ";
  out += content_type;
  out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  out += body;
  return out;
}

std::string render_page(const Source& source, const HttpCounters& own) {
  std::string page;
  page.reserve(16384);
  if (source.values) append_counters(page, source.program, source.descs, source.values());
  rpc_latency().append(page);
  static constexpr CounterDesc kOwn[] = {EXO_METRICS_HTTP_COUNTERS(EXO_COUNTER_DESC)};
  append_counters(page, source.program, kOwn, own.values());
  return page;
}

bool parse_ipv4_port(const std::string& address, uint32_t* ip_be, uint16_t* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size() || address.size() - colon > 6) return false;
  uint32_t p = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9') return false;
    p = p * 10 + static_cast<uint32_t>(address[i] - '0');
  }
  if (p > 65535) return false;
  in_addr a{};
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &a) != 1) return false;
  *ip_be = a.s_addr;
  *port = static_cast<uint16_t>(p);
  return true;
}

std::string MetricsHttpServer::start(const std::string& address, Source source) {
  if (address.empty()) return "";
  if (listen_fd_ >= 0) return "already listening";
  uint32_t ip = 0;
  uint16_t port = 0;
  if (!parse_ipv4_port(address, &ip, &port)) return "'" + address + "': want <IPv4>:<port>";
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  const int one = 1;  // SO_REUSEADDR: a restarted program binds again while TIME_WAIT lingers
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    const std::string err = std::string("setsockopt SO_REUSEADDR: ") + std::strerror(errno);
    ::close(fd);
    return err;
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = ip;
  sa.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 16) != 0) {
    const std::string err = "cannot listen on " + address + ": " + std::strerror(errno);
    ::close(fd);
    return err;
  }
  socklen_t len = sizeof sa;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    const std::string err = std::string("getsockname: ") + std::strerror(errno);
    ::close(fd);
    return err;
  }
  const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) {
    const std::string err = std::string("eventfd: ") + std::strerror(errno);
    ::close(fd);
    return err;
  }
  listen_fd_ = fd;
  stop_fd_ = efd;
  port_ = ntohs(sa.sin_port);
  source_ = std::move(source);
  thread_ = std::thread([this] { run(); });
  return "";
}

void MetricsHttpServer::stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (::write(stop_fd_, &one, sizeof one) != sizeof one)
      LOG_WARN("metrics: cannot signal the listener to stop: %s", std::strerror(errno));
    thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  listen_fd_ = stop_fd_ = -1;
  port_ = 0;
}

void MetricsHttpServer::run() {
  pthread_setname_np(pthread_self(), "exo-metrics");
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      LOG_ERROR("metrics: poll: %s; the /metrics listener stops", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      // A peer that gave up (ECONNABORTED) or a descriptor shortness: not the listener's fault.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        LOG_WARN("metrics: accept: %s", std::strerror(errno));
        pollfd s{stop_fd_, POLLIN, 0};
        ::poll(&s, 1, 100);  // do not spin while descriptors are short
      }
      continue;
    }
    serve_connection(conn);
    ::close(conn);
  }
}

void MetricsHttpServer::serve_connection(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + kConnectionTimeout;
  std::string head;
  Route route = Route::kIncomplete;
  char buf[2048];
  while ((route = route_request(head)) == Route::kIncomplete) {
    pollfd p{fd, POLLIN, 0};
    const int ms = remaining_ms(deadline);
    const int ready = ms == 0 ? 0 : ::poll(&p, 1, ms);
    if (ready < 0 && errno == EINTR) continue;
    ssize_t n = 0;
    if (ready > 0) {
      n = ::recv(fd, buf, std::min(sizeof buf, kMaxRequestBytes - head.size()), 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    }
    if (n <= 0) {  // timed out, closed or failed before the head was complete
      if (head.empty()) return;  // a bare connect (a port probe): nothing to answer
      route = Route::kBadRequest;
      break;
    }
    head.append(buf, static_cast<size_t>(n));
  }
  std::string response;
  switch (route) {
    case Route::kMetrics:
      counters_.metrics_requests.fetch_add(1, std::memory_order_relaxed);
      try {
        response = http_response(200, render_page(source_, counters_), kExpositionType);
      } catch (const std::exception& e) {  // the program's values() threw: say so, keep serving
        LOG_WARN("metrics: cannot build the page: %s", e.what());
        response = http_response(500, "cannot build the page\n");
      }
      break;
    case Route::kNotFound:
      counters_.metrics_not_found.fetch_add(1, std::memory_order_relaxed);
      response = http_response(404, "only GET /metrics is served here\n");
      break;
    default:
      counters_.metrics_bad_requests.fetch_add(1, std::memory_order_relaxed);
      response = http_response(400, "malformed request\n");
      break;
  }
  if (!send_all(fd, response, deadline)) return;
  // Lingering close: a peer whose unread bytes (an oversized request) are still queued would get
  // a reset instead of the answer if we closed now. Read and drop them briefly first.
  ::shutdown(fd, SHUT_WR);
  const auto drain_until = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
  for (size_t drained = 0; drained < 16 * kMaxRequestBytes;) {
    pollfd p{fd, POLLIN, 0};
    const int ms = remaining_ms(drain_until);
    if (ms == 0 || ::poll(&p, 1, ms) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

}  // namespace exo::metrics
