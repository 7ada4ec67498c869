#include "mcload/connect.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loadgen/clock.h"

namespace exo::mcload {
namespace {

using loadgen::mono_ns;

// One connection; "" or the reason. A unix listener whose backlog is full refuses a
// non-blocking connect with EAGAIN: retried until the deadline, like a TCP SYN would be.
std::string connect_one(const Target& t, uint64_t deadline_ns, int* out) {
  const int fd = socket(t.is_unix ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (t.is_unix) {
    auto* sun = reinterpret_cast<sockaddr_un*>(&ss);
    sun->sun_family = AF_UNIX;
    std::memcpy(sun->sun_path, t.path.data(), t.path.size());  // plan_run checked the length
    len = sizeof(sockaddr_un);
  } else {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(t.ip);
    sin->sin_port = htons(t.port);
    len = sizeof(sockaddr_in);
    const int one = 1;  // requests are small and latency-bound: no Nagle delay
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
      const std::string e = std::string("setsockopt(TCP_NODELAY): ") + std::strerror(errno);
      close(fd);
      return e;
    }
  }
  for (;;) {
    if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN && t.is_unix && mono_ns() < deadline_ns) {
      loadgen::sleep_until_ns(mono_ns() + 1'000'000);
      continue;
    }
    if (errno != EINPROGRESS) {
      const std::string e = std::strerror(errno);
      close(fd);
      return e;
    }
    pollfd p{fd, POLLOUT, 0};
    for (;;) {
      const uint64_t now = mono_ns();
      if (now >= deadline_ns) {
        close(fd);
        return "timed out (--connect-timeout-ms)";
      }
      const int ms = static_cast<int>((deadline_ns - now + 999'999) / 1'000'000);
      const int r = poll(&p, 1, ms);
      if (r > 0) break;
      if (r < 0 && errno != EINTR) {
        const std::string e = std::string("poll: ") + std::strerror(errno);
        close(fd);
        return e;
      }
    }
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
    if (err != 0) {
      close(fd);
      return std::strerror(err);
    }
    break;
  }
  *out = fd;
  return "";
}

}  // namespace

bool connect_all(const Target& t, uint32_t n, uint32_t timeout_ms, std::vector<int>* fds, std::string* error) {
  const uint64_t deadline = mono_ns() + uint64_t{timeout_ms} * 1'000'000;
  fds->clear();
  fds->reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    int fd = -1;
    if (std::string e = connect_one(t, deadline, &fd); !e.empty()) {
      *error = "connection " + std::to_string(i + 1) + " of " + std::to_string(n) + " to " + t.describe() + ": " + e;
      for (int f : *fds) close(f);
      fds->clear();
      return false;
    }
    fds->push_back(fd);
  }
  return true;
}

}  // namespace exo::mcload
